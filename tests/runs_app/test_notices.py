"""Notices (runs_app/notices.py): which lists changed, derived from the events, published
only once the transaction that wrote them commits."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import transaction

from runs_app import events, notices
from runs_app.models import Run, RunEvent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def heard() -> Any:
    got: list[frozenset[str]] = []
    notices.listen(got.append)
    yield got
    notices.unlisten(got.append)


def event(run: Run, type_: str) -> None:
    with transaction.atomic():
        events.emit(run, type_)


def test_a_committed_event_tells_which_lists_changed(heard: list[frozenset[str]]) -> None:
    run = Run.objects.create(agent="a")
    with transaction.atomic():
        event(run, "approval.requested")
        assert heard == []  # not before the commit
    assert heard == [frozenset({"approvals", "home", "runs"})]
    event(run, "run.completed")
    assert heard[-1] == frozenset({"runs", "tasks", "home", "approvals"})


def test_a_rolled_back_event_tells_nothing(heard: list[frozenset[str]]) -> None:
    run = Run.objects.create(agent="a")
    with pytest.raises(RuntimeError), transaction.atomic():
        event(run, "run.started")
        raise RuntimeError("rolled back")
    assert heard == []


def test_events_that_change_no_list_are_not_notices(heard: list[frozenset[str]]) -> None:
    run = Run.objects.create(agent="a")
    for type_ in ("model.request", "tool.call", "tool.result", "run.steered", "run.announce"):
        event(run, type_)
    assert heard == []


def test_a_failing_listener_does_not_break_the_writer(heard: list[frozenset[str]]) -> None:
    def broken(topics: frozenset[str]) -> None:
        raise ValueError("listener bug")

    notices.listen(broken)
    try:
        event(Run.objects.create(agent="a"), "run.queued")
    finally:
        notices.unlisten(broken)
    assert heard == [frozenset({"runs", "tasks", "home"})]


def test_the_events_of_one_tree_transaction_make_one_notice(heard: list[frozenset[str]]) -> None:
    run = Run.objects.create(agent="a")
    with events.tree_tx(run.pk):
        events.emit(run, "model.response")
        events.emit(run, "approval.requested")
        events.emit(run, "run.waiting")
        assert heard == []
    assert RunEvent.objects.filter(run=run).count() == 3
    assert heard == [frozenset({"runs", "home", "approvals", "tasks"})]
