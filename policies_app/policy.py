"""Effective policy of an agent (SPEC §3.1) and the tool registry of a child (SPEC §3.4).

Pure functions over frozen specs: no ORM, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec

ALL_TOOLS: tuple[str, ...] = (
    "file_read",
    "file_write",
    "file_list",
    "shell",
    "memory_store",
    "memory_recall",
    "model_switch",
    "spawn_subagent",
    "delegate",
    "sessions_yield",
)
# Tools that change something; `level = readonly` refuses them at call time.
ACTING_TOOLS: frozenset[str] = frozenset(
    {"file_write", "shell", "memory_store", "spawn_subagent", "delegate", "model_switch"}
)
# What the `read_only_role` preset excludes: writes, edits, shell, memory writes, spawns, delegates.
WRITING_TOOLS: tuple[str, ...] = ("file_write", "shell", "memory_store", "spawn_subagent", "delegate")

WILDCARD = "*"
# An MCP tool is offered as `<server>__<tool>` (docs/tools.md#mcp-tools); server names never
# contain the separator, so the first one splits a name.
MCP_SEPARATOR = "__"
# Offered only with `[mcp] deferred_loading = true`, to find and activate deferred MCP tools.
TOOL_SEARCH = "tool_search"
RATE_LIMIT_ACTIONS = "Rate limit exceeded: action budget exhausted"
RATE_LIMIT_COST = "Rate limit exceeded: daily cost budget exhausted"


@dataclass(frozen=True)
class SecurityPolicy:
    agent: str
    risk: RiskProfileSpec
    runtime: RuntimeProfileSpec
    workspace: str
    tracker_key: str


def readonly_refusal(name: str) -> str:
    return f"Security policy: read-only mode, cannot perform '{name}'"


def is_acting_tool(name: str) -> bool:
    return name in ACTING_TOOLS


def blocked_by_readonly(risk: RiskProfileSpec, name: str) -> bool:
    return risk.level == "readonly" and name in ACTING_TOOLS


def is_mcp_name(name: str) -> bool:
    return MCP_SEPARATOR in name


def mcp_tool_name(server: str, tool: str) -> str:
    return f"{server}{MCP_SEPARATOR}{tool}"


def mcp_server_of(name: str) -> str:
    return name.split(MCP_SEPARATOR, 1)[0]


def is_tool_allowed(risk: RiskProfileSpec, name: str) -> bool:
    """ZeroClaw's rule: deny wins; an empty allow-list admits everything; a non-empty one
    admits its names and every MCP tool (a name containing `__`)."""
    if risk.deny_all_tools or name in risk.excluded_tools:
        return False
    return not risk.allowed_tools or name in risk.allowed_tools or is_mcp_name(name)


McpCeiling = tuple[tuple[str, ...], bool]  # a bounded delegation target's (excluded_tools, deny_all_tools)


def mcp_ceiling(risk: RiskProfileSpec) -> McpCeiling:
    return (tuple(risk.excluded_tools), risk.deny_all_tools)


def mcp_tool_verdict(risk: RiskProfileSpec, ceilings: Iterable[McpCeiling], name: str) -> str:
    """Why an MCP tool is blocked for a run, or "" when it is admitted: its risk profile, then
    the profile of each bounded delegation target on the way (same rule: an allow-list never
    keeps out a name containing `__`, so only exclusions and deny-all narrow)."""
    if risk.deny_all_tools:
        return "deny_all_tools is set"
    if name in risk.excluded_tools:
        return "listed in excluded_tools"
    for excluded, deny_all in ceilings:
        if deny_all:
            return "a bounded delegate's target sets deny_all_tools"
        if name in excluded:
            return "listed in a bounded delegate's target excluded_tools"
    return ""


def mcp_needs_approval(risk: RiskProfileSpec, name: str, annotations: Mapping[str, object] | None) -> bool:
    """An MCP call is held for an operator when `always_ask` names it, or when the server
    annotates it `destructiveHint: true` without `readOnlyHint: true` and the profile does not
    list its prefixed name (or `"*"`) in `auto_approve`. An unannotated tool follows the
    profile like any other."""
    if needs_approval(risk, name):
        return True
    notes = annotations or {}
    destructive = notes.get("destructiveHint") is True and notes.get("readOnlyHint") is not True
    return destructive and not is_auto_approved(risk, name)


def mcp_is_read_only(annotations: Mapping[str, object] | None) -> bool:
    return (annotations or {}).get("readOnlyHint") is True


def filter_tools(registry: Iterable[str], risk: RiskProfileSpec) -> tuple[str, ...]:
    return tuple(name for name in registry if is_tool_allowed(risk, name))


def _clean(entries: Iterable[str]) -> tuple[str, ...]:
    return tuple(s for s in (e.strip() for e in entries) if s)


def effective_always_ask(risk: RiskProfileSpec) -> tuple[str, ...]:
    return _clean(risk.always_ask)


def needs_approval(risk: RiskProfileSpec, name: str) -> bool:
    # always_ask wins over auto_approve, so auto_approve never lifts this.
    asked = effective_always_ask(risk)
    return WILDCARD in asked or name in asked


def is_auto_approved(risk: RiskProfileSpec, name: str) -> bool:
    approved = _clean(risk.auto_approve)
    return (WILDCARD in approved or name in approved) and not needs_approval(risk, name)


def _without(registry: Iterable[str], *names: str) -> tuple[str, ...]:
    return tuple(t for t in registry if t not in names)


def subagent_registry(parent_registry: Iterable[str], parent_risk: RiskProfileSpec) -> tuple[str, ...]:
    # A subagent inherits the parent's model; it may not switch it behind the parent's back.
    return _without(filter_tools(parent_registry, parent_risk), "model_switch")


def bounded_delegate_registry(
    caller_registry: Iterable[str], caller_risk: RiskProfileSpec, target_risk: RiskProfileSpec
) -> tuple[str, ...]:
    """The caller is the ceiling: an empty result means NO tools, never "unrestricted"."""
    ceiling = filter_tools(caller_registry, caller_risk)
    # model_switch belongs to top-level runs only (SPEC §7).
    return _without(filter_tools(ceiling, target_risk), "delegate", "model_switch")


def independent_delegate_registry(target_risk: RiskProfileSpec) -> tuple[str, ...]:
    return _without(filter_tools(ALL_TOOLS, target_risk), "delegate", "model_switch")
