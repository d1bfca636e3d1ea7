"""Who holds which run, and a heartbeat for each while its thread is alive.

The reaper treats a run whose heartbeat is stale as lost; a thread that dies stops beating
for its runs even though the process lives on."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import close_old_connections, connection
from django.utils import timezone

from runs_app.models import Run

log = logging.getLogger(__name__)

BOOT_ID = uuid.uuid4().hex[:12]
WORKER_ID = f"{socket.gethostname()}:{os.getpid()}:{BOOT_ID}"
INTERVAL_SECS = float(os.environ.get("CLAWBOARD_HEARTBEAT_SECS", "5"))

_held: dict[str, threading.Thread] = {}
_lock = threading.Lock()
_beater: threading.Thread | None = None


@contextmanager
def holding(run_id: Any) -> Iterator[None]:
    """Beat for this run while the current thread holds it."""
    hold(run_id)
    try:
        yield
    finally:
        release(run_id)


def hold(run_id: Any, by: threading.Thread | None = None) -> None:
    """Beat for this run while `by` (the current thread unless said) is alive."""
    global _beater
    with _lock:
        _held[str(run_id)] = by or threading.current_thread()
        if _beater is None or not _beater.is_alive():
            _beater = threading.Thread(target=_beat_forever, name="clawboard-heartbeat", daemon=True)
            _beater.start()


def release(run_id: Any) -> None:
    with _lock:
        _held.pop(str(run_id), None)


def held_ids() -> list[str]:
    with _lock:
        return [rid for rid, thread in _held.items() if thread.is_alive()]


def _beat_forever() -> None:
    while True:
        time.sleep(INTERVAL_SECS)
        ids = held_ids()
        if not ids:
            continue
        try:
            close_old_connections()
            Run.objects.filter(pk__in=ids, status="running", owner=WORKER_ID).update(
                heartbeat_at=timezone.now()
            )
        except Exception:
            log.exception("heartbeat failed")
        finally:
            connection.close()
