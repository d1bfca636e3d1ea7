"""Runs of real agents whose model is SmolLM2-135M-Instruct: whatever it says, its tool calls
reach the engine, children grow in the tree, every run ends, every call is recorded with its
tokens, the runtime profile stops a model that loops, and the trace, the REST tree and the live
socket show it all."""

from __future__ import annotations

import re
from typing import Any

import pytest
from channels.db import database_sync_to_async
from django.test import Client

from runs_app.models import TERMINAL_STATUSES, Run, RunEvent, ToolCall
from runs_app.services import run_start
from tests.realmodel import server as model
from tests.realmodel.conftest import configure_real, real_agent, tree_of
from tests.runs_app.api_support import client_for
from tests.runs_app.engine_support import make_user
from tests.runs_app.helpers import wait_for
from tests.runs_app.test_consumer import communicator, session_cookie

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

# A run waits on children that wait on the one slot: generous, since nothing here is timed.
TREE_TIMEOUT = 900

SPAWNER = real_agent(
    "spawner",
    tools=["spawn_subagent"],
    system_prompt=(
        "You are a planner. Split every task into parts and hand each part to a subagent with the "
        "spawn_subagent function, whose prompt argument is the part."
    ),
)
LEAD = real_agent(
    "lead",
    tools=["delegate"],
    system_prompt=(
        "You are a team lead. You never do work yourself: call the delegate function with "
        'agent "helper" and a prompt that says what to do.'
    ),
    delegates=["helper"],
)
HELPER = real_agent("helper", tools=[], system_prompt="You are a helpful assistant. Answer in one sentence.")


def assert_sound(root: Run) -> list[Run]:
    """What holds whatever the model said: every run of the tree is terminal, none with an
    internal error, every model call is recorded with its tokens, and every tool call the
    model made names a tool its run offered."""
    runs = tree_of(root)
    for run in runs:
        assert run.status in TERMINAL_STATUSES, (run.agent, run.status)
        assert not run.error.startswith("internal error"), run.error
        responses = list(RunEvent.objects.filter(run=run, type="model.response").order_by("id"))
        assert len(responses) == run.turns
        for event in responses:
            assert event.data["provider"] == "openai.smol"
            assert event.data["model"] == model.MODEL_ALIAS
            assert event.data["usage"]["input"] > 0 and event.data["usage"]["output"] > 0, event.data
        assert run.input_tokens == sum(e.data["usage"]["input"] for e in responses)
        assert run.output_tokens == sum(e.data["usage"]["output"] for e in responses)
        for call in ToolCall.objects.filter(run=run):
            assert call.name in run.tools, (call.name, run.tools)
            assert 0 < len(call.call_id) <= 64
            assert call.status != "pending"
    return runs


def children_shown(root: Run, children: list[Run]) -> None:
    """The trace page and the REST tree of the root contain every child."""
    viewer = Client()
    viewer.force_login(make_user("vera", "viewer"))
    page = viewer.get(f"/runs/{root.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    api = client_for("victor", "viewer").get(f"/api/v1/runs/{root.pk}/tree/")
    assert api.status_code == 200
    tree = api.json()
    in_tree: set[str] = set()
    stack: list[dict[str, Any]] = [tree]
    while stack:
        node = stack.pop()
        in_tree.add(node["id"])
        stack.extend(node["children"])
    for child in children:
        assert str(child.pk) in html
        assert str(child.pk) in in_tree


def start_and_watch(agent: str, prompt: str) -> tuple[Run, set[str]]:
    """Start a run and follow its tree on the live socket until the root ends; the run ids
    the socket told of."""

    async def watch() -> tuple[Any, set[str]]:
        cookie = await database_sync_to_async(session_cookie)("olga", "viewer")
        run = await database_sync_to_async(run_start)(agent=agent, prompt=prompt)
        comm = communicator(run.pk, cookie)
        assert (await comm.connect())[0]
        seen: set[str] = set()
        ends = {f"run.{status}" for status in TERMINAL_STATUSES}
        while True:
            event = await comm.receive_json_from(timeout=TREE_TIMEOUT)
            seen.add(event["run_id"])
            if event["run_id"] == str(run.pk) and event["type"] in ends:
                break
        await comm.disconnect()
        return run.pk, seen

    import asyncio

    run_id, seen = asyncio.run(watch())
    return wait_for(run_id, timeout=TREE_TIMEOUT), seen


def test_an_agent_whose_only_tool_is_spawn_subagent_grows_subagents(model_server: model.ModelServer) -> None:
    configure_real(model_server, SPAWNER)
    root, seen = start_and_watch("spawner", "Write a short poem about the sea and a short poem about trees.")
    runs = assert_sound(root)
    calls = list(ToolCall.objects.filter(run=root))
    assert calls, "the model was offered spawn_subagent and never called it"
    assert {c.name for c in calls} == {"spawn_subagent"}
    children = [r for r in runs if r.parent_id == root.pk]
    assert children and all(c.kind == "subagent" and c.agent == "spawner" for c in children)
    # Every admitted spawn is a child; a refused one says why (the depth or children cap).
    admitted = [c for c in calls if c.result and c.result.get("success")]
    assert len(children) >= len(admitted)
    children_shown(root, children)
    assert {str(r.pk) for r in runs} <= seen


# What the delegate tool answers a call that starts no child (docs/delegation.md).
DELEGATE_REFUSALS = re.compile(
    r"Missing 'agent' parameter|'agent' parameter must not be empty|Missing 'prompt' parameter"
    r"|'prompt' parameter must not be empty|Unknown agent '.*'\. Available agents: helper"
    r"|Unknown action '.*'\. Use delegate/check_result/list_results/cancel_task/await_sessions\."
    r"|Missing 'task_id' parameter",
    re.DOTALL,
)


def test_an_agent_whose_only_tool_is_delegate_grows_delegate_children(
    model_server: model.ModelServer,
) -> None:
    configure_real(model_server, LEAD, HELPER)
    root, seen = start_and_watch("lead", "Find three names for a bakery.")
    runs = assert_sound(root)
    calls = list(ToolCall.objects.filter(run=root))
    assert calls, "the model was offered delegate and never called it"
    assert {c.name for c in calls} == {"delegate"}
    children = [r for r in runs if r.parent_id == root.pk]
    assert children, [c.arguments for c in calls]
    assert all(c.kind == "delegate" and c.agent == "helper" for c in children)
    # The helper's runtime profile is not agentic: one call, no tools.
    assert all(c.turns == 1 and not ToolCall.objects.filter(run=c).exists() for c in children)
    for call in calls:
        child = [c for c in children if c.parent_call_id == call.pk]
        error = (call.result or {}).get("error")
        # A call starts its child, or answers (list_results, check_result), or is refused
        # with the documented message: the engine took it whatever the model put in it.
        assert child or not error or DELEGATE_REFUSALS.fullmatch(error), error
    children_shown(root, children)
    assert {str(r.pk) for r in runs} <= seen


def test_a_model_that_keeps_calling_tools_is_stopped_by_the_iteration_cap(
    model_server: model.ModelServer,
) -> None:
    configure_real(
        model_server,
        real_agent(
            "looper",
            tools=["memory_recall", "file_list"],
            system_prompt="You look things up. Always call a function before you answer.",
            runtime={"max_tool_iterations": 3},
        ),
    )
    run = wait_for(
        run_start(agent="looper", prompt="What do you remember about the project?").pk, timeout=600
    )
    assert_sound(run)
    # This model calls a tool in every turn it is offered one, and never sees the results
    # (docs/configuration.md, "OpenAI-compatible servers"): the cap is what ends the run.
    assert (run.status, run.error, run.turns) == ("failed", "Agent exceeded maximum tool iterations (3)", 3)
    assert ToolCall.objects.filter(run=run).count() >= 3


def test_a_model_that_spends_tokens_is_stopped_by_the_output_budget(model_server: model.ModelServer) -> None:
    configure_real(
        model_server,
        real_agent(
            "spender",
            tools=["memory_recall"],
            system_prompt="You look things up. Always call a function before you answer.",
            runtime={"max_output_tokens": 5, "max_tool_iterations": 5},
        ),
    )
    run = wait_for(run_start(agent="spender", prompt="What do you remember?").pk, timeout=600)
    assert_sound(run)
    assert run.status == "failed", run.output
    assert run.error == f"Output token budget exhausted for this run tree ({run.output_tokens}/5)"
    assert run.output_tokens >= 5
