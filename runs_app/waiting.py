"""Waiting for runs to finish without polling the database in a tight loop.

An in-process event listener wakes the waiter as soon as a terminal event of one of the runs
is published. Events published by worker processes elsewhere never reach this process's
listeners, so the database is also read again at least once a second."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Any

from runs_app import events
from runs_app.models import TERMINAL_STATUSES, Run

TERMINAL_EVENT_TYPES: frozenset[str] = frozenset(f"run.{status}" for status in TERMINAL_STATUSES)
RECHECK_SECS = 1.0


def all_terminal(run_ids: Iterable[Any]) -> bool:
    ids = [str(i) for i in run_ids]
    return not Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL_STATUSES).exists()


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
        while True:
            wake.clear()
            if all_terminal(ids):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            wake.wait(min(remaining, RECHECK_SECS))
    finally:
        events.remove_listener(listener)
