"""Reachability (SPEC §3.3): one function serves the roster shown to the model and admission.

Pure over a `ConfigSnapshot`.
"""

from __future__ import annotations

from agents_app.snapshot import AgentSpec, ConfigSnapshot

NO_ROSTER = "(none configured)"


def _may_delegate(snapshot: ConfigSnapshot, caller: AgentSpec) -> bool:
    risk = snapshot.risk_profiles.get(caller.risk_profile)
    return risk is not None and risk.delegation_mode == "allow"


def _is_target(agent: AgentSpec | None) -> bool:
    return agent is not None and agent.enabled and agent.delegable


def reachable(snapshot: ConfigSnapshot, caller_alias: str) -> dict[str, str]:
    """Target alias -> mode ("bounded" | "independent"), sorted by alias."""
    caller = snapshot.agents.get(caller_alias)
    if caller is None or not _may_delegate(snapshot, caller):
        return {}
    found: dict[str, str] = {}
    if caller.delegate_same_risk_profile and caller.risk_profile:
        for alias, agent in snapshot.agents.items():
            if agent.risk_profile == caller.risk_profile and _is_target(agent):
                found[alias] = "bounded"
    for entry in caller.delegates:
        # Trimmed, as validation and the rename/delete rewrites read it.
        name = entry.agent.strip()
        if _is_target(snapshot.agents.get(name)):
            found[name] = entry.mode
    found.pop(caller_alias, None)
    return dict(sorted(found.items()))


def roster_text(snapshot: ConfigSnapshot, caller: str) -> str:
    return ", ".join(reachable(snapshot, caller)) or NO_ROSTER


def unreachable_reason(snapshot: ConfigSnapshot, caller_alias: str, target_alias: str) -> str | None:
    """None when reachable, else the first matching diagnostic of SPEC §3.3.

    A caller whose delegation policy is `forbidden` reaches nothing; the delegate tool
    reports that with its own message before asking here, so it falls to the generic case.
    """
    if target_alias in reachable(snapshot, caller_alias):
        return None
    head = f'delegate target "{target_alias}" is not reachable from "{caller_alias}"'
    target = snapshot.agents.get(target_alias)
    if target is None:
        return f"{head}: no agent with that alias exists in the loaded config"
    if not target.enabled:
        return f"{head}: the target agent is disabled"
    if not target.delegable:
        return f"{head}: the target agent is not delegable"
    caller = snapshot.agents.get(caller_alias)
    listed = caller is not None and any(e.agent.strip() == target_alias for e in caller.delegates)
    if caller is not None and not listed:
        if caller.delegate_same_risk_profile and caller.risk_profile != target.risk_profile:
            return (
                f'{head}: different risk profile (caller uses "{caller.risk_profile}", '
                f'target uses "{target.risk_profile}"). delegate_same_risk_profile only reaches '
                "agents with the same risk profile; add an explicit "
                f"[agents.{caller_alias}].delegates entry with the intended mode, "
                "or change one agent's risk_profile."
            )
        if not caller.delegate_same_risk_profile:
            return (
                f"{head}: delegate_same_risk_profile is disabled and the target is not listed "
                f"in [agents.{caller_alias}].delegates"
            )
    return (
        f"{head}; add it to [agents.{caller_alias}].delegates or share a risk profile "
        "with delegate_same_risk_profile enabled"
    )
