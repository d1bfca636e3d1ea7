"""Model calls in flight: awaited on one event loop per process, holding no worker thread.

A worker thread that reaches a model call of a real provider hands the call to this loop and
its task ends; the run stays `running` and owned by this process, and the heartbeat keeps
beating for it from the loop's thread. When the answer comes, `on_done` runs on the loop's
thread with the answer (or the exception) and asks, through the dispatcher, for the task that
continues the run. So the number of calls in flight is bounded by `max_concurrent_runs`, not by
the worker's threads, and a call in flight holds no database connection either.

If the process dies meanwhile, nothing is lost: the reaper finds the run with a call in flight
and a stale heartbeat and queues it again; the call is made again (the one step that may
repeat, docs/runs.md)."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from runs_app.engine import heartbeat

log = logging.getLogger(__name__)

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_count = 0


def event_loop() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
    """This process's loop for model calls, started on first use (a daemon thread)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="clawboard-model-calls", daemon=True)
            thread.start()
            _loop, _thread = loop, thread
        return _loop, _thread


def submit(
    run_id: Any, call: Coroutine[Any, Any, Any], on_done: Callable[[Any, BaseException | None], None]
) -> None:
    """Await `call` on the loop; then `on_done(result, None)` or `on_done(None, exc)` on the
    loop's thread. The run is beaten for until `on_done` has run."""
    global _count
    loop, thread = event_loop()
    heartbeat.hold(run_id, by=thread)
    with _lock:
        _count += 1

    def done(future: Future[Any]) -> None:
        global _count
        with _lock:
            _count -= 1
        heartbeat.release(run_id)
        exc = future.exception()
        try:
            on_done(None if exc is not None else future.result(), exc)
        except Exception:
            # The run keeps its marker: the reaper queues it again once its heartbeat is stale.
            log.exception("run %s: the answer of its model call could not be handed on", run_id)

    asyncio.run_coroutine_threadsafe(call, loop).add_done_callback(done)


def in_flight() -> int:
    """How many calls this process awaits now (for figures and tests)."""
    with _lock:
        return _count
