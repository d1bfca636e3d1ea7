"""Runs queued for the embedded worker of this process (runs_app/engine/ready.py): at most one
task message per worker thread in flight, each draining the list; every run still claimed and
run to its end."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from celery.signals import before_task_publish

from runs_app.engine import ready
from runs_app.models import Run
from tests.runs_app.engine_support import (
    configure_turn_of_twenty,
    engine,  # noqa: F401 - fixture
    finish,
    wait_until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]


@pytest.fixture
def published() -> Iterator[list[tuple[Any, ...]]]:
    """The arguments of every runs.advance_run message sent meanwhile."""
    sent: list[tuple[Any, ...]] = []
    lock = threading.Lock()

    def record(sender: Any = None, headers: Any = None, body: Any = None, **kwargs: Any) -> None:
        if (headers or {}).get("task") == "runs.advance_run":
            with lock:
                sent.append(tuple(body[0]))

    before_task_publish.connect(record, weak=False)
    try:
        yield sent
    finally:
        before_task_publish.disconnect(record)


def turn_of_twenty() -> Run:
    """A root whose one turn spawns twenty children, run to its end."""
    configure_turn_of_twenty()
    run = finish("boss", "go")
    assert run.status == "completed", run.error
    return run


def test_the_embedded_worker_drains_its_list() -> None:
    assert ready._threads == 2  # the tests' embedded worker, fed by the in-process broker


def test_a_turn_of_twenty_children_sends_a_few_wake_ups_not_one_message_per_child(
    published: list[tuple[Any, ...]],
) -> None:
    run = turn_of_twenty()
    children = list(Run.objects.filter(parent=run))
    assert len(children) == 20
    assert {c.status for c in children} == {"completed"}
    # One message starts the root; the turn's first child is kept by its worker (inline); of the
    # other nineteen, one message per worker thread is sent and the rest wait in the list.
    drainers = [args for args in published if args[1:] == (True,)]
    assert 1 <= len(drainers) < 10, published
    assert len(published) < 12, published
    wait_until(lambda: ready.pending() == 0 and ready._in_flight == 0, message="drainers finished")


def test_a_run_listed_while_every_drainer_is_busy_is_taken_by_one_of_them(
    published: list[tuple[Any, ...]],
) -> None:
    wait_until(lambda: ready._in_flight == 0, message="no drainer in flight")
    a, b, c = (str(uuid.uuid4()) for _ in range(3))  # no such runs: their claims find nothing
    with ready._lock:
        ready._in_flight = ready._threads  # every thread busy with a drainer
    try:
        ready.push(a)
        ready.push(b)
        assert published == []  # listed, no message
        assert ready.pending() == 2
        assert ready.next_run() == a  # a busy drainer, done with its run, takes the next
        assert ready.next_run() == b
        busy = ready._in_flight
        assert ready.next_run() is None  # list empty: that drainer counts as finished
        assert ready._in_flight == busy - 1
    finally:
        with ready._lock:
            ready._in_flight = 0
    ready.push(c)  # a thread is free: a message of its own, as a drainer
    assert published == [(c, True)]
    wait_until(lambda: ready._in_flight == 0, message="the drainer of c finished")


def test_a_drainer_whose_run_raises_hands_the_rest_to_another(published: list[tuple[Any, ...]]) -> None:
    wait_until(lambda: ready._in_flight == 0, message="no drainer in flight")
    rest = str(uuid.uuid4())

    class Boom(Exception):
        pass

    def advance(run_id: str) -> None:
        raise Boom

    with ready._lock:
        ready._in_flight = 1  # this drainer
        ready._runs.append((rest, None, None))
    with pytest.raises(Boom):
        ready.drain(advance, "first")
    # its own run raised; this drainer is finished, and another was sent for what is left
    assert published == [(rest, True)]
    wait_until(lambda: ready._in_flight == 0 and ready.pending() == 0, message="handed over")


def test_a_thread_takes_the_head_of_the_list_for_itself_and_can_put_it_back(
    published: list[tuple[Any, ...]],
) -> None:
    wait_until(lambda: ready._in_flight == 0, message="no drainer in flight")
    a, b, root = (str(uuid.uuid4()) for _ in range(3))
    with ready._lock:
        ready._in_flight = ready._threads  # every thread busy with a drainer
    try:
        ready.push(a, root)
        ready.push(b, root)
        assert ready.take_head("another tree") is None  # PostgreSQL: only a run of the same tree
        assert ready.take_head(root) == (a, root, None)
        assert ready.take_head(None) == (b, root, None)
        ready.put_back((b, root, None))  # could not be claimed: back at the head, for a drainer
        ready.put_back((a, root, None))
        assert published == []
        assert [ready.next_run(), ready.next_run()] == [a, b]
    finally:
        with ready._lock:
            ready._in_flight = 0
    # Put back when no drainer is left in flight (the list emptied meanwhile): one is sent for it.
    ready.put_back((a, root, None))
    assert published == [(a, True)]
    wait_until(lambda: ready._in_flight == 0, message="the drainer of a finished")


def test_a_finishing_child_claims_the_next_listed_one_in_its_own_commit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runs_app.engine import loop
    from runs_app.models import RunEvent

    own_claims: list[str] = []
    real_claim = loop.claim

    def counted_claim(run_id: Any) -> Any:
        own_claims.append(str(run_id))
        return real_claim(run_id)

    monkeypatch.setattr(loop, "claim", counted_claim)
    run = turn_of_twenty()
    children = {str(c.pk) for c in Run.objects.filter(parent=run)}
    assert len(children) == 20 and set(Run.objects.filter(parent=run).values_list("status", flat=True)) == {
        "completed"
    }
    events = list(RunEvent.objects.filter(root_id=run.pk).order_by("id").values_list("run_id", "type"))
    started = [str(r) for r, t in events if t == "run.started"]
    # each child started once; the root twice (at its start, and once woken by its last child)
    assert Counter(started) == Counter({str(run.pk): 2, **dict.fromkeys(children, 1)})
    # Only the root and the first run of each drainer message pay a claim transaction of their
    # own (loop.claim); every other child was claimed in the commit that ended the run before it
    # on the same thread (before, each of them paid one: about 20 here).
    assert str(run.pk) in own_claims and len(own_claims) <= 4, own_claims
    wait_until(lambda: ready.pending() == 0 and ready._in_flight == 0, message="drainers finished")
