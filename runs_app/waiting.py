"""Waiting for runs to finish without polling the database in a tight loop.

An in-process event listener wakes the waiter as soon as a terminal event of one of the runs
is heard. In the embedded mode the worker publishes its events in this process. In scale-out
the workers are other processes: `runs_app.wakeups` brings their events from the channel
layer to this process's listeners while the trees of the awaited runs are watched. The
database is also read again every RECHECK_SECS, a safety net for an event the channel layer
dropped (CLAWBOARD_WAIT_RECHECK_SECS in the environment changes it; the distributed tests
make it long, to show that the wake-up does not depend on it)."""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection

from runs_app import events, wakeups
from runs_app.models import TERMINAL_STATUSES, Run

TERMINAL_EVENT_TYPES: frozenset[str] = frozenset(f"run.{status}" for status in TERMINAL_STATUSES)
RECHECK_SECS = float(os.environ.get("CLAWBOARD_WAIT_RECHECK_SECS") or 1.0)


def all_terminal(run_ids: Iterable[Any]) -> bool:
    ids = [str(i) for i in run_ids]
    return not Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL_STATUSES).exists()


def _run_ids(values: Iterable[Any]) -> set[str]:
    """The values that are run ids (any other value names no run)."""
    ids = set()
    for value in values:
        try:
            ids.add(str(uuid.UUID(str(value))))
        except (TypeError, ValueError, AttributeError):
            continue
    return ids


def _roots(rows: Iterable[tuple[Any, Any]]) -> set[str]:
    return {str(root_id or pk) for pk, root_id in rows}


@contextmanager
def watching_runs(run_ids: Iterable[Any]) -> Iterator[None]:
    """While inside, events of these runs' trees published by any process reach this
    process's listeners (see `runs_app.wakeups`). One query, and only in scale-out mode."""
    if not wakeups.enabled():
        yield
        return
    ids = _run_ids(run_ids)
    rows = Run.objects.filter(pk__in=ids).values_list("pk", "root_id") if ids else []
    with wakeups.watching(_roots(rows)):
        yield


def release_connection() -> None:
    """Give this thread's database connection back to the pool before a wait, when there is
    a pool (PostgreSQL, see settings): a request that waits minutes must not hold one of the
    process's few connections. The next read borrows one again."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


def wait_for_terminal(run_ids: Iterable[Any], timeout: float) -> bool:
    """Block until every run is terminal (True) or `timeout` seconds have passed (False)."""
    ids = {str(i) for i in run_ids}
    if not ids:
        return True
    wake = threading.Event()

    def listener(event: dict[str, Any]) -> None:
        if event.get("type") in TERMINAL_EVENT_TYPES and event.get("run_id") in ids:
            wake.set()

    # Listen before the first read, so an event published in between is not missed.
    events.add_listener(listener)
    try:
        deadline = time.monotonic() + max(0.0, timeout)
        # One read gives both the runs still going and the trees to watch for their events.
        rows = list(Run.objects.filter(pk__in=ids).values_list("pk", "root_id", "status"))
        if all(status in TERMINAL_STATUSES for _, _, status in rows):
            return True
        live = [(pk, root_id) for pk, root_id, status in rows if status not in TERMINAL_STATUSES]
        # Watch first, then read again: an event between the two reads is in the database.
        with wakeups.watching(_roots(live)):
            while True:
                wake.clear()
                if all_terminal(ids):
                    return True
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                release_connection()
                wake.wait(min(remaining, RECHECK_SECS))
    finally:
        events.remove_listener(listener)
