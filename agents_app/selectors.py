"""Read-side of the configuration: the database as one immutable snapshot."""

from __future__ import annotations

from typing import Any

from agents_app.models import Agent, ConfigRevision, McpBundle, McpServer, McpSettings, ModelProvider
from agents_app.snapshot import ConfigSnapshot, McpGlobals
from policies_app.models import DelegateSettings, RiskProfile, RuntimeProfile
from policies_app.specs import DelegateGlobals

# The snapshot as of the newest revision: (revision id, its time) -> snapshot. Every write of
# the configuration records a revision in its transaction (`services._commit`), so a reader
# that sees the same newest revision sees the same rows; the time tells apart revisions that
# reuse an id after a rollback or a flush.
_snapshot_cache: tuple[tuple[int, Any] | None, ConfigSnapshot] | None = None


def config_snapshot_get() -> ConfigSnapshot:
    """The whole configuration, read again only when a revision was saved since: one query
    instead of five (every run start, delegate call and model switch reads it)."""
    global _snapshot_cache
    newest = ConfigRevision.objects.order_by("-id").values_list("id", "created_at").first()
    cached = _snapshot_cache
    if newest is not None and cached is not None and cached[0] == newest:
        return cached[1]
    snapshot = config_snapshot_read()
    _snapshot_cache = (newest, snapshot)
    return snapshot


def config_snapshot_forget() -> None:
    """Drop the cached snapshot (after writing configuration rows without a revision)."""
    global _snapshot_cache
    _snapshot_cache = None


def config_snapshot_read() -> ConfigSnapshot:
    """The configuration rows as they are now."""
    settings_row = DelegateSettings.objects.filter(pk=1).first()
    mcp_row = McpSettings.objects.filter(pk=1).first()
    return ConfigSnapshot(
        providers={p.ref: p.to_spec() for p in ModelProvider.objects.order_by("type", "alias")},
        risk_profiles={r.alias: r.to_spec() for r in RiskProfile.objects.order_by("alias")},
        runtime_profiles={r.alias: r.to_spec() for r in RuntimeProfile.objects.order_by("alias")},
        agents={a.alias: a.to_spec() for a in Agent.objects.order_by("alias")},
        delegate=settings_row.to_spec() if settings_row else DelegateGlobals(),
        mcp=mcp_row.to_spec() if mcp_row else McpGlobals(),
        mcp_servers={s.name: s.to_spec() for s in McpServer.objects.order_by("name")},
        mcp_bundles={b.alias: b.to_spec() for b in McpBundle.objects.order_by("alias")},
    )


def config_revision_list(*, limit: int = 100) -> list[ConfigRevision]:
    return list(ConfigRevision.objects.select_related("created_by").order_by("-id")[:limit])
