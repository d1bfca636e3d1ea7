"""Background task actions through the model tool path (SPEC §6.3): check_result, list_results,
cancel_task and await_sessions.

A scripted model cannot parse a tool result, so it learns a task id the way an operator
would: it lists `delegate_results/` (the JSON mirror of SPEC §6.2) with `shell`, and the next
turn passes `{{tool_results}}` (that one id) as `task_id`."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from runs_app.engine.outcomes import result_view
from runs_app.models import Run, ToolCall
from tests.runs_app.engine_support import (
    agent,
    call_results,
    configure,
    engine,  # noqa: F401 - fixture
    events_of,
    finish,
    provider,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

LS = {"name": "shell", "arguments": {"command": "ls delegate_results | cut -d . -f 1"}}
TID = "{{tool_results}}"


def delegate(**arguments: Any) -> dict[str, Any]:
    return {"name": "delegate", "arguments": arguments}


def calls(*call_list: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": list(call_list)}


def setup(turns: list[dict[str, Any]]) -> None:
    configure(
        provider("boss", [{"turns": turns}])
        + "[runtime_profiles.long]\nmax_tool_iterations = 30\n"
        + agent("boss", "scripted.boss", runtime="long")
        + provider("napper", [{"turns": [{"sleep_ms": 300}, {"say": "{{agent}} napped on {{prompt}}"}]}])
        + provider("long", [{"turns": [{"sleep_ms": 2000}, {"say": "finally"}]}])
        + provider("failing", [{"turns": [{"error": "boom"}]}])
        + agent("napper", "scripted.napper")
        + agent("long", "scripted.long")
        + agent("bad", "scripted.failing")
    )


def fail(error: str, output: str = "") -> dict[str, Any]:
    return {"success": False, "output": output, "error": error}


def ok(output: str) -> dict[str, Any]:
    return {"success": True, "output": output, "error": None}


def delegate_results(run: Run) -> list[dict[str, Any]]:
    return call_results(run, "delegate")


def test_check_list_await_and_cancel_a_finished_task() -> None:
    setup(
        [
            calls(delegate(agent="napper", prompt="job", background=True)),
            calls(LS),
            calls(delegate(action="check_result", task_id=TID)),
            calls(LS),
            calls(delegate(action="await_sessions", task_ids=[TID], timeout_ms=5000)),
            calls(LS),
            calls(delegate(action="check_result", task_id=TID)),
            calls(delegate(action="list_results")),
            calls(LS),
            calls(delegate(action="cancel_task", task_id=TID)),
            {"say": "done"},
        ]
    )
    run = finish("boss", "go")
    assert run.status == "completed", run.error
    task = Run.objects.get(parent=run)
    assert task.status == "completed"
    tid = str(task.pk)
    results = delegate_results(run)
    # still running when first checked (it naps 300 ms)
    assert results[1]["success"] is False
    running_view = json.loads(results[1]["output"])
    assert (running_view["status"], running_view["finished_at"]) == ("running", None)
    assert results[1]["error"] == "background task is still running"
    view = result_view(task)
    assert view["output"] == "[Agent 'napper' (scripted/napper-1)]\nnapper napped on job"
    awaited = {
        "status": "complete",
        "completed": 1,
        "pending": [],
        "missing": [],
        "failed": [],
        "results": [view],
    }
    assert results[2] == ok(json.dumps(awaited))
    assert results[3] == ok(json.dumps(view))
    listing = [{k: view[k] for k in ("task_id", "agent", "status", "started_at", "finished_at")}]
    assert results[4] == ok(json.dumps(listing))
    assert results[5] == fail(f"Task '{tid}' is not running (status: completed)")
    # the await made the caller wait (no busy loop): it went `waiting` once for it
    waits = [e.data for e in events_of(run, "run.waiting")]
    assert waits == [{"status": "waiting", "pending": 1}]
    assert ToolCall.objects.get(run=run, arguments__action="await_sessions").status == "done"


def test_cancel_a_running_task_then_check_and_await_it() -> None:
    setup(
        [
            calls(delegate(agent="long", prompt="job", background=True)),
            calls(LS),
            calls(delegate(action="cancel_task", task_id=TID)),
            calls(LS),
            calls(delegate(action="check_result", task_id=TID)),
            calls(LS),
            calls(delegate(action="await_sessions", task_ids=[TID])),
            {"say": "done"},
        ]
    )
    run = finish("boss", "go")
    task = Run.objects.get(parent=run)
    tid = str(task.pk)
    assert (task.status, task.error) == ("cancelled", "Cancelled by user request")
    results = delegate_results(run)
    assert results[1] == ok(f"Task '{tid}' cancelled: the running task was aborted.")
    view = result_view(task)
    assert view["status"] == "cancelled" and view["error"] == "Cancelled by user request"
    assert results[2] == fail("Cancelled by user request", json.dumps(view))
    body = {
        "status": "complete",
        "completed": 0,
        "pending": [],
        "missing": [],
        "failed": [tid],
        "results": [view],
    }
    assert results[3] == fail("one or more background tasks failed or were cancelled", json.dumps(body))


def test_await_timeout_reports_pending_and_missing() -> None:
    ghost = str(uuid.uuid4())
    setup(
        [
            calls(delegate(agent="long", prompt="job", background=True)),
            calls(LS),
            calls(delegate(action="await_sessions", task_ids=[TID, ghost], timeout_ms=200)),
            calls(LS),
            calls(delegate(action="await_sessions", task_ids=[TID], timeout_ms=0)),
            {"say": "done"},
        ]
    )
    run = finish("boss", "go")
    task = Run.objects.get(parent=run)
    tid = str(task.pk)
    results = delegate_results(run)
    body = {
        "status": "timeout",
        "completed": 0,
        "pending": [tid],
        "missing": [ghost],
        "failed": [],
        "results": [],
    }
    assert results[1] == fail("one or more background tasks are still pending or missing", json.dumps(body))
    body["missing"] = []
    assert results[2] == fail("one or more background tasks are still pending or missing", json.dumps(body))
    assert json.loads(results[2]["output"])["status"] == "timeout"


def test_check_result_of_a_failed_task() -> None:
    setup(
        [
            calls(delegate(agent="bad", prompt="job", background=True)),
            calls(LS),
            calls(delegate(action="await_sessions", task_ids=[TID], timeout_ms=5000)),
            calls(LS),
            calls(delegate(action="check_result", task_id=TID)),
            {"say": "done"},
        ]
    )
    run = finish("boss", "go")
    task = Run.objects.get(parent=run)
    assert task.status == "failed"
    error = f"Agent 'bad' failed: {task.error}"
    assert delegate_results(run)[2] == fail(error, json.dumps(result_view(task)))
    assert json.loads(delegate_results(run)[1]["output"])["failed"] == [str(task.pk)]


def test_validation_errors_have_empty_output() -> None:
    ids = [str(uuid.uuid4()) for _ in range(129)]
    ghost = str(uuid.uuid4())
    setup(
        [
            calls(
                delegate(action="check_result"),
                delegate(action="check_result", task_id="nope"),
                delegate(action="check_result", task_id=ghost),
                delegate(action="cancel_task"),
                delegate(action="cancel_task", task_id="12"),
                delegate(action="cancel_task", task_id=ghost),
                delegate(action="list_results"),
                delegate(action="await_sessions"),
                delegate(action="await_sessions", task_ids=[]),
                delegate(action="await_sessions", task_ids=ids),
                delegate(action="await_sessions", task_ids=[ghost, ghost]),
                delegate(action="await_sessions", task_ids=["bad-id"]),
                delegate(action="await_sessions", task_ids=[ghost], timeout_ms="soon"),
                delegate(action="await_sessions", task_ids=[ghost], timeout_ms=120001),
            ),
            {"say": "done"},
        ]
    )
    run = finish("boss", "go")
    assert delegate_results(run) == [
        fail("Missing 'task_id' parameter for check_result"),
        fail("Invalid task_id 'nope': must be a valid UUID"),
        fail(f"No result found for task_id '{ghost}'"),
        fail("Missing 'task_id' parameter for cancel_task"),
        fail("Invalid task_id '12': must be a valid UUID"),
        fail(f"No task found for task_id '{ghost}'"),
        ok("No background delegate results found."),
        fail("Missing 'task_ids' parameter for await_sessions"),
        fail("'task_ids' must contain at least one task id"),
        fail("'task_ids' must contain no more than 128 task ids"),
        fail(f"Duplicate task_id '{ghost}' in task_ids"),
        fail("Invalid task_id 'bad-id': must be a valid UUID"),
        fail("'timeout_ms' must be an integer"),
        fail("'timeout_ms' must be no more than 120000"),
    ]
    assert not events_of(run, "run.waiting")


def test_a_task_waiting_on_its_own_children_reads_as_running() -> None:
    """check_result and the JSON mirror know only running|completed|failed|cancelled|lost|timed_out."""
    from runs_app.engine import results
    from tests.runs_app.engine_support import wait_for, wait_until

    configure(
        provider(
            "boss",
            [{"turns": [calls(delegate(agent="agentic", prompt="job", background=True)), {"say": "ok"}]}],
        )
        + provider(
            "agentic",
            [
                {"match": "^nap", "turns": [{"sleep_ms": 800}, {"say": "napped"}]},
                {
                    "turns": [
                        calls({"name": "spawn_subagent", "arguments": {"prompt": "nap"}}),
                        {"say": "{{tool_results}}"},
                    ]
                },
            ],
        )
        + "[runtime_profiles.ag]\nagentic = true\n"
        + agent("boss", "scripted.boss")
        + agent("agentic", "scripted.agentic", runtime="ag")
    )
    run = finish("boss", "go")
    task = Run.objects.get(parent=run)
    wait_until(lambda: Run.objects.get(pk=task.pk).status == "waiting", message="task waiting")
    checked = results.check_result(str(task.pk), Run.objects.get(pk=run.pk))
    assert (checked.success, checked.error) == (False, "background task is still running")
    assert json.loads(checked.output)["status"] == "running"
    listed = results.list_results(Run.objects.get(pk=run.pk))
    assert json.loads(listed.output)[0]["status"] == "running"
    task = wait_for(task.pk)
    assert task.status == "completed"
    assert json.loads(results.check_result(str(task.pk), run).output)["output"] == (
        "[Agent 'agentic' (scripted/agentic-1, agentic)]\nnapped"
    )
