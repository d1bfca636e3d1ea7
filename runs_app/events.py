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
from django.utils import timezone

from runs_app.engine import sql
from runs_app.models import Run, RunEvent
from zeroclaw_site.txmemo import once_per_transaction

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


def emit(run: Run, type_: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """Persist one event inside the caller's transaction and publish it on commit.

    Inside a transaction opened by `tree_tx`, the row is written with the others of that
    transaction in one INSERT just before it commits (`_flush`); elsewhere, now. Either way
    the event commits or rolls back with the caller's transaction, ids follow the order of
    the calls, and nothing reads a tree's events before its transaction commits.

    Returns the event as it is published (`event_json`'s shape); its "id" is set once its row
    is written. `run` only needs `pk` and `root_id`."""
    return emit_for(run.pk, run.root_id or run.pk, type_, data)


def emit_for(run_id: Any, root_id: Any, type_: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """`emit` by ids: no Run instance needed."""
    assert type_ in EVENT_TYPES, type_
    lock_tree(root_id)
    at, data = timezone.now(), data or {}
    payload: dict[str, Any] = {
        "id": None,
        "run_id": str(run_id),
        "root_id": str(root_id),
        "type": type_,
        "at": at.isoformat(),
        "data": data,
    }
    conn = sql.conn()
    batch: _Batch | None = getattr(conn, "_clawboard_events", None)
    if batch is not None and conn.atomic_blocks and conn.atomic_blocks[0] is batch.block:

        def send() -> None:
            publish(payload)

        conn.on_commit(send, robust=True)
        batch.rows.append((sql.event_row(run_id, root_id, type_, at, data), payload, send))
        return payload
    # One plain INSERT: the ORM's create() costs several times the statement (runs_app.engine.sql).
    payload["id"] = sql.insert_event(run_id, root_id, type_, at, data)
    conn.on_commit(lambda: publish(payload), robust=True)
    return payload


class _Batch:
    """The events of one `tree_tx` transaction not written yet: (row, payload, the on-commit
    callback that publishes it)."""

    __slots__ = ("block", "rows")

    def __init__(self, block: Any) -> None:
        self.block = block
        self.rows: list[tuple[list[Any], dict[str, Any], Callable[[], None]]] = []


def _flush(conn: Any, batch: _Batch) -> None:
    """Write the batch's events in one INSERT, just before the transaction commits. An event
    emitted inside a savepoint that was rolled back since is left out: Django dropped its
    publishing callback from the commit hooks, which is how it is recognised."""
    rows, batch.rows = batch.rows, []
    if not rows or conn.needs_rollback:
        return
    alive = {id(func) for _, func, _ in conn.run_on_commit}
    kept = [r for r in rows if id(r[2]) in alive]
    ids = sql.insert_events([r[0] for r in kept])
    for (_, payload, _), event_id in zip(kept, ids, strict=True):
        payload["id"] = event_id


def lock_tree(root_id: Any) -> None:
    """Serialise the writers of one run tree until the end of the current transaction.

    Two reasons. PostgreSQL hands out event ids at insert time, so two transactions could
    commit a tree's events out of id order, and a subscriber resuming "after id N" would skip
    the late one. And settling siblings, waking a parent and the parent going to wait must see
    each other's effects. The lock is a transaction-scoped advisory lock per tree, and every
    engine transaction takes it FIRST, before any row lock, so the order of locks is always
    the same (no deadlock). Re-entrant within a transaction. SQLite already serialises every
    writer, so there it does nothing."""
    conn = sql.conn()
    if conn.vendor != "postgresql":
        return
    key = str(root_id)

    def take() -> bool:
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [EVENT_LOCK_SPACE, key])
        return True

    # Taken once per transaction: every emit() asks again, and each ask is a round trip.
    once_per_transaction(("tree lock", key), take)


@contextmanager
def tree_tx(root_id: Any, *, savepoint: bool = True) -> Iterator[None]:
    """`transaction.atomic()` holding the tree's lock from its first statement.

    `savepoint=False` for a block nested in another whose exceptions always end the outer
    one too (nobody catches them inside it): no SAVEPOINT/RELEASE pair on the hot path."""
    conn = sql.conn()
    if not savepoint and conn.in_atomic_block:
        # Nested, and its exceptions end the outer block anyway: Django's atomic() here would
        # only push and pop a marker (and look the connection up twice).
        lock_tree(root_id)
        yield
        return
    with transaction.atomic(savepoint=savepoint):
        batch = _Batch(conn.atomic_blocks[0]) if len(conn.atomic_blocks) == 1 else None
        if batch is not None:  # the outermost block: its events are written in one INSERT
            setattr(conn, "_clawboard_events", batch)  # noqa: B010
        try:
            lock_tree(root_id)
            yield
            if batch is not None:
                _flush(conn, batch)
        finally:
            if batch is not None:
                setattr(conn, "_clawboard_events", None)  # noqa: B010


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
