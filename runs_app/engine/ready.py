"""Runs queued for the embedded worker of this process, with task messages used as wake-ups.

With the in-process broker (`memory://`), only the worker threads of this process can ever take
a task, so a message per queued run buys nothing but its cost: about 0.6 ms of CPU to send,
receive and trace, under the same GIL as the engine. A turn that spawns twenty children queued
nineteen of them that way. Here, at most as many task messages as the embedded worker has
threads are in flight at once. Each such task (a "drainer") advances its run, then takes the next
run from this list, until the list is empty. The runs themselves are `queued` in the database
as before, each is claimed by its own conditional UPDATE as before, and if this process dies the
reaper re-enqueues them as it does the runs of a lost in-memory queue.

Off (every queued run gets its own message, as before) unless an embedded worker fed by the
in-process broker runs in this process (`enable`, called by `EmbeddedWorkerThread.start`): with
a shared broker, other processes' workers must be able to take the runs."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

_lock = threading.Lock()
# (run id, its tree's root id when known, a copy of the run as queued when the queuer had one)
Entry = tuple[str, str | None, Any]
_runs: deque[Entry] = deque()
_threads = 0  # the embedded worker's threads; 0 = off
_in_flight = 0  # drainer messages sent and not yet finished


def enable(threads: int) -> None:
    global _threads
    with _lock:
        _threads = max(0, threads)


def enabled() -> bool:
    """Is an embedded worker fed by the in-process broker running here (this process then
    being the only one that advances runs)?"""
    return _threads > 0


def disable() -> None:
    """The embedded worker stopped: nothing will drain the list any more (its runs stay
    `queued` in the database, for the reaper)."""
    global _threads, _in_flight
    with _lock:
        _threads = 0
        _in_flight = 0
        _runs.clear()


def push(run_id: Any, root_id: Any = None, run: Any = None) -> None:
    """Queue a run for a worker thread of this process, or send it its own task message when
    the list is off. `run`: a copy of the run as queued, for `claims.claim_next_ready` (which
    then need not read it back); nobody else may hold it."""
    global _in_flight
    from runs_app.tasks import advance_run

    rid = str(run_id)
    with _lock:
        if _threads and _in_flight >= _threads:
            # a drainer in flight takes it before it finishes
            _runs.append((rid, str(root_id) if root_id is not None else None, run))
            return
        drain = bool(_threads)
        if drain:
            _in_flight += 1
    if drain:
        advance_run.delay(rid, True)
    else:
        advance_run.delay(rid)


def next_run() -> str | None:
    """For a drainer whose run is done: the next run to advance, or None, and then this
    drainer counts as finished. Taken under the lock that `push` holds, so a run appended while
    every drainer was busy is always seen by one of them."""
    global _in_flight
    with _lock:
        if _runs:
            return _runs.popleft()[0]
        _in_flight = max(0, _in_flight - 1)
        return None


def take_head(root_id: str | None = None) -> Entry | None:
    """Take the next listed run for the calling thread itself (`claims.claim_next_ready`), if
    there is one, and, given `root_id`, if it is of that tree."""
    with _lock:
        if _runs and (root_id is None or _runs[0][1] == root_id):
            return _runs.popleft()
        return None


def put_back(entry: Entry) -> None:
    """Undo `take_head`: the run goes back to the head of the list, or to a drainer of its
    own if fewer than one per thread are in flight (the list may have emptied meanwhile, and
    its drainers finished)."""
    global _in_flight
    from runs_app.tasks import advance_run

    with _lock:
        if not _threads:
            return  # stopped: the run stays queued in the database, for the reaper
        if _in_flight >= _threads:
            _runs.appendleft(entry)
            return
        _in_flight += 1
    advance_run.delay(entry[0], True)


def drain(advance: Callable[[str], None], first: str) -> None:
    """A drainer's work: advance its own run, then the listed runs until none is left. If one
    raises, another drainer is sent for the rest before the error goes on."""
    try:
        advance(first)
        while (rid := next_run()) is not None:
            advance(rid)
    except BaseException:
        hand_over()
        raise


def hand_over() -> None:
    """A drainer stops early (its run raised): it counts as finished, and if runs are left in
    the list, another drainer is sent for them."""
    global _in_flight
    from runs_app.tasks import advance_run

    with _lock:
        _in_flight = max(0, _in_flight - 1)
        rid = _runs.popleft()[0] if _runs and _threads and _in_flight < _threads else None
        if rid is not None:
            _in_flight += 1
    if rid is not None:
        advance_run.delay(rid, True)


def pending() -> int:
    with _lock:
        return len(_runs)
