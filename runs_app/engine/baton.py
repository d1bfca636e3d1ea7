"""One worker thread of a process advances runs at a time; the others wait for the baton.

A step is Python and short SQL statements, and Python runs one thread at a time (the GIL).
Two worker threads stepping at once do not go faster than one: every statement lets go of
the GIL, and getting it back means waiting for the other thread to let go in turn, while the
two also queue for SQLite's write lock. Measured on a turn of twenty children
(bench/spawn_overhead.py, one-turn, N=100): 4.0–4.7 ms per child with two threads stepping
together, 2.6–3.4 ms with one.

So a thread holds the baton while it advances a run (`held`, around each hop), and gives it up
only where it waits on something outside the process (`released`): a provider's network call,
a scripted model's sleep, a retry's back-off, local tools. The other threads step meanwhile,
so a run waiting on a slow model still never holds up the others, which is what the worker
threads are for. A model call that does not wait (a scripted reply) keeps the baton: handing
it over costs two thread switches.

No deadlock: the baton is taken only by a thread that holds nothing else (a hop's start, or
the end of a model call or a tool run, both outside any transaction), so its holder never
waits for a lock held by a thread that waits for the baton. `released` inside a transaction
keeps the baton. Threads that are not stepping runs (requests, the reaper, other tasks) never
take it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from zeroclaw_site import dbconn

_baton = threading.Lock()
_local = threading.local()


def holding() -> bool:
    return bool(getattr(_local, "held", False))


@contextmanager
def held() -> Iterator[None]:
    """Hold the baton for a hop (a thread that holds it already just goes on)."""
    if holding():
        yield
        return
    _baton.acquire()
    _local.held = True
    try:
        yield
    finally:
        _local.held = False
        _baton.release()


@contextmanager
def released() -> Iterator[None]:
    """Let other worker threads step while this one waits on a model or a tool."""
    if not holding() or dbconn.default().in_atomic_block:
        yield
        return
    _local.held = False
    _baton.release()
    try:
        yield
    finally:
        _baton.acquire()
        _local.held = True
