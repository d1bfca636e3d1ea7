"""Big trees on a small pool (ENGINE.md invariant 4), and the no-escalation property of bounded
delegates end to end: a bounded delegate never has a tool its caller lacks."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies_app.policy import ALL_TOOLS
from runs_app.models import Run, ToolCall
from tests.runs_app.engine_support import (
    agent,
    call_results,
    configure,
    finish,
    inline,  # noqa: F401 - fixture
    provider,
    toml_value,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline")]


def spawn_five(level: str) -> dict[str, Any]:
    calls = [
        {"name": "spawn_subagent", "arguments": {"prompt": f"{level} {i} of {{{{prompt}}}}"}}
        for i in range(5)
    ]
    return {"turns": [{"tool_calls": calls}, {"say": "[{{tool_results}}]"}]}


def test_a_tree_three_levels_deep_with_five_children_per_node_completes_on_two_threads() -> None:
    rules = [
        {"match": "^L3", "turns": [{"say": "leaf"}]},
        {"match": "^L2", **spawn_five("L3")},
        {"match": "^L1", **spawn_five("L2")},
        spawn_five("L1"),
    ]
    configure(
        provider("tree", rules)
        + "[runtime_profiles.deep]\nmax_spawn_depth = 3\nmax_children_per_run = 5\nmax_actions_per_hour = 1000\n"
        + agent("tree", "scripted.tree", runtime="deep")
    )
    root = finish("tree", "root", timeout=120)
    assert root.status == "completed", root.error
    runs = list(Run.objects.filter(root_id=root.pk))
    assert len(runs) == 1 + 5 + 25 + 125
    assert {r.status for r in runs} == {"completed"}
    assert sorted({r.spawn_depth for r in runs}) == [0, 1, 2, 3]
    assert root.output.count("leaf") == 125
    assert not ToolCall.objects.filter(status="pending").exists()


def test_a_parent_with_a_hundred_parallel_children() -> None:
    configure(
        provider(
            "boss",
            [
                {
                    "turns": [
                        {
                            "tool_calls": [
                                {"name": "delegate", "arguments": {"parallel": ["w"] * 100, "prompt": "p"}}
                            ]
                        },
                        {"say": "{{tool_results}}"},
                    ]
                }
            ],
        )  # fmt: skip
        + provider("w", [{"turns": [{"say": "w did {{prompt}}"}]}])
        + "[runtime_profiles.big]\nmax_actions_per_hour = 200\n"
        + agent("boss", "scripted.boss", runtime="big")
        + agent("w", "scripted.w")
    )
    root = finish("boss", "go", timeout=120)
    assert root.status == "completed", root.error
    block = "--- w (success=true) ---\n[Agent 'w' (scripted/w-1)]\nw did p"
    assert root.output == "[Parallel delegation: 100 agents]\n\n" + "\n\n".join([block] * 100)
    assert Run.objects.filter(parent=root, execution="parallel", status="completed").count() == 100


# -- the property ------------------------------------------------------------------------------------

HARMLESS_ARGS: dict[str, dict[str, Any]] = {
    "file_read": {"path": "notes.txt"},
    "file_write": {"path": "notes.txt", "content": "x"},
    "file_list": {},
    "shell": {"command": "echo hi"},
    "memory_store": {"key": "k", "content": "v"},
    "memory_recall": {"query": "k"},
    "model_switch": {"model_provider": "scripted.target"},
    "spawn_subagent": {"prompt": "leaf: x"},
    "delegate": {"agent": "caller", "prompt": "back"},
    "sessions_yield": {},
}
assert set(HARMLESS_ARGS) == set(ALL_TOOLS)

tool_sets = st.lists(st.sampled_from(ALL_TOOLS), max_size=6, unique=True)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    caller_allowed=tool_sets,
    caller_excluded=tool_sets,
    target_allowed=tool_sets,
    target_excluded=tool_sets,
    agentic=st.booleans(),
)
def test_a_bounded_delegate_never_has_a_tool_its_caller_lacks(
    caller_allowed: list[str],
    caller_excluded: list[str],
    target_allowed: list[str],
    target_excluded: list[str],
    agentic: bool,
) -> None:
    # The caller must be able to delegate at all; everything else is arbitrary.
    if caller_allowed and "delegate" not in caller_allowed:
        caller_allowed = [*caller_allowed, "delegate"]
    caller_excluded = [t for t in caller_excluded if t != "delegate"]
    every_call = [{"name": name, "arguments": args} for name, args in HARMLESS_ARGS.items()]
    configure(
        provider(
            "caller",
            [
                {
                    "turns": [
                        {
                            "tool_calls": [
                                {"name": "delegate", "arguments": {"agent": "target", "prompt": "try all"}}
                            ]
                        },
                        {"say": "done"},
                    ]
                }
            ],
        )  # fmt: skip
        + provider(
            "target",
            [
                {"match": "^leaf", "turns": [{"say": "leaf"}]},
                {"turns": [{"tool_calls": every_call}, {"say": "tried"}]},
            ],
        )
        + "[risk_profiles.callerp]\n"
        + f'allowed_commands = ["*"]\nallowed_tools = {toml_value(caller_allowed)}\n'
        + f"excluded_tools = {toml_value(caller_excluded)}\n"
        + '[risk_profiles.callerp.delegation_policy]\nmode = "allow"\n'
        + "[risk_profiles.targetp]\n"
        + f'allowed_commands = ["*"]\nallowed_tools = {toml_value(target_allowed)}\n'
        + f"excluded_tools = {toml_value(target_excluded)}\n"
        + f"[runtime_profiles.t]\nagentic = {toml_value(agentic)}\n"
        # the examples share the caller's tracker: the database is not reset between them
        + "[runtime_profiles.rich]\nmax_actions_per_hour = 100000\n"
        + agent(
            "caller",
            "scripted.caller",
            risk="callerp",
            runtime="rich",
            delegates=[{"agent": "target", "mode": "bounded"}],
        )
        + agent("target", "scripted.target", risk="targetp", runtime="t")
    )
    root = finish("caller", "go", timeout=60)
    assert root.status == "completed", root.error
    # admitted (a non-agentic target that only calls tools gives an invalid completion)
    assert call_results(root)[0]["success"] or not agentic, call_results(root)
    child = Run.objects.get(parent=root)
    assert child.mode == "bounded"
    caller_tools = set(root.tools)
    assert set(child.tools) <= caller_tools
    assert "delegate" not in child.tools
    assert not set(child.tools) & set(target_excluded)
    if target_allowed:
        assert set(child.tools) <= set(target_allowed)
    # ...and what the delegate's model actually managed to do stays within the caller's tools
    tree = Run.objects.filter(root_id=root.pk).exclude(pk=root.pk)
    for run in tree:
        assert set(run.tools) <= caller_tools
        for call, result in zip(
            ToolCall.objects.filter(run=run).order_by("turn", "position"), call_results(run), strict=True
        ):
            if call.name not in caller_tools:
                assert result["success"] is False, (run.kind, call.name, result)
    if not agentic:
        assert child.tools == [] and not ToolCall.objects.filter(run=child).exists()
