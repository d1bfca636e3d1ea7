from __future__ import annotations

from agents_app.reachability import reachable, roster_text, unreachable_reason
from agents_app.snapshot import AgentSpec, ConfigSnapshot, DelegateEntry
from policies_app.specs import RiskProfileSpec


def snapshot(*agents: AgentSpec, forbidden: tuple[str, ...] = ("locked",)) -> ConfigSnapshot:
    profiles = {
        alias: RiskProfileSpec(alias=alias, delegation_mode="forbidden" if alias in forbidden else "allow")
        for alias in ("team", "other", "locked")
    }
    return ConfigSnapshot(
        risk_profiles=profiles, agents={a.alias: a for a in sorted(agents, key=lambda a: a.alias)}
    )


def agent(alias: str, risk_profile: str = "team", **kw: object) -> AgentSpec:
    return AgentSpec(alias=alias, model_provider="scripted.demo", risk_profile=risk_profile, **kw)  # type: ignore[arg-type]


def test_peers_with_the_same_risk_profile_are_reachable_in_bounded_mode() -> None:
    snap = snapshot(agent("main"), agent("writer"), agent("coder"), agent("outsider", "other"))
    assert reachable(snap, "main") == {"coder": "bounded", "writer": "bounded"}
    assert list(reachable(snap, "main")) == ["coder", "writer"]


def test_the_caller_never_reaches_itself() -> None:
    snap = snapshot(agent("main", delegates=(DelegateEntry("main"),)), agent("writer"))
    assert "main" not in reachable(snap, "main")


def test_an_explicit_entry_reaches_another_risk_profile_with_its_mode() -> None:
    snap = snapshot(
        agent("main", delegates=(DelegateEntry("outsider", "independent"),)), agent("outsider", "other")
    )
    assert reachable(snap, "main") == {"outsider": "independent"}


def test_an_explicit_mode_overrides_the_implicit_bounded_mode() -> None:
    snap = snapshot(agent("main", delegates=(DelegateEntry("writer", "independent"),)), agent("writer"))
    assert reachable(snap, "main") == {"writer": "independent"}


def test_disabled_and_non_delegable_agents_are_never_reachable() -> None:
    snap = snapshot(
        agent("main", delegates=(DelegateEntry("off"), DelegateEntry("judge"))),
        agent("off", enabled=False),
        agent("judge", delegable=False),
    )
    assert reachable(snap, "main") == {}


def test_same_risk_profile_peers_are_not_reached_when_the_flag_is_off() -> None:
    snap = snapshot(agent("main", delegate_same_risk_profile=False), agent("writer"))
    assert reachable(snap, "main") == {}


def test_nothing_is_reachable_when_delegation_is_forbidden() -> None:
    snap = snapshot(
        agent("main", "locked", delegates=(DelegateEntry("writer"),)),
        agent("writer"),
        agent("peer", "locked"),
    )
    assert reachable(snap, "main") == {}


def test_nothing_is_reachable_when_the_caller_risk_profile_is_missing() -> None:
    snap = snapshot(agent("main", "ghost", delegates=(DelegateEntry("writer"),)), agent("writer"))
    assert reachable(snap, "main") == {}


def test_an_empty_risk_profile_is_not_shared() -> None:
    snap = snapshot(agent("main", ""), agent("writer", ""))
    assert reachable(snap, "main") == {}


def test_roster_text_lists_sorted_aliases_or_none_configured() -> None:
    snap = snapshot(agent("main"), agent("zed"), agent("alpha"), agent("solo", "other"))
    assert roster_text(snap, "main") == "alpha, zed"
    assert roster_text(snap, "solo") == "(none configured)"


def test_a_reachable_target_has_no_reason() -> None:
    snap = snapshot(agent("main"), agent("writer"))
    assert unreachable_reason(snap, "main", "writer") is None


def test_reason_for_an_unknown_agent() -> None:
    assert (
        unreachable_reason(snapshot(agent("main")), "main", "ghost")
        == 'delegate target "ghost" is not reachable from "main": no agent with that alias exists in the loaded config'
    )


def test_reason_for_a_disabled_agent() -> None:
    snap = snapshot(
        agent("main", delegates=(DelegateEntry("off"),)), agent("off", enabled=False, delegable=False)
    )
    assert (
        unreachable_reason(snap, "main", "off")
        == 'delegate target "off" is not reachable from "main": the target agent is disabled'
    )


def test_reason_for_a_non_delegable_agent() -> None:
    snap = snapshot(agent("main"), agent("judge", delegable=False))
    assert (
        unreachable_reason(snap, "main", "judge")
        == 'delegate target "judge" is not reachable from "main": the target agent is not delegable'
    )


def test_reason_for_a_different_risk_profile() -> None:
    snap = snapshot(agent("main"), agent("outsider", "other"))
    assert unreachable_reason(snap, "main", "outsider") == (
        'delegate target "outsider" is not reachable from "main": different risk profile '
        '(caller uses "team", target uses "other"). delegate_same_risk_profile only reaches agents '
        "with the same risk profile; add an explicit [agents.main].delegates entry with the intended mode, "
        "or change one agent's risk_profile."
    )


def test_reason_when_same_risk_profile_reach_is_disabled() -> None:
    snap = snapshot(agent("main", delegate_same_risk_profile=False), agent("writer"))
    assert unreachable_reason(snap, "main", "writer") == (
        'delegate target "writer" is not reachable from "main": delegate_same_risk_profile is disabled '
        "and the target is not listed in [agents.main].delegates"
    )


def test_generic_reason_for_the_caller_itself() -> None:
    snap = snapshot(agent("main"))
    assert unreachable_reason(snap, "main", "main") == (
        'delegate target "main" is not reachable from "main"; add it to [agents.main].delegates '
        "or share a risk profile with delegate_same_risk_profile enabled"
    )


def test_generic_reason_when_delegation_is_forbidden() -> None:
    snap = snapshot(agent("main", "locked"), agent("peer", "locked"))
    assert unreachable_reason(snap, "main", "peer") == (
        'delegate target "peer" is not reachable from "main"; add it to [agents.main].delegates '
        "or share a risk profile with delegate_same_risk_profile enabled"
    )


def test_diagnostics_follow_their_order() -> None:
    # Disabled wins over not delegable, which wins over a different risk profile.
    snap = snapshot(
        agent("main"),
        agent("x", "other", enabled=False, delegable=False),
        agent("y", "other", delegable=False),
    )
    assert (
        unreachable_reason(snap, "main", "x")
        == 'delegate target "x" is not reachable from "main": the target agent is disabled'
    )
    assert (
        unreachable_reason(snap, "main", "y")
        == 'delegate target "y" is not reachable from "main": the target agent is not delegable'
    )
