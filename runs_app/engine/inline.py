"""Inline continuation: a worker that just made a run runnable keeps it.

When a step spawns a sync child (the parent now waits) or finishes a child (its parent is
queued again), the next useful work is that run. Instead of a round trip through the broker,
the first run queued during a step is kept in a per-thread slot and advanced by the same
worker right after; any further ones go through the broker as usual.

The kept run is usually claimed in the very commit that queued it (`claims.claim_inline`): it
is then `running`, owned by this worker, with a fresh heartbeat, and if this worker dies before
taking it the reaper treats it as any run whose worker died. Otherwise it is `queued` in the
database, and the reaper's re-enqueue of stale queued runs recovers it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_local = threading.local()


class Slot:
    __slots__ = ("run_id", "claimed", "run")

    def __init__(self) -> None:
        self.run_id: Any = None
        self.claimed = False  # claimed already, in the commit that queued it (claims.claim_inline)
        # The claimer's copy of the run, as the claim left it (claims.take_claimed checks it)
        self.run: Any = None


@contextmanager
def slot() -> Iterator[Slot]:
    current = Slot()
    previous = getattr(_local, "slot", None)
    _local.slot = current
    try:
        yield current
    finally:
        _local.slot = previous


def free() -> bool:
    """Is this thread a worker whose slot is still free?"""
    current: Slot | None = getattr(_local, "slot", None)
    return current is not None and current.run_id is None


def take(run_id: Any, *, claimed: bool = False, run: Any = None) -> bool:
    """Keep `run_id` for this thread's worker if its slot is free. False: send it to the broker."""
    current: Slot | None = getattr(_local, "slot", None)
    if current is None or current.run_id is not None:
        return False
    current.run_id, current.claimed, current.run = run_id, claimed, run
    return True
