from __future__ import annotations

import dataclasses

import pytest

from policies_app.policy import (
    ACTING_TOOLS,
    ALL_TOOLS,
    RATE_LIMIT_ACTIONS,
    RATE_LIMIT_COST,
    WRITING_TOOLS,
    SecurityPolicy,
    blocked_by_readonly,
    bounded_delegate_registry,
    effective_always_ask,
    filter_tools,
    independent_delegate_registry,
    is_auto_approved,
    is_tool_allowed,
    needs_approval,
    readonly_refusal,
    subagent_registry,
)
from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec


def risk(**kw: object) -> RiskProfileSpec:
    return RiskProfileSpec(alias="p", **kw)  # type: ignore[arg-type]


def test_the_tool_catalogue_is_fixed() -> None:
    assert ALL_TOOLS == (
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
    assert ACTING_TOOLS == {
        "file_write",
        "shell",
        "memory_store",
        "spawn_subagent",
        "delegate",
        "model_switch",
    }
    assert set(WRITING_TOOLS) == {"file_write", "shell", "memory_store", "spawn_subagent", "delegate"}


def test_an_empty_allow_list_allows_every_tool() -> None:
    assert all(is_tool_allowed(risk(), name) for name in ALL_TOOLS)


def test_a_non_empty_allow_list_is_an_exact_name_list() -> None:
    policy = risk(allowed_tools=("file_read",))
    assert is_tool_allowed(policy, "file_read")
    assert not is_tool_allowed(policy, "file_write")
    assert not is_tool_allowed(policy, "file_rea")


def test_excluded_tools_win_over_the_allow_list() -> None:
    policy = risk(allowed_tools=("shell", "file_read"), excluded_tools=("shell",))
    assert not is_tool_allowed(policy, "shell")
    assert is_tool_allowed(policy, "file_read")


def test_deny_all_tools_denies_even_with_an_empty_allow_list() -> None:
    assert not any(is_tool_allowed(risk(deny_all_tools=True), name) for name in ALL_TOOLS)


def test_filter_tools_preserves_registry_order() -> None:
    registry = ("shell", "file_read", "delegate", "file_write")
    assert filter_tools(registry, risk(excluded_tools=("delegate",))) == ("shell", "file_read", "file_write")


def test_always_ask_is_trimmed_and_blanks_are_dropped() -> None:
    assert effective_always_ask(risk(always_ask=(" shell ", "", "   ", "delegate"))) == ("shell", "delegate")


def test_always_ask_names_the_tools_that_need_approval() -> None:
    policy = risk(always_ask=("shell",))
    assert needs_approval(policy, "shell")
    assert not needs_approval(policy, "file_read")


def test_always_ask_wildcard_covers_every_tool() -> None:
    assert all(needs_approval(risk(always_ask=("*",)), name) for name in ALL_TOOLS)


def test_always_ask_wins_over_auto_approve() -> None:
    policy = risk(always_ask=("shell",), auto_approve=("*",))
    assert needs_approval(policy, "shell")
    assert not is_auto_approved(policy, "shell")
    assert is_auto_approved(policy, "file_read")


def test_readonly_blocks_only_acting_tools() -> None:
    readonly = risk(level="readonly")
    assert blocked_by_readonly(readonly, "file_write")
    assert not blocked_by_readonly(readonly, "file_read")
    assert not blocked_by_readonly(risk(level="supervised"), "file_write")


def test_messages_are_exact() -> None:
    assert readonly_refusal("shell") == "Security policy: read-only mode, cannot perform 'shell'"
    assert RATE_LIMIT_ACTIONS == "Rate limit exceeded: action budget exhausted"
    assert RATE_LIMIT_COST == "Rate limit exceeded: daily cost budget exhausted"


def test_security_policy_is_frozen() -> None:
    policy = SecurityPolicy(
        agent="a", risk=risk(), runtime=RuntimeProfileSpec(alias="r"), workspace="/w", tracker_key="a"
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.agent = "b"  # type: ignore[misc]


def test_subagent_registry_drops_model_switch_and_keeps_spawn_subagent() -> None:
    registry = subagent_registry(ALL_TOOLS, risk(excluded_tools=("shell",)))
    assert "model_switch" not in registry
    assert "shell" not in registry
    assert "spawn_subagent" in registry


def test_bounded_delegate_registry_is_capped_by_the_caller() -> None:
    caller_registry = ("file_read", "file_write", "delegate", "shell")
    caller = risk(excluded_tools=("shell",))
    target = risk(allowed_tools=("file_read", "shell", "memory_store"))
    assert bounded_delegate_registry(caller_registry, caller, target) == ("file_read",)


def test_bounded_delegate_with_an_empty_target_allow_list_inherits_the_caller_registry() -> None:
    caller_registry = ("file_read", "file_write", "delegate")
    assert bounded_delegate_registry(caller_registry, risk(), risk()) == ("file_read", "file_write")


def test_bounded_delegate_with_an_empty_intersection_gets_no_tools() -> None:
    caller = risk(allowed_tools=("file_read",))
    target = risk(allowed_tools=("shell",))
    assert bounded_delegate_registry(ALL_TOOLS, caller, target) == ()


def test_bounded_delegate_of_a_deny_all_target_gets_no_tools() -> None:
    assert bounded_delegate_registry(ALL_TOOLS, risk(), risk(deny_all_tools=True)) == ()


def test_independent_delegate_registry_uses_the_target_policy_without_delegate() -> None:
    target = risk(excluded_tools=("shell",))
    registry = independent_delegate_registry(target)
    assert "delegate" not in registry
    assert "shell" not in registry
    # model_switch is for top-level runs only (SPEC §7)
    assert registry == tuple(t for t in ALL_TOOLS if t not in {"delegate", "shell", "model_switch"})
