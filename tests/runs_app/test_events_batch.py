"""A `tree_tx` transaction writes its events in one INSERT just before it commits
(runs_app/events.py): same rows, same order, same publishing as one INSERT per event, and an
event of a savepoint rolled back meanwhile is neither written nor published."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from django.db import transaction

from runs_app import events
from runs_app.models import Run, RunEvent

pytestmark = pytest.mark.django_db(transaction=True)


class Published(list[dict[str, Any]]):
    """What was published of the tree `root`, subscribed before its run exists."""

    def __init__(self) -> None:
        super().__init__()
        self.root = uuid.uuid4()


@pytest.fixture
def published() -> Any:
    seen = Published()
    events.subscribe(seen.root, seen.append)
    yield seen
    events.unsubscribe(seen.root, seen.append)


def make_run(run_id: uuid.UUID) -> Run:
    return Run.objects.create(id=run_id, root_id=run_id, agent="boss", prompt="p", policy={}, tools=[])


def logged(run: Run) -> list[tuple[int, str, Any]]:
    return list(RunEvent.objects.filter(root_id=run.pk).order_by("id").values_list("id", "type", "data"))


class Boom(Exception):
    pass


def test_a_tree_transaction_writes_its_events_at_commit_in_order(published: Published) -> None:
    run = make_run(published.root)
    with events.tree_tx(run.pk):
        first = events.emit(run, "run.started", {"n": 1})
        with events.tree_tx(run.pk):  # nested, savepoint
            second = events.emit(run, "model.request", {"n": 2})
        third = events.emit(run, "model.response", {"n": 3})
        assert (first["id"], second["id"], third["id"]) == (None, None, None)  # not written yet
        assert logged(run) == []
        assert published == []
    rows = logged(run)
    assert [(t, d) for _, t, d in rows] == [
        ("run.started", {"n": 1}), ("model.request", {"n": 2}), ("model.response", {"n": 3})
    ]  # fmt: skip
    assert [first["id"], second["id"], third["id"]] == [r[0] for r in rows]
    assert rows[0][0] < rows[1][0] < rows[2][0]
    assert [(p["id"], p["type"], p["data"]) for p in published] == rows


def test_an_event_of_a_rolled_back_savepoint_is_neither_written_nor_published(
    published: Published,
) -> None:
    run = make_run(published.root)
    with events.tree_tx(run.pk):
        events.emit(run, "run.started", {"n": 1})
        with pytest.raises(Boom), events.tree_tx(run.pk):
            events.emit(run, "tool.call", {"n": "undone"})
            raise Boom
        with transaction.atomic():  # a plain savepoint, rolled back on purpose
            events.emit(run, "tool.call", {"n": "also undone"})
            transaction.set_rollback(True)
        events.emit(run, "run.waiting", {"n": 2})
    assert [(t, d) for _, t, d in logged(run)] == [("run.started", {"n": 1}), ("run.waiting", {"n": 2})]
    assert [p["data"] for p in published] == [{"n": 1}, {"n": 2}]


def test_a_failed_tree_transaction_writes_and_publishes_nothing(published: Published) -> None:
    run = make_run(published.root)
    with pytest.raises(Boom), events.tree_tx(run.pk):
        events.emit(run, "run.started")
        raise Boom
    assert logged(run) == []
    assert published == []
    with events.tree_tx(run.pk):  # the next transaction starts with an empty batch
        events.emit(run, "run.waiting")
    assert [t for _, t, _ in logged(run)] == ["run.waiting"]


def test_outside_a_tree_transaction_an_event_is_written_at_once(published: Published) -> None:
    run = make_run(published.root)
    with transaction.atomic():
        event = events.emit(run, "run.started")
        assert event["id"] is not None
        assert logged(run) == [(event["id"], "run.started", {})]
        with events.tree_tx(run.pk):  # nested in a plain transaction: written at once too
            inner = events.emit(run, "run.waiting")
            assert inner["id"] is not None and inner["id"] > event["id"]
    assert [p["id"] for p in published] == [event["id"], inner["id"]]


def test_a_large_batch_is_written_in_chunks_in_order(published: Published) -> None:
    run = make_run(published.root)
    with events.tree_tx(run.pk):
        made = [events.emit(run, "tool.call", {"i": i}) for i in range(1203)]
    rows = logged(run)
    assert [d["i"] for _, _, d in rows] == list(range(1203))
    assert [e["id"] for e in made] == [r[0] for r in rows]
    assert len(published) == 1203
