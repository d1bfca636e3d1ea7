"""Events are facts first, messages second (SPEC §9).

`emit` writes the event row inside the caller's transaction; publishing happens on commit: to
the channel-layer group of the root run in scale-out, to this process's subscribers of the
tree in the embedded mode (`subscribe`). A subscriber that reconnects with its last seen id
reads what it missed from the table, so a lost message never loses an event (`runs_app.live`
reads both)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction
from django.dispatch import Signal
from django.utils import timezone

from runs_app.models import Run, RunEvent

log = logging.getLogger(__name__)

EVENT_TYPES: tuple[str, ...] = (
    "run.queued",
    "run.started",
    "run.waiting",
    "model.request",
    "model.response",
    "tool.call",
    "tool.result",
    "approval.requested",
    "approval.decided",
    "run.announce",
    "run.steered",
    "run.completed",
    "run.failed",
    "run.cancelled",
    "run.timed_out",
    "run.lost",
)

# Sent with `events` (the RunEvent rows) when events are written, inside their transaction:
# what derives something from events listens here (runs_app/notices.py). Several events of one
# transaction are written with one INSERT, which Django's post_save does not see.
written = Signal()

EVENT_LOCK_SPACE = 4242  # first key of the advisory locks that order a tree's events

# This process's subscribers, by root id: called with each event of their tree (`deliver`),
# after its commit, in the writer's thread or on the loop of `runs_app.live`'s relay.
_subscribers: dict[str, list[Callable[[dict[str, Any]], None]]] = {}
_subscribers_lock = threading.Lock()


def group_name(root_id: Any) -> str:
    return f"run-{root_id}"


def subscribe(root_id: Any, callback: Callable[[dict[str, Any]], None]) -> None:
    """Call `callback` with every event of this tree from now on: published in this process
    (embedded mode), or relayed from the channel layer by `runs_app.live` (scale-out). It may
    run in a writer's thread after its commit, so it must be quick and must not raise."""
    with _subscribers_lock:
        _subscribers.setdefault(str(root_id), []).append(callback)


def unsubscribe(root_id: Any, callback: Callable[[dict[str, Any]], None]) -> None:
    with _subscribers_lock:
        found = _subscribers.get(str(root_id), [])
        if callback in found:
            found.remove(callback)
        if not found:
            _subscribers.pop(str(root_id), None)


def event_json(event: RunEvent) -> dict[str, Any]:
    return {
        "id": event.id,
        "run_id": str(event.run_id),
        "root_id": str(event.root_id),
        "type": event.type,
        "at": event.at.isoformat(),
        "data": event.data,
    }


def emit(run: Run, type_: str, data: dict[str, Any] | None = None) -> None:
    """Persist one event inside the caller's transaction and publish it once that commits.
    `run` only needs `pk` and `root_id`."""
    emit_for(run.pk, run.root_id or run.pk, type_, data)


def emit_for(run_id: Any, root_id: Any, type_: str, data: dict[str, Any] | None = None) -> None:
    """`emit` by ids: no Run instance needed. Inside `tree_tx` the event is written with the
    block's others, in one INSERT, when the outermost block ends (still inside its
    transaction, so the events and the change they describe commit together)."""
    assert type_ in EVENT_TYPES, type_
    assert not transaction.get_autocommit(), "an event is written in the transaction of its change"
    event = RunEvent(run_id=run_id, root_id=root_id, type=type_, at=timezone.now(), data=data or {})
    batch = _batch()
    if batch.depth:
        batch.events.append(event)
        return
    lock_tree(root_id)
    _write([event])


def _write(found: list[RunEvent]) -> None:
    """Insert events in order (their ids increase in that order), tell `written`'s receivers,
    and publish them on commit."""
    if len(found) == 1:
        found[0].save(force_insert=True)
    else:
        RunEvent.objects.bulk_create(found)  # returns the ids on PostgreSQL and SQLite ≥ 3.35
    written.send(sender=RunEvent, events=found)
    payloads = [event_json(event) for event in found]
    transaction.on_commit(lambda: _publish_all(payloads), robust=True)


def _publish_all(payloads: list[dict[str, Any]]) -> None:
    for payload in payloads:
        publish(payload)


class _Batch(threading.local):
    """The events of this thread's open `tree_tx` blocks, not yet written, and the trees whose
    lock their transaction holds."""

    def __init__(self) -> None:
        self.depth = 0
        self.events: list[RunEvent] = []
        self.locked: set[str] = set()


_batches = _Batch()


def _batch() -> _Batch:
    return _batches


def lock_tree(root_id: Any) -> None:
    """Serialise the writers of one run tree until the end of the current transaction.

    Raw SQL because the ORM has no advisory locks. PostgreSQL hands out event ids at insert
    time, so two transactions of one tree could commit its events out of id order, and a
    subscriber resuming "after id N" would skip the late one; settling siblings, waking a
    parent and the parent going to wait must also see each other's effects. Every engine
    transaction takes this lock first (`tree_tx`), before any row lock, so locks are always
    taken in the same order. Re-entrant. SQLite serialises every writer already (IMMEDIATE
    transactions), so there it does nothing."""
    conn = transaction.get_connection()
    if conn.vendor != "postgresql":
        return
    with conn.cursor() as cursor:
        cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [EVENT_LOCK_SPACE, str(root_id)])


def within(root_id: Any) -> None:
    """For the functions that change a tree inside their caller's transaction (`move`,
    completing a call, waking a run): assert that there is one, and hold the tree's lock in
    it (taken once per `tree_tx` and root)."""
    assert not transaction.get_autocommit(), "a tree changes inside its caller's transaction"
    batch = _batch()
    if batch.depth and str(root_id) in batch.locked:
        return
    lock_tree(root_id)
    if batch.depth:
        batch.locked.add(str(root_id))


@contextmanager
def tree_tx(root_id: Any, *, savepoint: bool = False, durable: bool = False) -> Iterator[None]:
    """`transaction.atomic()` holding the tree's lock from its first statement (once per
    root, however deep the blocks nest). Nested in another transaction it adds no savepoint
    unless asked (`savepoint=True`, for a block whose failure its caller catches and
    survives): an error inside ends the whole one. `durable=True` where a transaction really
    begins (the claim, a turn, the tool calls, a resume): never inside another. The events
    emitted inside are written together when the outermost block ends; those of a block that
    fails are dropped with it."""
    with transaction.atomic(savepoint=savepoint, durable=durable):
        batch = _batch()
        if not batch.depth:
            batch.locked = set()
        held = set(batch.locked)
        if str(root_id) not in batch.locked:
            lock_tree(root_id)
            batch.locked.add(str(root_id))
        mark = len(batch.events)
        batch.depth += 1
        try:
            yield
        except BaseException:
            del batch.events[mark:]
            if savepoint:  # the locks taken in a savepoint that rolls back go with it
                batch.locked = held
            raise
        finally:
            batch.depth -= 1
        if batch.depth == 0 and batch.events:
            found, batch.events = batch.events, []
            _write(found)


def deliver(payload: dict[str, Any]) -> None:
    """Hand one event to this process's subscribers of its tree."""
    with _subscribers_lock:
        found = list(_subscribers.get(payload["root_id"], ()))
    for callback in found:
        try:
            callback(payload)
        except Exception:  # a subscriber must never break the writer
            log.exception("delivering event %s failed", payload.get("id"))


def publish(payload: dict[str, Any]) -> None:
    """Send one committed event to its tree's subscribers: this process's in the embedded
    mode; in scale-out, the channel-layer group's (`runs_app.live` relays it to the
    subscribers of each server process, this one included)."""
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        deliver(payload)
        return
    try:
        async_to_sync(layer.group_send)(
            group_name(payload["root_id"]), {"type": "run.event", "event": payload}
        )
    except Exception:
        log.exception("publishing event %s failed", payload["id"])
