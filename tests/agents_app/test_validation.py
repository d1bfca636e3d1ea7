from __future__ import annotations

from dataclasses import replace

import pytest

from agents_app.snapshot import AgentSpec, ConfigSnapshot, DelegateEntry, ProviderSpec
from agents_app.validation import (
    delete_agent,
    delete_agent_plan,
    rename_agent,
    validate_new_agent_alias,
    validate_snapshot,
)
from policies_app.specs import DelegateGlobals, RiskProfileSpec, RuntimeProfileSpec


def make_snapshot(*agents: AgentSpec, **changes: object) -> ConfigSnapshot:
    snapshot = ConfigSnapshot(
        providers={
            "openai.gpt": ProviderSpec(type="openai", alias="gpt", model="gpt-4o-mini"),
            "scripted.demo": ProviderSpec(type="scripted", alias="demo"),
        },
        risk_profiles={"team": RiskProfileSpec(alias="team"), "narrow": RiskProfileSpec(alias="narrow")},
        runtime_profiles={"fast": RuntimeProfileSpec(alias="fast")},
        agents={a.alias: a for a in agents},
    )
    return replace(snapshot, **changes)  # type: ignore[arg-type]


def agent(alias: str, **fields: object) -> AgentSpec:
    values: dict[str, object] = {"model_provider": "scripted.demo", "risk_profile": "team"}
    values.update(fields)
    return AgentSpec(alias=alias, **values)  # type: ignore[arg-type]


def only_error(snapshot: ConfigSnapshot) -> tuple[str, str]:
    errors = validate_snapshot(snapshot)
    assert len(errors) == 1, errors
    return errors[0]


def test_a_consistent_snapshot_has_no_errors() -> None:
    snapshot = make_snapshot(
        agent("coder", runtime_profile="fast", delegates=(DelegateEntry("reviewer", "independent"),)),
        agent("reviewer", read_memory_from=("coder",)),
    )
    assert validate_snapshot(snapshot) == []


# --- SPEC §2.5, every message compared whole -------------------------------------------------------


def test_empty_model_provider() -> None:
    assert only_error(make_snapshot(agent("coder", model_provider=""))) == (
        "agents.coder.model_provider",
        'agents.coder.model_provider must reference a configured model provider (e.g. "scripted.demo")',
    )


def test_model_provider_not_dotted() -> None:
    assert only_error(make_snapshot(agent("coder", model_provider="scripted"))) == (
        "agents.coder.model_provider",
        'agents.coder.model_provider must be dotted form <type>.<alias> (got "scripted")',
    )


def test_model_provider_not_configured() -> None:
    assert only_error(make_snapshot(agent("coder", model_provider="scripted.x"))) == (
        "agents.coder.model_provider",
        'agents.coder.model_provider = "scripted.x" but [providers.models.scripted.x] is not configured',
    )


def test_model_provider_is_required_even_when_disabled() -> None:
    field, _ = only_error(make_snapshot(agent("coder", model_provider="", enabled=False)))
    assert field == "agents.coder.model_provider"


def test_enabled_agent_without_risk_profile() -> None:
    assert only_error(make_snapshot(agent("coder", risk_profile=""))) == (
        "agents.coder.risk_profile",
        "agents.coder.risk_profile must reference a configured [risk_profiles.<alias>] entry",
    )


def test_disabled_agent_may_have_no_risk_profile() -> None:
    assert validate_snapshot(make_snapshot(agent("coder", risk_profile="", enabled=False))) == []


def test_unknown_risk_profile() -> None:
    assert only_error(make_snapshot(agent("coder", risk_profile="yolo"))) == (
        "agents.coder.risk_profile",
        'agents.coder.risk_profile = "yolo" but risk_profiles.yolo is not configured',
    )


def test_unknown_runtime_profile() -> None:
    assert only_error(make_snapshot(agent("coder", runtime_profile="slow"))) == (
        "agents.coder.runtime_profile",
        'agents.coder.runtime_profile = "slow" but runtime_profiles.slow is not configured',
    )


def test_empty_delegate_target() -> None:
    assert only_error(make_snapshot(agent("coder", delegates=(DelegateEntry(" "),)))) == (
        "agents.coder.delegates[0].agent",
        "agents.coder.delegates[0].agent is empty; remove it or name a configured agent",
    )


def test_self_delegation() -> None:
    snapshot = make_snapshot(agent("coder", delegates=(DelegateEntry("reviewer"), DelegateEntry("coder"))))
    snapshot = replace(snapshot, agents={**snapshot.agents, "reviewer": agent("reviewer")})
    assert only_error(snapshot) == (
        "agents.coder.delegates[1].agent",
        'agents.coder.delegates[1].agent = "coder" names this agent itself; an agent cannot delegate to itself',
    )


def test_unknown_delegate_target() -> None:
    assert only_error(make_snapshot(agent("coder", delegates=(DelegateEntry("ghost"),)))) == (
        "agents.coder.delegates[0].agent",
        'agents.coder.delegates[0].agent = "ghost" but agents.ghost is not configured',
    )


def test_duplicate_delegate_target_counts_across_modes() -> None:
    snapshot = make_snapshot(
        agent(
            "coder",
            delegates=(DelegateEntry("reviewer", "bounded"), DelegateEntry("reviewer", "independent")),
        ),
        agent("reviewer"),
    )
    assert only_error(snapshot) == (
        "agents.coder.delegates[1].agent",
        'agents.coder.delegates[1].agent = "reviewer" duplicates an earlier delegate target',
    )


def test_invalid_shell_env_passthrough() -> None:
    snapshot = make_snapshot(
        risk_profiles={"team": RiskProfileSpec(alias="team", shell_env_passthrough=("HOME", "1BAD", "X-Y"))}
    )
    assert validate_snapshot(snapshot) == [
        (
            "risk_profiles.team.shell_env_passthrough[1]",
            "risk_profiles.team.shell_env_passthrough[1] is invalid (1BAD); expected [A-Za-z_][A-Za-z0-9_]*",
        ),
        (
            "risk_profiles.team.shell_env_passthrough[2]",
            "risk_profiles.team.shell_env_passthrough[2] is invalid (X-Y); expected [A-Za-z_][A-Za-z0-9_]*",
        ),
    ]


def test_reserved_alias_on_create() -> None:
    assert validate_new_agent_alias("default") == "alias `default` is reserved and cannot be created"
    assert validate_new_agent_alias("coder") is None


def test_an_imported_agent_named_default_is_valid() -> None:
    assert validate_snapshot(make_snapshot(agent("default"))) == []


def test_delegate_timeouts_must_be_positive() -> None:
    snapshot = make_snapshot(delegate=DelegateGlobals(timeout_secs=0, agentic_timeout_secs=0))
    assert validate_snapshot(snapshot) == [
        ("delegate.timeout_secs", "delegate.timeout_secs must be greater than 0"),
        ("delegate.agentic_timeout_secs", "delegate.agentic_timeout_secs must be greater than 0"),
    ]


def test_every_error_of_a_snapshot_is_reported_at_once() -> None:
    snapshot = make_snapshot(
        agent(
            "coder",
            model_provider="nodot",
            risk_profile="",
            runtime_profile="slow",
            delegates=(DelegateEntry(""), DelegateEntry("coder"), DelegateEntry("ghost")),
        ),
        agent("reviewer", model_provider="openai.nope", risk_profile="yolo"),
        risk_profiles={"team": RiskProfileSpec(alias="team", shell_env_passthrough=("9",))},
        delegate=DelegateGlobals(timeout_secs=0),
    )
    assert validate_snapshot(snapshot) == [
        (
            "agents.coder.model_provider",
            'agents.coder.model_provider must be dotted form <type>.<alias> (got "nodot")',
        ),
        (
            "agents.coder.risk_profile",
            "agents.coder.risk_profile must reference a configured [risk_profiles.<alias>] entry",
        ),
        (
            "agents.coder.runtime_profile",
            'agents.coder.runtime_profile = "slow" but runtime_profiles.slow is not configured',
        ),
        (
            "agents.coder.delegates[0].agent",
            "agents.coder.delegates[0].agent is empty; remove it or name a configured agent",
        ),
        (
            "agents.coder.delegates[1].agent",
            'agents.coder.delegates[1].agent = "coder" names this agent itself; an agent cannot delegate to itself',
        ),
        (
            "agents.coder.delegates[2].agent",
            'agents.coder.delegates[2].agent = "ghost" but agents.ghost is not configured',
        ),
        (
            "agents.reviewer.model_provider",
            'agents.reviewer.model_provider = "openai.nope" but [providers.models.openai.nope] is not configured',
        ),
        (
            "agents.reviewer.risk_profile",
            'agents.reviewer.risk_profile = "yolo" but risk_profiles.yolo is not configured',
        ),
        (
            "risk_profiles.team.shell_env_passthrough[0]",
            "risk_profiles.team.shell_env_passthrough[0] is invalid (9); expected [A-Za-z_][A-Za-z0-9_]*",
        ),
        ("delegate.timeout_secs", "delegate.timeout_secs must be greater than 0"),
    ]


# --- other bad values -----------------------------------------------------------------------------


def test_invalid_aliases() -> None:
    snapshot = make_snapshot(
        agent("Coder"),
        risk_profiles={"team": RiskProfileSpec(alias="team"), "-x": RiskProfileSpec(alias="-x")},
        runtime_profiles={"a" * 65: RuntimeProfileSpec(alias="a" * 65)},
    )
    long = "a" * 65
    assert validate_snapshot(snapshot) == [
        ("agents.Coder", 'agents.Coder: alias "Coder" is invalid; expected [a-z0-9][a-z0-9_-]{0,63}'),
        ("risk_profiles.-x", 'risk_profiles.-x: alias "-x" is invalid; expected [a-z0-9][a-z0-9_-]{0,63}'),
        (
            f"runtime_profiles.{long}",
            f'runtime_profiles.{long}: alias "{long}" is invalid; expected [a-z0-9][a-z0-9_-]{{0,63}}',
        ),
    ]


def test_invalid_choices() -> None:
    snapshot = make_snapshot(
        agent("coder", delegates=(DelegateEntry("reviewer", "detached"),)),
        agent("reviewer"),
        risk_profiles={"team": RiskProfileSpec(alias="team", level="root", delegation_mode="maybe")},
    )
    assert validate_snapshot(snapshot) == [
        (
            "agents.coder.delegates[0].mode",
            'agents.coder.delegates[0].mode = "detached" is not a valid mode; expected one of bounded, independent',
        ),
        (
            "risk_profiles.team.level",
            'risk_profiles.team.level = "root" is not a valid level; expected one of readonly, supervised, full',
        ),
        (
            "risk_profiles.team.delegation_policy.mode",
            'risk_profiles.team.delegation_policy.mode = "maybe" is not a valid mode; expected one of forbidden, allow',
        ),
    ]


def test_runtime_ranges_and_negative_values() -> None:
    runtime = RuntimeProfileSpec(
        alias="fast",
        max_actions_per_hour=-1,
        max_spawn_depth=6,
        max_children_per_run=0,
        delegation_timeout_secs=0,
        agentic_timeout_secs=-5,
    )
    assert validate_snapshot(make_snapshot(runtime_profiles={"fast": runtime})) == [
        (
            "runtime_profiles.fast.max_actions_per_hour",
            "runtime_profiles.fast.max_actions_per_hour must not be negative (got -1)",
        ),
        (
            "runtime_profiles.fast.delegation_timeout_secs",
            "runtime_profiles.fast.delegation_timeout_secs must be greater than 0 (got 0); "
            "leave it unset to use delegate.timeout_secs",
        ),
        (
            "runtime_profiles.fast.agentic_timeout_secs",
            "runtime_profiles.fast.agentic_timeout_secs must be greater than 0 (got -5); "
            "leave it unset to use delegate.agentic_timeout_secs",
        ),
        (
            "runtime_profiles.fast.max_spawn_depth",
            "runtime_profiles.fast.max_spawn_depth must be between 1 and 5 (got 6)",
        ),
        (
            "runtime_profiles.fast.max_children_per_run",
            "runtime_profiles.fast.max_children_per_run must be between 1 and 20 (got 0)",
        ),
    ]


@pytest.mark.parametrize(("depth", "children"), [(1, 1), (5, 20)])
def test_runtime_range_bounds_are_inclusive(depth: int, children: int) -> None:
    runtime = RuntimeProfileSpec(alias="fast", max_spawn_depth=depth, max_children_per_run=children)
    assert validate_snapshot(make_snapshot(runtime_profiles={"fast": runtime})) == []


def test_provider_errors() -> None:
    providers = {
        "openai.gpt": ProviderSpec(
            type="openai",
            alias="gpt",
            model="",
            api_key_env="OPENAI-KEY",
            timeout_secs=0,
            max_tokens=0,
            temperature=-0.5,
            input_per_mtok_cents=-1.0,
            fallback_models=("",),
            fallback=("openai.gpt", "anthropic.claude", "nodot", ""),
        ),
        "scripted.demo": ProviderSpec(type="scripted", alias="demo", script=["not a rule"]),
    }
    base = "providers.models.openai.gpt"
    assert validate_snapshot(make_snapshot(providers=providers)) == [
        (
            f"{base}.model",
            f"{base}.model is empty; a model is required for every provider type except scripted",
        ),
        (
            f"{base}.api_key_env",
            f"{base}.api_key_env is invalid (OPENAI-KEY); expected [A-Za-z_][A-Za-z0-9_]*",
        ),
        (f"{base}.timeout_secs", f"{base}.timeout_secs must be greater than 0 (got 0)"),
        (f"{base}.max_tokens", f"{base}.max_tokens must be greater than 0 when set (got 0)"),
        (f"{base}.temperature", f"{base}.temperature must be a number of 0 or more (got -0.5)"),
        (
            f"{base}.pricing.input_per_mtok_cents",
            f"{base}.pricing.input_per_mtok_cents must be a number from 0 to 10000 (got -1.0)",
        ),
        (f"{base}.fallback_models[0]", f"{base}.fallback_models[0] is empty; remove it or name a model"),
        (
            f"{base}.fallback[0]",
            f'{base}.fallback[0] = "openai.gpt" names this provider itself; a provider cannot fall back to itself',
        ),
        (
            f"{base}.fallback[1]",
            f'{base}.fallback[1] = "anthropic.claude" but [providers.models.anthropic.claude] is not configured',
        ),
        (f"{base}.fallback[2]", f'{base}.fallback[2] must be dotted form <type>.<alias> (got "nodot")'),
        (
            f"{base}.fallback[3]",
            f"{base}.fallback[3] is empty; remove it or name a configured model provider",
        ),
        (
            "providers.models.scripted.demo.script[0]",
            "providers.models.scripted.demo.script[0] must be a table",
        ),
    ]


def test_scripted_provider_needs_no_model_and_fallback_to_a_configured_provider_is_fine() -> None:
    providers = {
        "openai.gpt": ProviderSpec(type="openai", alias="gpt", model="gpt-4o", fallback=("scripted.demo",)),
        "scripted.demo": ProviderSpec(type="scripted", alias="demo"),
    }
    assert validate_snapshot(make_snapshot(providers=providers)) == []


def test_read_memory_from_must_name_configured_agents() -> None:
    snapshot = make_snapshot(agent("coder", read_memory_from=("coder", "ghost", "")))
    assert validate_snapshot(snapshot) == [
        (
            "agents.coder.read_memory_from[1]",
            'agents.coder.read_memory_from[1] = "ghost" but agents.ghost is not configured',
        ),
        (
            "agents.coder.read_memory_from[2]",
            "agents.coder.read_memory_from[2] is empty; remove it or name a configured agent",
        ),
    ]


def test_other_delegate_globals_must_be_positive() -> None:
    snapshot = make_snapshot(delegate=DelegateGlobals(max_background=0, max_concurrent_runs=-1))
    assert validate_snapshot(snapshot) == [
        ("delegate.max_background", "delegate.max_background must be greater than 0"),
        ("delegate.max_concurrent_runs", "delegate.max_concurrent_runs must be greater than 0"),
    ]


# --- rename and delete ----------------------------------------------------------------------------


def roster() -> ConfigSnapshot:
    return make_snapshot(
        agent("coder", delegates=(DelegateEntry("reviewer"), DelegateEntry("ops", "independent"))),
        agent(
            "ops",
            delegates=(DelegateEntry(" reviewer ", "independent"),),
            read_memory_from=("reviewer", "coder"),
        ),
        agent("reviewer", read_memory_from=("coder",), system_prompt="review"),
    )


def test_rename_rewrites_delegates_and_read_memory_from() -> None:
    renamed = rename_agent(roster(), "reviewer", "critic")
    assert list(renamed.agents) == ["coder", "critic", "ops"]
    assert renamed.agents["critic"].alias == "critic"
    assert renamed.agents["critic"].system_prompt == "review"
    assert renamed.agents["coder"].delegates == (DelegateEntry("critic"), DelegateEntry("ops", "independent"))
    assert renamed.agents["ops"].delegates == (DelegateEntry("critic", "independent"),)
    assert renamed.agents["ops"].read_memory_from == ("critic", "coder")
    assert validate_snapshot(renamed) == []


def test_rename_refuses_unknown_or_taken_aliases() -> None:
    with pytest.raises(ValueError, match=r"agents\.ghost is not configured"):
        rename_agent(roster(), "ghost", "x")
    with pytest.raises(ValueError, match=r"agents\.ops already exists"):
        rename_agent(roster(), "coder", "ops")


def test_delete_plan_lists_every_scrubbed_reference() -> None:
    assert delete_agent_plan(roster(), "reviewer") == [
        'remove { agent = "reviewer", mode = "bounded" } from agents.coder.delegates',
        'remove { agent = "reviewer", mode = "independent" } from agents.ops.delegates',
        'remove "reviewer" from agents.ops.read_memory_from',
    ]
    assert delete_agent_plan(make_snapshot(agent("lonely")), "lonely") == []


def test_delete_removes_the_agent_and_scrubs_references() -> None:
    before = roster()
    after = delete_agent(before, "reviewer")
    assert list(after.agents) == ["coder", "ops"]
    assert after.agents["coder"].delegates == (DelegateEntry("ops", "independent"),)
    assert after.agents["ops"].delegates == ()
    assert after.agents["ops"].read_memory_from == ("coder",)
    assert validate_snapshot(after) == []
    assert "reviewer" in before.agents  # the input is left untouched


def test_delete_of_an_unknown_agent_is_refused() -> None:
    with pytest.raises(ValueError, match=r"agents\.ghost is not configured"):
        delete_agent(roster(), "ghost")
    with pytest.raises(ValueError, match=r"agents\.ghost is not configured"):
        delete_agent_plan(roster(), "ghost")


def test_sandbox_backend_must_be_auto_or_bubblewrap() -> None:
    risk = RiskProfileSpec(alias="team", sandbox_backend="firejail")
    assert only_error(make_snapshot(risk_profiles={"team": risk})) == (
        "risk_profiles.team.sandbox_backend",
        'risk_profiles.team.sandbox_backend = "firejail" is not a valid backend; expected one of auto, bubblewrap',
    )


def test_shell_limits_must_not_be_negative() -> None:
    runtime = RuntimeProfileSpec(alias="fast", shell_max_processes=-2)
    assert only_error(make_snapshot(runtime_profiles={"fast": runtime})) == (
        "runtime_profiles.fast.shell_max_processes",
        "runtime_profiles.fast.shell_max_processes must not be negative (got -2)",
    )
