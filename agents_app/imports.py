"""Importing a whole configuration file: one plan for REST, the dashboard and the command line.

An import never loses anything silently. Entries that the file does not mention are kept
(and listed) unless the import prunes (`prune=true`), in which case they are deleted and the
dry run shows them as `- …` changes; a file without `[delegate]` keeps the current settings
the same way, and so does one without `[mcp]` for its switches. A file in which nothing is recognised is refused by the reader
(`config_io.NOTHING_RECOGNISED`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from agents_app.config_io import ImportResult
from agents_app.selectors import config_snapshot_get
from agents_app.services import ConfigValidationError, config_prepare, config_update_prepared
from agents_app.snapshot import ConfigSnapshot, McpBundleSpec

Error = tuple[str, str]
KEPT_LINE = "= {} (not in the file: kept; prune=true deletes it)"


@dataclass(frozen=True)
class ImportPlan:
    snapshot: ConfigSnapshot
    warnings: list[str]
    changes: list[str] = field(default_factory=list)
    diff: str = ""
    kept: list[str] = field(default_factory=list)
    errors: list[Error] = field(default_factory=list)

    def summary_lines(self) -> list[str]:
        """The import summary every client shows: warnings, changes, then what was kept."""
        return (
            [f"warning: {w}" for w in self.warnings]
            + list(self.changes)
            + [KEPT_LINE.format(path) for path in self.kept]
        )


def _entry_path(section: str, key: str) -> str:
    if section == "providers":
        ty, _, alias = key.partition(".")
        return f"providers.models.{ty}.{alias}"
    if section == "mcp_servers":
        return f"mcp.servers.{key}"
    return f"{section}.{key}"


def keep_absent(
    old: ConfigSnapshot, new: ConfigSnapshot, *, has_delegate: bool, has_mcp: bool = True
) -> tuple[ConfigSnapshot, list[str]]:
    """`new` plus every entry of `old` it lacks (and `old`'s [delegate] and [mcp] switches when
    the file had none)."""
    kept: list[str] = []
    changes: dict[str, Any] = {}
    for section in ("providers", "risk_profiles", "runtime_profiles", "agents", "mcp_servers", "mcp_bundles"):
        current: dict[str, Any] = getattr(old, section)
        incoming: dict[str, Any] = getattr(new, section)
        missing = [key for key in current if key not in incoming]
        if missing:
            merged = dict(incoming)
            for key in missing:
                merged[key] = current[key]
                kept.append(_entry_path(section, key))
            changes[section] = dict(sorted(merged.items()))
    if not has_delegate:
        changes["delegate"] = old.delegate
    if not has_mcp:
        changes["mcp"] = old.mcp
    return (dataclasses.replace(new, **changes) if changes else new), kept


def with_bundle(snapshot: ConfigSnapshot, servers: list[str], bundle: str) -> ConfigSnapshot:
    """`snapshot` with `servers` added to `[mcp_bundles.<bundle>]` (created when absent)."""
    if not bundle:
        return snapshot
    current = snapshot.mcp_bundles.get(bundle)
    spec = McpBundleSpec(
        alias=bundle,
        servers=tuple(dict.fromkeys([*(current.servers if current else ()), *servers])),
        exclude=current.exclude if current else (),
    )
    return dataclasses.replace(
        snapshot, mcp_bundles=dict(sorted({**snapshot.mcp_bundles, bundle: spec}.items()))
    )


def import_plan(
    result: ImportResult, *, prune: bool, old: ConfigSnapshot | None = None, bundle: str = ""
) -> ImportPlan:
    """What importing `result` would do; `errors` is non-empty when it would be refused.
    `bundle` (an mcpServers import) also grants the file's servers through that bundle."""
    old = config_snapshot_get() if old is None else old
    new, kept = (
        (result.snapshot, [])
        if prune
        else keep_absent(old, result.snapshot, has_delegate=result.has_delegate, has_mcp=result.has_mcp)
    )
    new = with_bundle(new, list(result.snapshot.mcp_servers), bundle)
    try:
        prepared = config_prepare(old=old, new=new)
    except ConfigValidationError as exc:
        return ImportPlan(snapshot=new, warnings=list(result.warnings), kept=kept, errors=exc.errors)
    return ImportPlan(
        snapshot=prepared.snapshot,
        warnings=list(result.warnings),
        changes=prepared.changes,
        diff=prepared.diff,
        kept=kept,
    )


def import_apply(
    result: ImportResult, *, prune: bool, user: Any = None, summary: str = "import", bundle: str = ""
) -> tuple[ImportPlan, Any]:
    """Import for real: the plan as saved (what a dry run shows) and the revision (None: no
    change). Raises ConfigValidationError with every error."""
    kept: list[str] = []

    def mutate(current: ConfigSnapshot) -> ConfigSnapshot:
        # Kept entries are taken from the configuration as it is at the save.
        nonlocal kept
        if prune:
            snapshot = result.snapshot
        else:
            snapshot, kept = keep_absent(
                current, result.snapshot, has_delegate=result.has_delegate, has_mcp=result.has_mcp
            )
        return with_bundle(snapshot, list(result.snapshot.mcp_servers), bundle)

    prepared, revision = config_update_prepared(mutate=mutate, user=user, summary=summary)
    plan = ImportPlan(
        snapshot=prepared.snapshot,
        warnings=list(result.warnings),
        changes=prepared.changes,
        diff=prepared.diff,
        kept=kept,
    )
    return plan, revision
