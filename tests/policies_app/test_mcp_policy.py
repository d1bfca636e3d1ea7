"""MCP tools under a risk profile (ZeroClaw's rules, issue 26 item 2): pure functions, no
database and no server."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from policies_app.escalation import escalation_violation
from policies_app.policy import (
    SecurityPolicy,
    filter_tools,
    is_tool_allowed,
    mcp_ceiling,
    mcp_needs_approval,
    mcp_tool_name,
    mcp_tool_verdict,
)
from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec

READ = "filesystem__read_file"
WRITE = "filesystem__write_file"


def risk(**fields: object) -> RiskProfileSpec:
    return RiskProfileSpec(alias="r", **fields)  # type: ignore[arg-type]


def test_tool_names_are_the_server_and_the_tool_joined_by_two_underscores() -> None:
    assert mcp_tool_name("filesystem", "read_file") == READ


def test_a_non_empty_allow_list_admits_every_mcp_name_but_not_other_tools() -> None:
    narrow = risk(allowed_tools=("shell",))
    assert is_tool_allowed(narrow, WRITE)
    assert not is_tool_allowed(narrow, "memory_recall")
    assert filter_tools(["shell", "memory_recall", READ], narrow) == ("shell", READ)


def test_excluded_tools_and_deny_all_block_mcp_names() -> None:
    assert not is_tool_allowed(risk(allowed_tools=("shell",), excluded_tools=(WRITE,)), WRITE)
    assert not is_tool_allowed(risk(deny_all_tools=True), READ)
    assert mcp_tool_verdict(risk(excluded_tools=(WRITE,)), (), WRITE) == "listed in excluded_tools"
    assert mcp_tool_verdict(risk(deny_all_tools=True), (), READ) == "deny_all_tools is set"


def test_a_bounded_delegate_target_narrows_the_callers_mcp_tools() -> None:
    caller, target = risk(), risk(allowed_tools=("file_read",), excluded_tools=(WRITE,))
    ceilings = (mcp_ceiling(target),)
    assert mcp_tool_verdict(caller, ceilings, READ) == ""
    assert mcp_tool_verdict(caller, ceilings, WRITE) == "listed in a bounded delegate's target excluded_tools"
    assert (
        mcp_tool_verdict(caller, (mcp_ceiling(risk(deny_all_tools=True)),), READ)
        == "a bounded delegate's target sets deny_all_tools"
    )


@given(
    st.lists(st.sampled_from([READ, WRITE, "x__y", "shell"]), max_size=4),
    st.sampled_from([READ, WRITE, "x__y"]),
)
def test_an_intersection_with_a_target_never_widens(excluded: list[str], name: str) -> None:
    caller = risk(excluded_tools=tuple(excluded))
    target = risk(excluded_tools=(WRITE,))
    with_target = mcp_tool_verdict(caller, (mcp_ceiling(target),), name) == ""
    alone = mcp_tool_verdict(caller, (), name) == ""
    assert not with_target or alone


def test_destructive_annotations_ask_unless_auto_approved_and_unannotated_tools_follow_the_profile() -> None:
    destructive = {"destructiveHint": True}
    assert mcp_needs_approval(risk(), WRITE, destructive)
    assert not mcp_needs_approval(risk(), WRITE, {"destructiveHint": True, "readOnlyHint": True})
    assert not mcp_needs_approval(risk(auto_approve=(WRITE,)), WRITE, destructive)
    assert not mcp_needs_approval(risk(auto_approve=("*",)), WRITE, destructive)
    assert not mcp_needs_approval(risk(), READ, None)
    assert not mcp_needs_approval(risk(), READ, {})
    assert mcp_needs_approval(risk(always_ask=(READ,)), READ, {"readOnlyHint": True})
    assert mcp_needs_approval(risk(always_ask=(WRITE,), auto_approve=(WRITE,)), WRITE, destructive)


def test_a_child_may_not_raise_an_mcp_server_limit_above_its_parents() -> None:
    def policy(**runtime: int) -> SecurityPolicy:
        return SecurityPolicy("a", risk(), RuntimeProfileSpec(alias="rt", **runtime), "/w", "a")  # type: ignore[arg-type]

    assert escalation_violation(policy(mcp_max_memory_mb=8192), policy()) == (
        "subagent mcp_max_memory_mb=8192 exceeds parent's 4096"
    )
    assert escalation_violation(policy(mcp_max_cpu_secs=30), policy()) is None
