"""No escalation (SPEC §3.2): a child policy may only narrow its parent's.

Pure: works on anything that carries a `risk` and a `runtime` spec (e.g. `SecurityPolicy`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Protocol

from policies_app.policy import ALL_TOOLS, WILDCARD, effective_always_ask, filter_tools
from policies_app.specs import (
    DEFAULT_MCP_LIMITS,
    DEFAULT_SHELL_LIMITS,
    LEVEL_DISPLAY,
    LEVEL_RANK,
    RiskProfileSpec,
    RuntimeProfileSpec,
    effective_shell_limit,
)

ESCALATION_PREFIX = "subagent policy override escalates beyond parent: "


class PolicyLike(Protocol):
    @property
    def risk(self) -> RiskProfileSpec: ...

    @property
    def runtime(self) -> RuntimeProfileSpec: ...


class EscalationError(Exception):
    def __init__(self, violation: str) -> None:
        self.violation = violation
        self.message = ESCALATION_PREFIX + violation
        super().__init__(self.message)


def normalize_path(path: str) -> str:
    return os.path.normpath(os.path.expanduser(path.strip()))


def path_within(path: str, root: str) -> bool:
    p, r = normalize_path(path), normalize_path(root)
    return p == r or p.startswith(r.rstrip(os.sep) + os.sep)


def _first_uncontained(child: Iterable[str], roots: tuple[str, ...]) -> str | None:
    return next((p for p in child if not any(path_within(p, r) for r in roots)), None)


def _command_key(cmd: str) -> str:
    # Bare names are matched case-insensitively; anything with a path is matched exactly.
    cmd = cmd.strip()
    return cmd if "/" in cmd else cmd.lower()


def _level(child: PolicyLike, parent: PolicyLike) -> str | None:
    c, p = child.risk.level, parent.risk.level
    if LEVEL_RANK[c] > LEVEL_RANK[p]:
        return f"subagent autonomy={LEVEL_DISPLAY[c]} exceeds parent's {LEVEL_DISPLAY[p]}"
    return None


def _allowed_roots(child: PolicyLike, parent: PolicyLike) -> str | None:
    bad = _first_uncontained(child.risk.allowed_roots, parent.risk.allowed_roots)
    if bad is None:
        return None
    return f'subagent allowed_roots entry "{bad}" is not contained within any of the parent\'s allowed_roots entries'


def _allowed_roots_read_only(child: PolicyLike, parent: PolicyLike) -> str | None:
    roots = parent.risk.allowed_roots + parent.risk.allowed_roots_read_only
    bad = _first_uncontained(child.risk.allowed_roots_read_only, roots)
    if bad is None:
        return None
    return (
        f'subagent allowed_roots_read_only entry "{bad}" is not contained within '
        "the parent's allowed_roots or allowed_roots_read_only"
    )


def _allowed_roots_write_only(child: PolicyLike, parent: PolicyLike) -> str | None:
    roots = parent.risk.allowed_roots + parent.risk.allowed_roots_write_only
    bad = _first_uncontained(child.risk.allowed_roots_write_only, roots)
    if bad is None:
        return None
    return (
        f'subagent allowed_roots_write_only entry "{bad}" is not contained within '
        "the parent's allowed_roots or allowed_roots_write_only"
    )


def _allowed_commands(child: PolicyLike, parent: PolicyLike) -> str | None:
    parent_keys = {_command_key(c) for c in parent.risk.allowed_commands}
    if WILDCARD in parent_keys:
        return None
    for cmd in child.risk.allowed_commands:
        if _command_key(cmd) not in parent_keys:
            return f'subagent allowed_commands entry "{cmd}" is not present on the parent\'s allowed_commands'
    return None


def _workspace_only(child: PolicyLike, parent: PolicyLike) -> str | None:
    if parent.risk.effective_workspace_only and not child.risk.effective_workspace_only:
        return "subagent attempts to disable workspace_only but the parent enforces it"
    return None


def _forbidden_paths(child: PolicyLike, parent: PolicyLike) -> str | None:
    kept = {normalize_path(p) for p in child.risk.forbidden_paths}
    for path in parent.risk.forbidden_paths:
        if normalize_path(path) not in kept:
            return f'subagent drops forbidden_paths entry "{path}" that the parent enforces'
    return None


def _shell_env_passthrough(child: PolicyLike, parent: PolicyLike) -> str | None:
    for var in child.risk.shell_env_passthrough:
        if var not in parent.risk.shell_env_passthrough:
            return f'subagent shell_env_passthrough entry "{var}" is not present on the parent\'s list'
    return None


def _limit(field: str, *, effective: bool = False) -> Callable[[PolicyLike, PolicyLike], str | None]:
    """A runtime limit the child may not raise. `effective`: compared on effective values
    (a sandbox limit, where 0 means the default)."""

    def value(policy: PolicyLike) -> int:
        return effective_shell_limit(policy.runtime, field) if effective else getattr(policy.runtime, field)

    def check(child: PolicyLike, parent: PolicyLike) -> str | None:
        c, p = value(child), value(parent)
        if c > p:
            return f"subagent {field}={c} exceeds parent's {p}"
        return None

    return check


def _enforced_flag(field: str) -> Callable[[PolicyLike, PolicyLike], str | None]:
    def check(child: PolicyLike, parent: PolicyLike) -> str | None:
        if getattr(parent.risk, field) and not getattr(child.risk, field):
            return f"subagent attempts to set {field}=false but the parent enforces it"
        return None

    return check


def _tools(child: PolicyLike, parent: PolicyLike) -> str | None:
    available = set(filter_tools(ALL_TOOLS, parent.risk))
    for name in filter_tools(ALL_TOOLS, child.risk):
        if name not in available:
            return f'subagent tool "{name}" is not available to the parent'
    return None


def _always_ask(child: PolicyLike, parent: PolicyLike) -> str | None:
    kept = set(effective_always_ask(child.risk))
    if WILDCARD in kept:
        return None
    for tool in effective_always_ask(parent.risk):
        if tool not in kept:
            return f'subagent drops always_ask entry "{tool}" that the parent enforces'
    return None


def _shell_network(child: PolicyLike, parent: PolicyLike) -> str | None:
    if child.risk.shell_network and not parent.risk.shell_network:
        return "subagent attempts to set shell_network=true but the parent forbids it"
    return None


_AXES: tuple[Callable[[PolicyLike, PolicyLike], str | None], ...] = (
    _level,
    _allowed_roots,
    _allowed_roots_read_only,
    _allowed_roots_write_only,
    _allowed_commands,
    _workspace_only,
    _forbidden_paths,
    _shell_env_passthrough,
    _limit("max_actions_per_hour"),
    _limit("max_cost_per_day_cents"),
    _limit("shell_timeout_secs"),
    _enforced_flag("block_high_risk_commands"),
    _enforced_flag("require_approval_for_medium_risk"),
    _tools,
    _always_ask,
    _shell_network,
    _enforced_flag("sandbox_enabled"),
    *(_limit(name, effective=True) for name in DEFAULT_SHELL_LIMITS),
    *(_limit(name, effective=True) for name in DEFAULT_MCP_LIMITS),
)


def escalation_violation(child: PolicyLike, parent: PolicyLike) -> str | None:
    """The first axis (in SPEC §3.2 order) on which `child` grants more than `parent`."""
    for axis in _AXES:
        violation = axis(child, parent)
        if violation is not None:
            return violation
    return None


def ensure_no_escalation_beyond(child: PolicyLike, parent: PolicyLike) -> None:
    violation = escalation_violation(child, parent)
    if violation is not None:
        raise EscalationError(violation)
