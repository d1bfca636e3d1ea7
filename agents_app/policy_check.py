"""The policy simulator: every gate of SPEC §6.1 for a caller/target pair, and the child's tools."""

from __future__ import annotations

from typing import Any

from agents_app.gates import delegate_gates
from agents_app.snapshot import ConfigSnapshot
from policies_app.policy import (
    ALL_TOOLS,
    RATE_LIMIT_ACTIONS,
    RATE_LIMIT_COST,
    bounded_delegate_registry,
    filter_tools,
    independent_delegate_registry,
    is_auto_approved,
    needs_approval,
    readonly_refusal,
)
from policies_app.tracker import tracker_usage


def agent_tools(snap: ConfigSnapshot, alias: str) -> list[dict[str, Any]]:
    """One row per registry tool: allowed or not, and whether a call needs an operator."""
    agent = snap.agents[alias]
    risk = snap.risk_profiles.get(agent.risk_profile)
    allowed = set(filter_tools(ALL_TOOLS, risk)) if risk else set()
    return [
        {
            "tool": name,
            "allowed": name in allowed,
            "always_ask": bool(risk and needs_approval(risk, name)),
            "auto_approve": bool(risk and is_auto_approved(risk, name)),
        }
        for name in ALL_TOOLS
    ]


def child_tools(snap: ConfigSnapshot, *, caller: str, target: str, mode: str) -> list[str]:
    caller_spec, target_spec = snap.agents.get(caller), snap.agents.get(target)
    if caller_spec is None or target_spec is None:
        return []
    if not snap.runtime_of(target_spec).agentic:
        return []
    caller_risk = snap.risk_profiles.get(caller_spec.risk_profile)
    target_risk = snap.risk_profiles.get(target_spec.risk_profile)
    if target_risk is None:
        return []
    if mode == "independent":
        return list(independent_delegate_registry(target_risk))
    if caller_risk is None:
        return []
    return list(bounded_delegate_registry(filter_tools(ALL_TOOLS, caller_risk), caller_risk, target_risk))


def policy_check(
    snap: ConfigSnapshot, *, caller: str, target: str, mode: str | None, depth: int, background: bool
) -> dict[str, Any]:
    gates, child_mode = delegate_gates(
        snap, caller=caller, target=target, caller_depth=depth, background=background, mode=mode
    )
    rows = [{"gate": g.name, "passed": g.passed, "message": g.message} for g in gates]
    if all(g.passed for g in gates):
        rows.append(_budget_row(snap, caller=caller))
    refusal = next((r["message"] for r in rows if not r["passed"]), None)
    return {
        "caller": caller,
        "target": target,
        "mode": child_mode,
        "allowed": refusal is None,
        "refusal": refusal,
        "gates": rows,
        "child_tools": child_tools(snap, caller=caller, target=target, mode=child_mode)
        if refusal is None
        else [],
    }


def _budget_row(snap: ConfigSnapshot, *, caller: str) -> dict[str, Any]:
    """What the budget gate would say now, without recording anything."""
    caller_spec = snap.agents[caller]
    risk = snap.risk_profiles.get(caller_spec.risk_profile)
    if risk is not None and risk.level == "readonly":
        return {"gate": "budget", "passed": False, "message": readonly_refusal("delegate")}
    # The caller performs the delegate action, so admission spends the caller's budget.
    runtime = snap.runtime_of(caller_spec)
    usage = tracker_usage(key=caller)
    if usage["actions_last_hour"] >= runtime.max_actions_per_hour:
        return {"gate": "budget", "passed": False, "message": RATE_LIMIT_ACTIONS}
    if usage["cost_today_cents"] >= runtime.max_cost_per_day_cents:
        return {"gate": "budget", "passed": False, "message": RATE_LIMIT_COST}
    return {"gate": "budget", "passed": True, "message": ""}
