"""Claiming (runs_app/engine/claims.py): a step starts with one conditional UPDATE from
`queued`, so a duplicated or late task message claims nothing, and every hop of a run goes
through the dispatcher (runs_app/engine/dispatch.py)."""

from __future__ import annotations

from typing import Any

import pytest

from runs_app.engine import claims, dispatch, heartbeat
from runs_app.engine.step import advance_run
from runs_app.models import Run, RunEvent
from tests.runs_app.engine_support import (
    agent,
    configure,
    events_of,
    finish,
    inline,  # noqa: F401 - fixture
    provider,
    start,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline")]

SPAWN = {"name": "spawn_subagent", "arguments": {"prompt": "sub: one"}}


def setup_tree() -> None:
    configure(
        provider(
            "boss",
            [
                {"match": "^sub:", "turns": [{"say": "did {{prompt}}"}]},
                {
                    "turns": [
                        {"tool_calls": [SPAWN]},
                        {"tool_calls": [SPAWN]},
                        {"say": "got {{tool_results}}"},
                    ]
                },
            ],
        )
        + agent("boss", "scripted.boss")
    )


def test_a_claim_takes_a_queued_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    setup_tree()
    monkeypatch.setattr(dispatch, "runnable", lambda run_id: None)  # no worker takes it meanwhile
    run = start("boss", "go")
    monkeypatch.undo()
    taken = claims.claim(run.pk)
    assert taken is not None
    assert (taken.status, taken.owner, taken.deferred) == ("running", heartbeat.WORKER_ID, False)
    assert claims.claim(run.pk) is None  # a duplicated message finds it running
    assert [e.type for e in events_of(run)] == ["run.queued", "run.started"]
    Run.objects.filter(pk=run.pk).update(status="queued", owner="")  # let the worker finish it


def test_a_duplicated_task_message_advances_nothing_twice() -> None:
    setup_tree()
    run = finish("boss", "go")
    assert run.status == "completed", run.error
    before = RunEvent.objects.count()
    advance_run(run.pk)  # a late duplicate of one of its messages
    assert RunEvent.objects.count() == before
    assert Run.objects.get(pk=run.pk).output == "got did sub: one"


def test_every_hop_of_a_tree_goes_through_the_dispatcher(monkeypatch: pytest.MonkeyPatch) -> None:
    setup_tree()
    sent: list[str] = []
    real = dispatch.runnable

    def counted(run_id: Any) -> None:
        sent.append(str(run_id))
        real(run_id)

    monkeypatch.setattr(dispatch, "runnable", counted)
    run = finish("boss", "go")
    assert run.status == "completed", run.error
    children = [
        str(pk) for pk in Run.objects.filter(parent=run).order_by("created_at").values_list("pk", flat=True)
    ]
    # The root when it is queued, each child when it is created, the root again after each child.
    assert sent == [str(run.pk), children[0], str(run.pk), children[1], str(run.pk)]


def test_a_state_change_outside_a_transaction_is_refused() -> None:
    """`move`, completing a call, waking a run and writing an event join their caller's
    transaction; outside one they refuse before writing anything."""
    from runs_app import events
    from runs_app.engine import settle, transitions

    setup_tree()
    run = start("boss", "go")
    finish_all = [lambda: transitions.move(run, ["queued"], "cancelled"),
                  lambda: settle.wake_if_ready(run),
                  lambda: events.emit(run, "run.steered", {})]  # fmt: skip
    for attempt in finish_all:
        with pytest.raises(AssertionError):
            attempt()
    assert [e.type for e in events_of(run)][0] == "run.queued"
