"""Where a file tool may act: the workspace, allowed roots and forbidden paths of a risk profile.

The rule, decided on the fully resolved path (symlinks followed, `..` collapsed):

* Grants: the workspace and `allowed_roots` grant read and write, `allowed_roots_read_only`
  grants read, `allowed_roots_write_only` grants write. Relative roots are joined to the
  workspace; `~` is expanded.
* `forbidden_paths` refuse a path beneath them, unless a grant for the same kind of access
  contains the path and lies at or beneath the forbidden entry: the more specific entry wins.
  So a workspace under `/tmp` stays usable although `/tmp` is forbidden, while a forbidden
  `~/.ssh` inside a workspace at `~` is still refused.
* With `workspace_only` in effect, a path must also lie inside a grant for that access.
  Without it, any path that is not forbidden is allowed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from runs_app.engine.tools.base import LocalToolContext

READ_WRITE, READ_ONLY, WRITE_ONLY = "rw", "ro", "wo"


class PathDenied(Exception):
    """A path the policy refuses; the message is shown to the model as it is."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class _Grant:
    root: Path
    mode: str

    def permits(self, for_write: bool) -> bool:
        return self.mode == READ_WRITE or self.mode == (WRITE_ONLY if for_write else READ_ONLY)


def _canonical(entry: str | Path, base: Path) -> Path:
    path = Path(os.path.expanduser(entry))
    if not path.is_absolute():
        path = base / path
    return path.resolve()


def workspace_of(ctx: LocalToolContext) -> Path:
    return Path(os.path.expanduser(ctx.workspace)).resolve()


def _grants(ctx: LocalToolContext, workspace: Path) -> list[_Grant]:
    grants = [_Grant(workspace, READ_WRITE)]
    for entries, mode in (
        (ctx.risk.allowed_roots, READ_WRITE),
        (ctx.risk.allowed_roots_read_only, READ_ONLY),
        (ctx.risk.allowed_roots_write_only, WRITE_ONLY),
    ):
        grants += [_Grant(_canonical(e, workspace), mode) for e in entries if e.strip() not in ("", "*")]
    return grants


def _forbidden(ctx: LocalToolContext, workspace: Path) -> list[Path]:
    roots: set[Path] = set()
    for entry in ctx.risk.forbidden_paths:
        if not entry.strip():
            continue
        written = Path(os.path.expanduser(entry))
        if not written.is_absolute():
            written = workspace / written
        # Both spellings: `/bin` may be a symlink to `/usr/bin`, and either can be named.
        roots.add(Path(os.path.normpath(written)))
        roots.add(written.resolve())
    return sorted(roots)


def resolve_path(ctx: LocalToolContext, raw: str, *, for_write: bool) -> Path:
    """The resolved path `raw` names, or PathDenied when the policy refuses that access."""
    if not raw.strip():
        raise PathDenied("Path is empty")
    if "\x00" in raw:
        raise PathDenied("Path contains a null byte")
    try:
        workspace = workspace_of(ctx)
        target = _canonical(raw, workspace)
        grants = _grants(ctx, workspace)
        forbidden = _forbidden(ctx, workspace)
    except (OSError, RuntimeError, ValueError) as exc:  # symlink loops, over-long names
        raise PathDenied(f"Path '{raw}' cannot be resolved: {exc}") from exc

    containing = [g for g in grants if target.is_relative_to(g.root)]
    granting = [g.root for g in containing if g.permits(for_write)]
    blocked = any(
        not any(root.is_relative_to(entry) for root in granting)
        for entry in forbidden
        if target.is_relative_to(entry)
    )
    if not blocked and (granting or not ctx.risk.effective_workspace_only):
        return target
    if containing and not granting:
        if for_write:
            raise PathDenied(f"Path '{raw}' is in a read-only root and cannot be written")
        raise PathDenied(f"Path '{raw}' is in a write-only root and cannot be read")
    if blocked:
        raise PathDenied(f"Path '{raw}' is forbidden by policy")
    raise PathDenied(f"Path '{raw}' is outside the workspace and allowed roots")
