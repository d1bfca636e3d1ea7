"""Notices: which of the dashboard's lists changed (runs, approvals, tasks, home), for the
websocket of every page (runs_app/consumers.py) besides the events of one run tree.

A notice is derived from the events the engine already writes (SPEC §9): when RunEvent rows
are written (the signal `events.written`, so nothing in the engine knows about this), their
topics are published once the transaction commits, one notice per write. A notice says only "this list
changed"; the page fetches the fragment again, so a lost notice costs a stale list until the
next one, never a wrong one, and the page re-fetches everything after a reconnect.

Delivery follows `events.publish`: in the embedded mode (in-memory channel layer) every writer
is in this process and the listeners are called directly, after the commit, in the writer's
thread; in scale-out the notice goes to one channel-layer group that every consumer joins."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import transaction

from runs_app.events import written
from runs_app.models import TERMINAL_STATUSES, RunEvent

log = logging.getLogger(__name__)

GROUP = "clawboard-notices"
MESSAGE_TYPE = "notice.changed"  # handled by the consumer's `notice_changed`
TOPICS: tuple[str, ...] = ("runs", "approvals", "tasks", "home")

_RUN_CHANGES = frozenset({"runs", "tasks", "home"})
# A run that ends closes its pending approvals without an approval event of their own.
_RUN_ENDS = frozenset({"runs", "tasks", "home", "approvals"})
TOPICS_OF: dict[str, frozenset[str]] = {
    "run.queued": _RUN_CHANGES,
    "run.started": _RUN_CHANGES,
    "run.waiting": _RUN_CHANGES,
    "model.response": frozenset({"runs", "home"}),  # tokens and cost
    "approval.requested": frozenset({"approvals", "home", "runs"}),
    "approval.decided": frozenset({"approvals", "home", "runs"}),
    **{f"run.{status}": _RUN_ENDS for status in TERMINAL_STATUSES},
}

_listeners: list[Callable[[frozenset[str]], None]] = []
_listeners_lock = threading.Lock()


def topics_of(event_type: str) -> frozenset[str]:
    return TOPICS_OF.get(event_type, frozenset())


def listen(callback: Callable[[frozenset[str]], None]) -> None:
    """Call `callback` with the topics of every notice published in this process (embedded
    mode). It may run in a writer's thread: it must be quick and must not raise."""
    with _listeners_lock:
        _listeners.append(callback)


def unlisten(callback: Callable[[frozenset[str]], None]) -> None:
    with _listeners_lock:
        if callback in _listeners:
            _listeners.remove(callback)


def deliver(topics: frozenset[str]) -> None:
    with _listeners_lock:
        found = list(_listeners)
    for callback in found:
        try:
            callback(topics)
        except Exception:  # a listener must never break the writer
            log.exception("delivering a notice failed")


def in_memory_layer() -> bool:
    layer = get_channel_layer()
    return layer is None or isinstance(layer, InMemoryChannelLayer)


def publish(topics: frozenset[str]) -> None:
    if in_memory_layer():
        deliver(topics)
        return
    try:
        async_to_sync(get_channel_layer().group_send)(  # type: ignore[union-attr]
            GROUP, {"type": MESSAGE_TYPE, "topics": sorted(topics)}
        )
    except Exception:
        log.exception("publishing a notice failed")


def _events_written(sender: Any, events: list[RunEvent], **kwargs: Any) -> None:
    topics = frozenset().union(*(topics_of(event.type) for event in events))
    if topics:
        transaction.on_commit(partial(publish, topics), robust=True)


def connect_signals() -> None:
    written.connect(_events_written, dispatch_uid="clawboard-notices")
