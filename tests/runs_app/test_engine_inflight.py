"""Model calls in flight (engine/inflight.py): a real provider's call is awaited on the
process's event loop, so it holds no worker thread; its answer continues the run as a task;
a run whose worker died during its call is queued again and the call is made again.

Against a real local HTTP server that speaks the OpenAI protocol and answers after a delay;
the worker is the real embedded Celery worker with 2 threads."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from policies_app.models import TrackerCost
from runs_app.engine import dispatch, heartbeat, inflight, step
from runs_app.engine import messages as msg
from runs_app.engine.decide import Turn
from runs_app.engine.providers import ToolCallRequest, Usage
from runs_app.models import Run
from runs_app.services import run_cancel
from runs_app.supervision import reap_once
from tests.runs_app.engine_support import (
    call_results,
    configure,
    engine,  # noqa: F401 - fixture
    events_of,
    make_user,
    start,
    wait_for,
    wait_until,
)
from tests.runs_app.model_http import KeepAliveServer
from tests.runs_app.test_providers_openai import Reply, completion

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[KeepAliveServer]:
    monkeypatch.setenv("CLAWBOARD_TEST_KEY", "sk-test")
    server = KeepAliveServer(delay=0.5)
    yield server
    server.close()


def setup(server: KeepAliveServer, *, concurrent: int = 8, priced: bool = False) -> None:
    pricing = "pricing = { input_per_mtok_cents = 100.0, output_per_mtok_cents = 100.0 }\n" if priced else ""
    configure(
        f"""
[providers.models.openai.slow]
model = "gpt-slow"
uri = "{server.url}/v1"
api_key_env = "CLAWBOARD_TEST_KEY"
max_tokens = 100
{pricing}
[agents.boss]
model_provider = "openai.slow"
risk_profile = "team"
[delegate]
max_concurrent_runs = {concurrent}
"""
    )


def spawn_answer(path: str, body: dict[str, Any]) -> Reply:
    """The coordinator asks for 5 children (the default most at once) in one turn, then sums up; a child answers."""
    messages = body["messages"]
    if messages[-1]["role"] == "tool":
        return completion("all children answered", prompt=10, completion=5)
    if "coordinate" in messages[-1]["content"]:
        calls = [
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": "spawn_subagent", "arguments": json.dumps({"prompt": f"child {i}"})},
            }
            for i in range(5)
        ]
        return completion(None, tool_calls=calls, prompt=10, completion=5)
    return completion("child says hi", prompt=10, completion=5)


def test_calls_in_flight_outnumber_the_worker_threads(model: KeepAliveServer) -> None:
    setup(model, concurrent=20)
    runs = [start("boss", f"task {i}") for i in range(12)]
    done = [wait_for(r.pk, timeout=60) for r in runs]
    assert [(r.status, r.output) for r in done] == [("completed", "ok")] * 12
    # 2 worker threads; a blocking call would have kept at most 2 requests in flight.
    assert model.max_in_flight >= 8, model.max_in_flight
    assert inflight.in_flight() == 0
    assert Run.objects.filter(model_call_at__isnull=False).count() == 0


def test_children_of_one_turn_are_all_in_flight_at_once(model: KeepAliveServer) -> None:
    model.answer = spawn_answer
    setup(model, concurrent=10)
    root = wait_for(start("boss", "coordinate").pk, timeout=60)
    assert (root.status, root.output) == ("completed", "all children answered")
    assert [r["output"] for r in call_results(root)] == ["child says hi"] * 5, call_results(root)
    assert model.max_in_flight >= 4, model.max_in_flight
    # a turn's events are those of the blocking path: model.request then model.response
    types = [e.type for e in events_of(root) if e.type.startswith("model.")]
    assert types == ["model.request", "model.response"] * 2


def test_a_cancelled_run_drops_the_answer_of_its_call_and_records_its_cost(model: KeepAliveServer) -> None:
    model.answer = lambda path, body: completion("ok", prompt=1000, completion=1000)
    setup(model, priced=True)
    run = start("boss", "task")
    wait_until(lambda: Run.objects.get(pk=run.pk).model_call_at is not None, message="call in flight")
    run_cancel(run=Run.objects.get(pk=run.pk), user=make_user())
    wait_until(lambda: inflight.in_flight() == 0, message="the call answered")
    # the reservation is released and the call's real cost recorded: 2,000 tokens at 100¢/Mtok
    wait_until(lambda: TrackerCost.objects.get().reserved_cents == 0.0, message="reservation released")
    run = Run.objects.get(pk=run.pk)
    assert run.status == "cancelled"
    assert run.turns == 0 and run.input_tokens == 0
    assert events_of(run, "model.response") == []
    assert TrackerCost.objects.get().cents == pytest.approx(0.2)


def test_an_answer_for_another_owner_changes_nothing(model: KeepAliveServer) -> None:
    setup(model)
    run = wait_for(start("boss", "task").pk, timeout=30)
    answer = Turn(text="late", usage=Usage(1, 1), provider_ref="openai.slow", model="gpt-slow").as_json()
    step.continue_run(run.pk, "gone:1:dead", answer)
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.output, run.turns) == ("completed", "ok", 1)


def test_a_run_whose_worker_died_during_its_call_is_queued_again_and_calls_again(
    model: KeepAliveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    setup(model)
    # The worker sends the call off, then "dies": its answer never reaches a worker.
    monkeypatch.setattr(step, "continue_with", lambda run_id, owner, turn: None)
    run = start("boss", "task")
    wait_until(lambda: len(model.requests) == 1 and inflight.in_flight() == 0, message="first call answered")
    monkeypatch.undo()
    Run.objects.filter(pk=run.pk).update(
        owner="gone:1:dead", heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    assert reap_once()["recalled"] == 1
    run = wait_for(run.pk, timeout=30)
    assert (run.status, run.output, run.turns) == ("completed", "ok", 1)
    assert len(model.requests) == 2  # the call was made again
    queued = events_of(run, "run.queued")
    assert [e.data for e in queued][-1] == {"reason": msg.MODEL_CALL_AGAIN}
    assert msg.MODEL_CALL_AGAIN == "its worker stopped during a model call; the call is made again"
    assert len(events_of(run, "run.started")) == 2


def test_a_stale_run_outside_a_model_call_is_still_lost(model: KeepAliveServer) -> None:
    setup(model)
    run = wait_for(start("boss", "task").pk, timeout=30)
    Run.objects.filter(pk=run.pk).update(
        status="running", owner="gone:1:dead", heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    counts = reap_once()
    assert (counts["lost"], counts["recalled"]) == (1, 0)
    assert Run.objects.get(pk=run.pk).status == "lost"


def test_turn_survives_a_task_message() -> None:
    turn = Turn(
        text="t",
        calls=(ToolCallRequest("c1", "spawn_subagent", {"prompt": "x"}),),
        usage=Usage(3, 4),
        provider_ref="openai.slow",
        model="gpt-slow",
        requested_at="2026-12-02T00:00:00+00:00",
        reserved=1.5,
        reserved_on=timezone.now().date(),
    )
    assert Turn.from_json(json.loads(json.dumps(turn.as_json()))) == turn
    failed = Turn(failure="HTTP 500", invalid=False)
    assert Turn.from_json(json.loads(json.dumps(failed.as_json()))) == failed


def test_the_answer_is_sent_as_a_continue_task(
    model: KeepAliveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[str, list[Any]]] = []
    real = dispatch.dispatcher

    class Recording:
        def send(self, task: str, args: list[Any], countdown: float | None = None) -> None:
            sent.append((task, args))
            real().send(task, args, countdown)

    monkeypatch.setattr(dispatch, "dispatcher", Recording)
    setup(model)
    run = wait_for(start("boss", "task").pk, timeout=30)
    assert run.status == "completed"
    assert [t for t, _ in sent] == [dispatch.ADVANCE_TASK, dispatch.CONTINUE_TASK]
    assert sent[1][1][:2] == [str(run.pk), heartbeat.WORKER_ID]
