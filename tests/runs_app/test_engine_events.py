"""Events (SPEC §9): every transition is an event, persisted first and published after commit,
with global increasing ids; the log of a tree holds every type of event."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import transaction

from runs_app import events
from runs_app.engine import heartbeat
from runs_app.models import TERMINAL_STATUSES, Approval, Run, RunEvent
from runs_app.services import approval_decide, run_cancel, run_steer
from runs_app.supervision import reap_once
from tests.runs_app.engine_support import (
    agent,
    configure,
    drain,
    engine,  # noqa: F401 - fixture
    events_of,
    finish,
    make_user,
    provider,
    start,
    wait_for,
    wait_until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

STATUS_EVENTS = {"run.queued", "run.started", "run.waiting"} | {f"run.{s}" for s in TERMINAL_STATUSES}


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


RULES: list[dict[str, Any]] = [
    {"match": "^sub:", "turns": [{"say": "did {{prompt}}"}]},
    {"match": "^fail:", "turns": [{"error": "boom"}]},
    {"match": "^nap:", "turns": [{"sleep_ms": 1000}, {"say": "napped"}]},
    {"match": "^long:", "turns": [{"sleep_ms": 2500}, {"say": "late"}]},
    {"match": "^ask", "turns": [{"tool_calls": [tool("shell", command="echo hi")]}, {"say": "asked"}]},
    {"match": "^steer", "turns": [{"sleep_ms": 400}, {"tool_calls": [tool("memory_recall")]}, {"say": "steered"}]},
    {"match": "^timeout", "turns": [{"tool_calls": [tool("spawn_subagent", prompt="long: t")]}, {"say": "x"}]},
    {"match": "^cancel", "turns": [{"tool_calls": [tool("spawn_subagent", prompt="long: c")]}, {"say": "x"}]},
    {"match": "^lose", "turns": [{"tool_calls": [tool("spawn_subagent", prompt="nap: l")]}, {"say": "x"}]},
    {"turns": [
        {"tool_calls": [tool("spawn_subagent", prompt="sub: a"), tool("spawn_subagent", prompt="fail: b"),
                        tool("spawn_subagent", prompt="sub: bg", background=True)]},
        {"tool_calls": [tool("sessions_yield")]},
        {"say": "done"},
    ]},
]  # fmt: skip


def setup() -> None:
    configure(
        provider("boss", RULES)
        + '[risk_profiles.gated]\nallowed_commands = ["*"]\nalways_ask = ["shell"]\n'
        + "[runtime_profiles.rt]\nsubagent_timeout_secs = 1\n"
        + agent("boss", "scripted.boss", runtime="rt")
        + provider("asker", RULES)
        + agent("asker", "scripted.asker", risk="gated")
    )


class Recorder:
    """An in-process subscriber: what was published, and whether it was persisted by then."""

    def __init__(self) -> None:
        self.published: list[dict[str, Any]] = []
        self.persisted_first: list[bool] = []
        self.lock = threading.Lock()

    def __call__(self, event: dict[str, Any]) -> None:
        persisted = RunEvent.objects.filter(pk=event["id"]).exists()
        with self.lock:
            self.published.append(event)
            self.persisted_first.append(persisted)


def check_status_path(run: Run) -> None:
    """The status events of a run form a legal path of SPEC §4, ending in its terminal state."""
    path = [e.type for e in events_of(run) if e.type in STATUS_EVENTS]
    assert path[0] == "run.queued"
    assert path[-1] == f"run.{run.status}"
    terminal = [t for t in path if t.removeprefix("run.") in TERMINAL_STATUSES]
    assert len(terminal) == 1
    legal = {
        "run.queued": {"run.started"},
        "run.started": {"run.waiting"},
        "run.waiting": {"run.queued"},
    }
    for a, b in zip(path, path[1:], strict=False):
        if b in terminal:
            continue
        assert b in legal.get(a, set()), (run.prompt, path)


def test_a_spawning_run_logs_every_step_in_order() -> None:
    setup()
    root = finish("boss", "go")
    assert root.status == "completed", root.error
    drain()
    types = [e.type for e in events_of(root)]
    assert types[:5] == ["run.queued", "run.started", "model.request", "model.response", "tool.call"]
    assert types.count("tool.call") == 4 and types.count("tool.result") == 4
    assert types.count("model.request") == types.count("model.response") == 3
    assert types.count("run.announce") == 1
    assert types[-1] == "run.completed"
    for run in Run.objects.filter(root_id=root.pk):
        check_status_path(run)
    failed = Run.objects.get(prompt="fail: b")
    assert [e.type for e in events_of(failed)][-1] == "run.failed"
    waiting = events_of(root, "run.waiting")
    # waits on the sync children; the yield waits too unless the background child was already done
    assert waiting and {w.data["status"] for w in waiting} == {"waiting"}


def test_ids_increase_and_everything_is_persisted_then_published() -> None:
    setup()
    recorder = Recorder()
    with transaction.atomic():  # subscribed before the run's first event is published
        root = start("boss", "go")
        events.subscribe(root.pk, recorder)
    try:
        wait_for(root.pk)
        drain()
        wait_until(lambda: len([e for e in recorder.published if e["root_id"] == str(root.pk)])
                   >= RunEvent.objects.filter(root_id=root.pk).count(), message="all published")  # fmt: skip
    finally:
        events.unsubscribe(root.pk, recorder)
    rows = list(RunEvent.objects.filter(root_id=root.pk).order_by("id"))
    assert rows and all(str(r.root_id) == str(root.pk) for r in rows)
    assert all(a.at <= b.at for a, b in zip(rows, rows[1:], strict=False))
    assert all(r.type in events.EVENT_TYPES for r in rows)
    published = [e for e in recorder.published if e["root_id"] == str(root.pk)]
    # none lost, none doubled, same content as the stored rows
    assert sorted(e["id"] for e in published) == [r.id for r in rows]
    by_id = {e["id"]: e for e in published}
    assert all(by_id[r.id] == events.event_json(r) for r in rows)
    assert all(recorder.persisted_first)
    # a reader that resumes after event k gets exactly the rest
    k = rows[len(rows) // 2].id
    rest = list(
        RunEvent.objects.filter(root_id=root.pk, id__gt=k).order_by("id").values_list("id", flat=True)
    )
    assert rest == [r.id for r in rows if r.id > k]


def test_every_event_type_appears(monkeypatch: Any) -> None:
    setup()
    user = make_user()
    roots: list[Run] = []
    # spawn, announce, failed child
    roots.append(finish("boss", "go"))
    # approval requested and decided
    asked = wait_for(start("asker", "ask", user=user).pk, {"awaiting_approval"})
    approval_decide(approval=Approval.objects.get(run=asked), user=user, approve=True)
    roots.append(wait_for(asked.pk))
    # steer
    steered = start("boss", "steer", user=user)
    wait_until(lambda: Run.objects.get(pk=steered.pk).status == "running", message="running")
    run_steer(run=steered, user=user, message="hey")
    roots.append(wait_for(steered.pk))
    # timed out child
    roots.append(finish("boss", "timeout"))
    # cancelled
    cancelled = start("boss", "cancel", user=user)
    wait_until(lambda: Run.objects.filter(parent=cancelled, status="running").exists(), message="child")
    run_cancel(run=Run.objects.get(pk=cancelled.pk), user=user)
    roots.append(wait_for(cancelled.pk))
    # lost
    lose = start("boss", "lose")
    wait_until(lambda: Run.objects.filter(parent=lose, status="running").exists(), message="child")
    monkeypatch.setattr(heartbeat, "WORKER_ID", heartbeat.WORKER_ID + "-reborn")
    reap_once(startup=True)
    roots.append(wait_for(lose.pk))
    monkeypatch.undo()
    drain()
    seen = set(RunEvent.objects.values_list("type", flat=True))
    assert seen == set(events.EVENT_TYPES)
    for root in roots:
        for run in Run.objects.filter(root_id=root.pk):
            check_status_path(run)
    assert [e.data["status"] for e in events_of(asked, "run.waiting")] == ["awaiting_approval"]
