"""The admission gates of `delegate` (SPEC §6.1 checks 2–7), pure over one snapshot.

The engine's delegate tool, `POST /runs/{id}/delegate/` and the policy simulator
(`POST /policy/check/`, the delegation map) all call these; there is no second copy."""

from __future__ import annotations

from dataclasses import dataclass

from agents_app.reachability import reachable, roster_text, unreachable_reason
from agents_app.snapshot import ConfigSnapshot
from policies_app.policy import effective_always_ask

ALWAYS_ASK_DOC = 'See the documentation, "Delegation & SubAgents" > "What\'s not supported".'


@dataclass(frozen=True)
class Gate:
    name: str
    passed: bool
    message: str = ""
    # refusal class, so REST can pick the HTTP status: "not_found" | "policy" | "budget" | "error"
    kind: str = "policy"


def depth_refusal(depth: int, max_depth: int, *, background: bool) -> str:
    text = f"Delegation depth limit reached ({depth}/{max_depth})."
    return text if background else text + " Cannot delegate further to prevent infinite loops."


def delegation_forbidden_message(caller: str, profile: str) -> str:
    return (
        f'delegation is forbidden for caller "{caller}" by risk profile "{profile}" delegation_policy; '
        f'set [risk_profiles.{profile}].delegation_policy mode = "allow"'
    )


def delegate_gates(
    snapshot: ConfigSnapshot,
    *,
    caller: str,
    target: str,
    caller_depth: int = 0,
    background: bool = False,
    mode: str | None = None,
) -> tuple[list[Gate], str]:
    """Run checks 2–7 in order, stopping at the first refusal.

    Returns (gates evaluated, the mode the child would run in)."""
    gates: list[Gate] = []
    target_spec = snapshot.agents.get(target)
    if target_spec is None:
        roster = roster_text(snapshot, caller)
        gates.append(
            Gate("known_agent", False, f"Unknown agent '{target}'. Available agents: {roster}", "not_found")
        )
        return gates, mode or "bounded"
    gates.append(Gate("known_agent", True))

    caller_spec = snapshot.agents.get(caller)
    caller_runtime = snapshot.runtime_of(caller_spec) if caller_spec else snapshot.runtime_of(target_spec)
    max_depth = caller_runtime.effective_max_delegation_depth
    if caller_depth >= max_depth:
        gates.append(Gate("depth", False, depth_refusal(caller_depth, max_depth, background=background)))
        return gates, mode or "bounded"
    gates.append(Gate("depth", True))

    profile = caller_spec.risk_profile if caller_spec else ""
    risk = snapshot.risk_profiles.get(profile)
    if risk is None or risk.delegation_mode != "allow":
        gates.append(Gate("delegation_policy", False, delegation_forbidden_message(caller, profile)))
        return gates, mode or "bounded"
    gates.append(Gate("delegation_policy", True))

    reason = unreachable_reason(snapshot, caller, target)
    if reason:
        gates.append(Gate("reachability", False, reason))
        return gates, mode or "bounded"
    gates.append(Gate("reachability", True))
    child_mode = mode or reachable(snapshot, caller).get(target, "bounded")

    target_risk = snapshot.risk_profiles.get(target_spec.risk_profile)
    asks = effective_always_ask(target_risk) if target_risk else ()
    if child_mode == "independent" and asks:
        gates.append(
            Gate(
                "independent_always_ask",
                False,
                f'delegate target "{target}" cannot run in independent mode from "{caller}": risk profile '
                f'"{target_spec.risk_profile}" has always_ask entries ({", ".join(asks)}). {ALWAYS_ASK_DOC}',
            )
        )
        return gates, child_mode
    gates.append(Gate("independent_always_ask", True))

    if snapshot.runtime_of(target_spec).agentic and target_risk is None:
        gates.append(
            Gate(
                "agentic_risk_profile",
                False,
                f"Agent '{target}' is agentic but risk_profile '{target_spec.risk_profile}' is not configured",
                "error",
            )
        )
        return gates, child_mode
    gates.append(Gate("agentic_risk_profile", True))
    return gates, child_mode
