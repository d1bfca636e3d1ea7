"""Claiming in the commit that makes a run runnable (runs_app/engine/claims.py), and keeping the
worker's database connection between tasks."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from django.db import transaction
from django.db.backends.signals import connection_created

from runs_app.engine import claims, heartbeat, inline
from runs_app.models import Run
from runs_app.services import run_start
from tests.runs_app.engine_support import (
    agent,
    configure,
    engine,  # noqa: F401 - fixture
    events_of,
    finish,
    provider,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

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


def types_in_order(root: Run) -> list[tuple[str, str]]:
    from runs_app.models import RunEvent

    return [(str(e.run_id), e.type) for e in RunEvent.objects.filter(root_id=root.pk).order_by("id")]


def test_a_sync_child_is_claimed_in_the_commit_that_creates_it() -> None:
    setup_tree()
    root = finish("boss", "go")
    assert root.status == "completed", root.error
    children = list(Run.objects.filter(parent=root).order_by("created_at"))
    assert len(children) == 2
    order = types_in_order(root)
    for child in children:
        queued = order.index((str(child.pk), "run.queued"))
        # started right after queued, before the parent went to wait in that same commit
        assert order[queued + 1] == (str(child.pk), "run.started")
        assert order[queued + 2] == (str(root.pk), "run.waiting")
        assert [e.type for e in events_of(child, "run.started")] == ["run.started"]


def test_the_parent_woken_by_its_last_child_is_claimed_in_the_childs_last_commit() -> None:
    setup_tree()
    root = finish("boss", "go")
    order = types_in_order(root)
    first = Run.objects.filter(parent=root).order_by("created_at").first()
    assert first is not None
    done = order.index((str(first.pk), "run.completed"))
    assert order[done + 1 : done + 4] == [
        (str(root.pk), "tool.result"),
        (str(root.pk), "run.queued"),
        (str(root.pk), "run.started"),
    ]


def test_a_claim_rolled_back_with_its_transaction_is_claimed_again_the_usual_way() -> None:
    setup_tree()
    run = run_start(agent="boss", prompt="sub: later")  # queued, its task sent to the worker
    wait_for(run.pk)
    queued = Run.objects.create(
        id=uuid.uuid4(), agent="boss", prompt="p", policy=run.policy, tools=run.tools, status="queued"
    )
    Run.objects.filter(pk=queued.pk).update(root_id=queued.pk)
    with inline.slot() as slot:

        class Rollback(Exception):
            pass

        with pytest.raises(Rollback), transaction.atomic():
            assert claims.claim_inline(queued.pk, queued.pk) is True
            assert Run.objects.get(pk=queued.pk).status == "running"
            assert str(queued.pk) in heartbeat.held_ids()
            raise Rollback
        assert (slot.run_id, slot.claimed) == (queued.pk, True)
    assert Run.objects.get(pk=queued.pk).status == "queued"
    taken = claims.take_claimed(queued.pk)  # not running after all: claimed now, in its own commit
    assert taken is not None and taken.status == "running" and taken.owner == heartbeat.WORKER_ID
    heartbeat.release(queued.pk)
    Run.objects.filter(pk=queued.pk).update(status="cancelled")


def test_a_claim_whose_hop_never_comes_goes_back_to_the_queue() -> None:
    setup_tree()
    run = run_start(agent="boss", prompt="sub: x")
    wait_for(run.pk)
    queued = Run.objects.create(
        id=uuid.uuid4(), agent="boss", prompt="sub: y", policy=run.policy, tools=run.tools, status="queued"
    )
    Run.objects.filter(pk=queued.pk).update(root_id=queued.pk)
    with inline.slot(), transaction.atomic():
        assert claims.claim_inline(queued.pk, queued.pk) is True
    claims.give_back(queued.pk)
    assert str(queued.pk) not in heartbeat.held_ids()
    # queued again and sent to the worker, which runs it to its end
    done = wait_for(queued.pk)
    assert done.status == "completed" and done.output == "did sub: y"


def test_outside_a_worker_step_nothing_is_claimed_inline() -> None:
    setup_tree()
    run = run_start(agent="boss", prompt="sub: a")
    with transaction.atomic():
        assert inline.free() is False
        assert claims.claim_inline(run.pk, run.pk) is False
    wait_for(run.pk)


def test_worker_threads_keep_their_database_connection_between_tasks() -> None:
    setup_tree()
    finish("boss", "sub: warm both threads")
    finish("boss", "sub: and again")
    opened: list[str] = []

    def count(sender: Any, connection: Any, **kwargs: Any) -> None:
        opened.append(threading.current_thread().name)

    connection_created.connect(count)
    try:
        for i in range(4):
            assert finish("boss", f"sub: {i}").status == "completed"
    finally:
        connection_created.disconnect(count)
    assert [name for name in opened if name != threading.current_thread().name] == []


def queued_run(like: Run, prompt: str) -> Run:
    run = Run.objects.create(
        id=uuid.uuid4(), agent="boss", prompt=prompt, policy=like.policy, tools=like.tools, status="queued"
    )
    Run.objects.filter(pk=run.pk).update(root_id=run.pk)
    run.root_id = run.pk
    return run


def test_the_claimers_copy_is_brought_to_the_claim_and_handed_to_the_hop() -> None:
    setup_tree()
    done = finish("boss", "sub: warm")
    queued = queued_run(done, "sub: kept")
    with inline.slot() as slot, transaction.atomic():
        assert claims.claim_inline(queued.pk, queued.pk, queued) is True
        assert slot.run is queued
    stored = Run.objects.get(pk=queued.pk)
    assert (queued.status, queued.owner, queued.deferred) == ("running", heartbeat.WORKER_ID, False)
    assert (queued.started_at, queued.heartbeat_at) == (stored.started_at, stored.heartbeat_at)
    Run.objects.filter(pk=queued.pk).update(has_inbox=True)  # steered meanwhile
    taken = claims.take_claimed(queued.pk, queued)
    assert taken is queued and taken.has_inbox is True
    heartbeat.release(queued.pk)
    Run.objects.filter(pk=queued.pk).update(status="cancelled")


def claimed_copy(prompt: str) -> Run:
    """A queued run claimed inline in a transaction that committed; the claimer's copy."""
    setup_tree()
    queued = queued_run(finish("boss", "sub: warm"), prompt)
    with inline.slot(), transaction.atomic():
        assert claims.claim_inline(queued.pk, queued.pk, queued) is True
    return queued


def test_a_kept_copy_of_a_run_cancelled_before_its_hop_is_not_advanced() -> None:
    queued = claimed_copy("sub: cancelled")
    Run.objects.filter(pk=queued.pk).update(status="cancelled", owner="")
    assert claims.take_claimed(queued.pk, queued) is None
    assert str(queued.pk) not in heartbeat.held_ids()
    assert Run.objects.get(pk=queued.pk).status == "cancelled"


def test_a_kept_copy_whose_claim_rolled_back_is_claimed_the_usual_way() -> None:
    setup_tree()
    done = finish("boss", "sub: warm")
    queued = queued_run(done, "sub: rolled back")

    class Rollback(Exception):
        pass

    with inline.slot(), pytest.raises(Rollback), transaction.atomic():
        assert claims.claim_inline(queued.pk, queued.pk, queued) is True
        raise Rollback
    assert Run.objects.get(pk=queued.pk).status == "queued"
    taken = claims.take_claimed(queued.pk, queued)
    assert taken is not None and taken is not queued  # read afresh by its own claim
    assert (taken.status, taken.owner) == ("running", heartbeat.WORKER_ID)
    heartbeat.release(queued.pk)
    Run.objects.filter(pk=queued.pk).update(status="cancelled")


def root_reads_during(monkeypatch: pytest.MonkeyPatch, prompt: str) -> tuple[Run, int]:
    """Run boss to its end; how many times the root's full row was read meanwhile."""
    from runs_app.engine import sql

    reads: list[str] = []
    real = sql.run_get

    def counted(pk: Any) -> Run | None:
        reads.append(str(pk))
        return real(pk)

    monkeypatch.setattr(sql, "run_get", counted)
    root = finish("boss", prompt)
    return root, reads.count(str(root.pk))


def test_a_parent_woken_in_the_embedded_mode_resumes_with_the_copy_it_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    setup_tree()
    root, reads = root_reads_during(monkeypatch, "go")
    assert root.status == "completed" and root.output == "got did sub: one"
    # Claimed once through the broker at its start (one read); woken twice by its children, each
    # time resuming with the run and policy it kept when it went to wait: no read.
    assert reads <= 1


def test_with_a_shared_broker_a_woken_parent_reads_its_row_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from runs_app.engine import ready

    setup_tree()
    monkeypatch.setattr(ready, "enabled", lambda: False)  # as with Redis: another worker may resume it
    root, reads = root_reads_during(monkeypatch, "go")
    assert root.status == "completed" and root.output == "got did sub: one"
    assert reads >= 2  # read back on each wake-up


def test_a_kept_copy_behind_the_stored_turns_is_read_again() -> None:
    # Advanced by another process meanwhile (more model turns): the copy is stale.
    queued = claimed_copy("sub: elsewhere")
    Run.objects.filter(pk=queued.pk).update(turns=3)
    taken = claims.take_claimed(queued.pk, queued)
    assert taken is not None and taken is not queued and taken.turns == 3
    heartbeat.release(queued.pk)
    Run.objects.filter(pk=queued.pk).update(status="cancelled")
