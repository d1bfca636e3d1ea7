from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agents_app.reachability import reachable, unreachable_reason
from agents_app.snapshot import AgentSpec, ConfigSnapshot, DelegateEntry
from policies_app.escalation import ensure_no_escalation_beyond, escalation_violation
from policies_app.policy import (
    ALL_TOOLS,
    SecurityPolicy,
    bounded_delegate_registry,
    filter_tools,
    independent_delegate_registry,
    subagent_registry,
)
from policies_app.specs import LEVELS, RiskProfileSpec, RuntimeProfileSpec

tool_lists = st.lists(st.sampled_from(ALL_TOOLS), max_size=6, unique=True).map(tuple)
path_lists = st.lists(st.sampled_from(["/a", "/a/b", "/c", "~/x", "/etc", "/"]), max_size=3).map(tuple)
command_lists = st.lists(st.sampled_from(["git", "LS", "*", "/bin/sh", "rm"]), max_size=3).map(tuple)

risks = st.builds(
    RiskProfileSpec,
    alias=st.just("p"),
    level=st.sampled_from(LEVELS),
    workspace_only=st.booleans(),
    allowed_roots=path_lists,
    allowed_roots_read_only=path_lists,
    allowed_roots_write_only=path_lists,
    forbidden_paths=path_lists,
    allowed_commands=command_lists,
    shell_env_passthrough=st.lists(st.sampled_from(["HOME", "PATH"]), max_size=2).map(tuple),
    block_high_risk_commands=st.booleans(),
    require_approval_for_medium_risk=st.booleans(),
    allowed_tools=tool_lists,
    excluded_tools=tool_lists,
    always_ask=st.lists(st.sampled_from([*ALL_TOOLS, "*", " ", ""]), max_size=3).map(tuple),
    delegation_mode=st.sampled_from(["allow", "forbidden"]),
    deny_all_tools=st.booleans(),
)
runtimes = st.builds(
    RuntimeProfileSpec,
    alias=st.just("r"),
    max_actions_per_hour=st.integers(0, 100),
    max_cost_per_day_cents=st.integers(0, 1000),
    shell_timeout_secs=st.integers(0, 600),
)
policies = st.builds(
    SecurityPolicy,
    agent=st.just("a"),
    risk=risks,
    runtime=runtimes,
    workspace=st.just("/w"),
    tracker_key=st.just("a"),
)


@given(tool_lists, risks)
def test_filtering_never_widens_a_registry(registry: tuple[str, ...], risk: RiskProfileSpec) -> None:
    assert set(filter_tools(registry, risk)) <= set(registry)


@given(tool_lists, risks, risks)
def test_a_bounded_child_never_gets_a_tool_the_caller_lacks(
    registry: tuple[str, ...], caller: RiskProfileSpec, target: RiskProfileSpec
) -> None:
    child = bounded_delegate_registry(registry, caller, target)
    assert set(child) <= set(filter_tools(registry, caller))
    assert set(child) <= set(filter_tools(registry, target))
    assert "delegate" not in child


@given(tool_lists, risks, risks)
def test_an_empty_intersection_never_becomes_unrestricted(
    registry: tuple[str, ...], caller: RiskProfileSpec, target: RiskProfileSpec
) -> None:
    caller_tools = set(filter_tools(registry, caller)) - {"delegate"}
    target_tools = set(filter_tools(ALL_TOOLS, target))
    if not caller_tools & target_tools:
        assert bounded_delegate_registry(registry, caller, target) == ()


@given(tool_lists, risks)
def test_a_subagent_registry_never_widens_the_parent(
    registry: tuple[str, ...], risk: RiskProfileSpec
) -> None:
    child = subagent_registry(registry, risk)
    assert set(child) <= set(filter_tools(registry, risk))
    assert "model_switch" not in child


@given(risks)
def test_an_independent_delegate_never_gets_delegate(risk: RiskProfileSpec) -> None:
    assert "delegate" not in independent_delegate_registry(risk)


@given(policies)
def test_a_policy_never_escalates_beyond_itself(policy: SecurityPolicy) -> None:
    ensure_no_escalation_beyond(policy, policy)


@given(policies, policies)
def test_a_passing_child_has_no_tool_the_parent_lacks(child: SecurityPolicy, parent: SecurityPolicy) -> None:
    if escalation_violation(child, parent) is None:
        assert set(filter_tools(ALL_TOOLS, child.risk)) <= set(filter_tools(ALL_TOOLS, parent.risk))
        assert child.runtime.max_actions_per_hour <= parent.runtime.max_actions_per_hour


aliases = st.sampled_from(["a", "b", "c", "d"])
agents = st.builds(
    AgentSpec,
    alias=aliases,
    risk_profile=st.sampled_from(["", "open", "closed", "ghost"]),
    enabled=st.booleans(),
    delegable=st.booleans(),
    delegate_same_risk_profile=st.booleans(),
    delegates=st.lists(
        st.builds(
            DelegateEntry,
            agent=st.sampled_from(["a", "b", "c", "d", "zz"]),
            mode=st.sampled_from(["bounded", "independent"]),
        ),
        max_size=3,
    ).map(tuple),
)
snapshots = st.lists(agents, max_size=4, unique_by=lambda a: a.alias).map(
    lambda found: ConfigSnapshot(
        risk_profiles={
            "closed": RiskProfileSpec(alias="closed", delegation_mode="forbidden"),
            "open": RiskProfileSpec(alias="open", delegation_mode="allow"),
        },
        agents={a.alias: a for a in sorted(found, key=lambda a: a.alias)},
    )
)


@given(snapshots, aliases)
def test_reachable_never_contains_the_caller(snap: ConfigSnapshot, caller: str) -> None:
    assert caller not in reachable(snap, caller)


@given(snapshots, aliases)
def test_reachable_is_empty_when_delegation_is_forbidden(snap: ConfigSnapshot, caller: str) -> None:
    spec = snap.agents.get(caller)
    if spec is not None and spec.risk_profile == "closed":
        assert reachable(snap, caller) == {}


@given(snapshots, aliases, st.sampled_from(["a", "b", "c", "d", "zz"]))
def test_a_target_is_reachable_exactly_when_it_has_no_reason(
    snap: ConfigSnapshot, caller: str, target: str
) -> None:
    reason = unreachable_reason(snap, caller, target)
    assert (reason is None) == (target in reachable(snap, caller))
    if reason is not None:
        assert reason.startswith(f'delegate target "{target}" is not reachable from "{caller}"')


@given(snapshots, aliases)
def test_reachable_targets_are_enabled_and_delegable(snap: ConfigSnapshot, caller: str) -> None:
    for alias in reachable(snap, caller):
        assert snap.agents[alias].enabled and snap.agents[alias].delegable
