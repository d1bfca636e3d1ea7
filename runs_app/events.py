"""Events are facts first, messages second (SPEC §9).

`emit` writes the event row inside the caller's transaction; publishing to the channel-layer
group of the root run happens on commit. A subscriber that reconnects with its last seen id
reads what it missed from the table, so a lost message never loses an event."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction
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

EVENT_LOCK_SPACE = 4242  # first key of the advisory locks that order a tree's events

# In-process listeners (await_sessions, REST `wait`): called after commit with each event.
_listeners: list[Callable[[dict[str, Any]], None]] = []
_listeners_lock = threading.Lock()
# The event loop of the ASGI server in this process, for the in-memory channel layer,
# whose queues must only be touched from their own loop.
_server_loop: asyncio.AbstractEventLoop | None = None


def group_name(root_id: Any) -> str:
    return f"run-{root_id}"


def set_server_loop(loop: asyncio.AbstractEventLoop) -> None:
    global _server_loop
    _server_loop = loop


def add_listener(fn: Callable[[dict[str, Any]], None]) -> None:
    with _listeners_lock:
        _listeners.append(fn)


def remove_listener(fn: Callable[[dict[str, Any]], None]) -> None:
    with _listeners_lock:
        if fn in _listeners:
            _listeners.remove(fn)


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
    """Persist one event inside the caller's transaction and publish it once that commits.
    Returns the event as it is published (`event_json`'s shape). `run` only needs `pk` and
    `root_id`."""
    return emit_for(run.pk, run.root_id or run.pk, type_, data)


def emit_for(run_id: Any, root_id: Any, type_: str, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """`emit` by ids: no Run instance needed."""
    assert type_ in EVENT_TYPES, type_
    lock_tree(root_id)
    event = RunEvent.objects.create(
        run_id=run_id, root_id=root_id, type=type_, at=timezone.now(), data=data or {}
    )
    payload = event_json(event)
    transaction.on_commit(lambda: publish(payload), robust=True)
    return payload


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


@contextmanager
def tree_tx(root_id: Any, *, savepoint: bool = False) -> Iterator[None]:
    """`transaction.atomic()` holding the tree's lock from its first statement. Nested in
    another transaction it adds no savepoint unless asked (`savepoint=True`, for a block
    whose failure its caller catches and survives): an error inside ends the whole one."""
    with transaction.atomic(savepoint=savepoint):
        lock_tree(root_id)
        yield


def dispatch_local(payload: dict[str, Any]) -> None:
    """Call this process's listeners with one event, without publishing it anywhere.

    `publish` calls it for the events written here; `runs_app.wakeups` for the events of
    other processes that it receives from the channel layer."""
    with _listeners_lock:
        listeners = list(_listeners)
    for fn in listeners:
        try:
            fn(payload)
        except Exception:  # a listener must never break the writer
            log.exception("event listener failed")


def publish(payload: dict[str, Any]) -> None:
    dispatch_local(payload)
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": "run.event", "event": payload}
    group = group_name(payload["root_id"])
    try:
        if isinstance(layer, InMemoryChannelLayer):
            loop = _server_loop
            if loop is None or loop.is_closed():
                return  # no websocket server in this process: nobody to tell
            asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop)
        else:
            async_to_sync(layer.group_send)(group, message)
    except Exception:
        log.exception("publishing event %s failed", payload["id"])
