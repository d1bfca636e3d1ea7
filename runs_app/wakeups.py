"""Events of other processes, delivered to this process's listeners (scale-out mode).

Every event is published after its commit to the channel-layer group of its root run
(`events.publish`). In the embedded mode the worker runs in the serving process, so the
in-process listeners (REST `wait`, `results/await`, the SSE stream) hear every event. In
scale-out the workers are other processes, and their events reach this one only through the
channel layer (Redis).

So a process that waits holds one subscriber: a daemon thread with its own asyncio loop and
its own channel-layer instance (channels_redis lets one instance receive on one loop only,
and daphne's loop already receives on the shared one). It owns one channel, joins the group
of each tree that something in the process is waiting on (counted: the last waiter of a
tree leaves its group), and hands every event it receives to the in-process listeners
(`events.dispatch_local`). Listeners only wake waiters, which then read the database, so an
event heard twice (published here and heard back from the layer) or lost (a full channel)
costs nothing but a read or the waiter's periodic re-check.

With the in-memory layer (embedded) nothing here starts: `watching` does nothing."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import os
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import InMemoryChannelLayer, channel_layers, get_channel_layer

from runs_app import events

log = logging.getLogger(__name__)

START_TIMEOUT_SECS = 10.0
# How long a waiter waits for its groups to be joined before it reads the database. Past it,
# the waiter goes on and relies on its re-check (Redis is slow or down).
JOIN_TIMEOUT_SECS = 5.0
RETRY_SECS = 1.0  # after a failed receive (Redis restarting): wait, then join every group again
# The groups are joined again this often: a Redis restarted without persistence forgets them
# while redis-py reconnects without a word, and they expire after the layer's group_expiry.
# Until then a waiter still has its periodic re-check.
REFRESH_SECS = 30.0


def enabled() -> bool:
    """True when events of other processes reach this one only through the channel layer."""
    layer = get_channel_layer()
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


class Subscriber:
    """One channel of its own, in the groups of the trees this process waits on."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.pid = os.getpid()
        self.channel = ""
        self._counts: collections.Counter[str] = collections.Counter()  # root id -> waiters
        self._counts_lock = threading.Lock()
        self._joined: set[str] = set()  # groups the channel is in; touched on the loop only
        self._membership: asyncio.Lock | None = None
        self._main: asyncio.Task[None] | None = None
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name="clawboard-wakeups", daemon=True)
        self._thread.start()
        if not self._started.wait(START_TIMEOUT_SECS):
            raise RuntimeError("the wake-up subscriber did not start")

    # -- called from any thread -------------------------------------------------------------
    def alive(self) -> bool:
        return self._thread.is_alive() and not self._loop.is_closed()

    def add(self, roots: Iterable[str]) -> None:
        """Count one more waiter on each of these trees and return once the channel is in
        their groups (or JOIN_TIMEOUT_SECS passed: the waiter's re-check covers the rest)."""
        wanted = sorted(set(roots))
        with self._counts_lock:
            self._counts.update(wanted)
        # Always go through the loop, even for a tree already counted: the join of an earlier
        # waiter may still be under way, and the membership lock orders us after it.
        try:
            asyncio.run_coroutine_threadsafe(self._sync(wanted), self._loop).result(JOIN_TIMEOUT_SECS)
        except concurrent.futures.TimeoutError:
            log.warning("joining the event groups of %s took more than %ss", wanted, JOIN_TIMEOUT_SECS)
        except Exception:
            log.warning("joining the event groups of %s failed", wanted, exc_info=True)

    def discard(self, roots: Iterable[str]) -> None:
        """One waiter fewer on each of these trees; a tree nobody waits on is left."""
        gone = sorted(set(roots))
        with self._counts_lock:
            self._counts.subtract(gone)
            for root in gone:
                if self._counts[root] <= 0:
                    del self._counts[root]
        if self._loop.is_closed():
            return
        try:
            future = asyncio.run_coroutine_threadsafe(self._sync(gone), self._loop)
        except RuntimeError:
            return  # the loop is closing
        future.add_done_callback(_log_failure)

    def groups(self) -> set[str]:
        """The trees whose groups the channel is in now (for tests and diagnostics)."""
        return set(asyncio.run_coroutine_threadsafe(self._groups(), self._loop).result(JOIN_TIMEOUT_SECS))

    def close(self) -> None:
        """Leave every group and stop the thread."""
        if self._loop.is_closed():
            return
        with self._counts_lock:
            self._counts.clear()
        future = asyncio.run_coroutine_threadsafe(self._stop(), self._loop)
        try:
            future.result(JOIN_TIMEOUT_SECS)
        except Exception:
            log.warning("stopping the wake-up subscriber failed", exc_info=True)
        self._thread.join(JOIN_TIMEOUT_SECS)

    # -- on the subscriber's own loop -------------------------------------------------------
    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._serve())
        except asyncio.CancelledError:
            pass  # close()
        except Exception:
            log.exception("the wake-up subscriber stopped")
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._membership = asyncio.Lock()
        self.channel = await self.layer.new_channel(prefix="wakeups")
        self._main = asyncio.current_task()
        self._started.set()
        refresh = asyncio.create_task(self._refresh())
        failing = False
        try:
            while True:
                try:
                    message = await self.layer.receive(self.channel)
                except asyncio.CancelledError:
                    raise
                except Exception:
                    # Once per outage, not once a second while Redis is away.
                    (log.debug if failing else log.warning)("receiving events failed", exc_info=True)
                    failing = True
                    await asyncio.sleep(RETRY_SECS)
                    await self._rejoin()
                    continue
                failing = False
                payload = message.get("event") if message.get("type") == "run.event" else None
                if isinstance(payload, dict):
                    events.dispatch_local(payload)
        finally:
            refresh.cancel()
            try:
                await self.layer.close_pools()
            except Exception:
                log.debug("closing the wake-up subscriber's connections failed", exc_info=True)

    async def _sync(self, roots: list[str]) -> None:
        """Make the channel's membership of these groups match the waiter counts."""
        assert self._membership is not None
        async with self._membership:
            for root in roots:
                with self._counts_lock:
                    wanted = self._counts[root] > 0
                if wanted and root not in self._joined:
                    await self.layer.group_add(events.group_name(root), self.channel)
                    self._joined.add(root)
                elif not wanted and root in self._joined:
                    # Listed as joined until Redis has answered: `groups()` then says what
                    # Redis holds. Dropped even if the discard failed: the membership expires.
                    try:
                        await self.layer.group_discard(events.group_name(root), self.channel)
                    finally:
                        self._joined.discard(root)

    async def _rejoin(self) -> None:
        """Join every group again: after Redis lost them, or before they expire."""
        assert self._membership is not None
        async with self._membership:
            for root in list(self._joined):
                try:
                    await self.layer.group_add(events.group_name(root), self.channel)
                except Exception:
                    log.warning("joining the event group of %s again failed", root, exc_info=True)

    async def _refresh(self) -> None:
        period = max(0.1, min(REFRESH_SECS, float(getattr(self.layer, "group_expiry", 86400)) / 4))
        while True:
            await asyncio.sleep(period)
            await self._rejoin()

    async def _groups(self) -> set[str]:
        return set(self._joined)

    async def _stop(self) -> None:
        try:
            await self._sync(list(self._joined))
        finally:
            if self._main is not None:
                self._main.cancel()


def _log_failure(future: concurrent.futures.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        log.warning("leaving an event group failed", exc_info=future.exception())


_subscriber: Subscriber | None = None
_subscriber_lock = threading.Lock()


def subscriber() -> Subscriber | None:
    """This process's subscriber, started on first use; None with the in-memory layer."""
    global _subscriber
    if not enabled():
        return None
    with _subscriber_lock:
        current = _subscriber
        if current is None or current.pid != os.getpid() or not current.alive():
            # First use, a forked child (threads do not survive a fork), or a dead thread.
            current = _subscriber = Subscriber(channel_layers.make_backend(DEFAULT_CHANNEL_LAYER))
        return current


@contextmanager
def watching(root_ids: Iterable[Any]) -> Iterator[None]:
    """While inside, the events of these run trees published by any process reach this
    process's listeners. Add the listener first, then enter this, then read the database."""
    roots = {str(r) for r in root_ids if r}
    sub = None
    if roots:
        try:
            sub = subscriber()
        except Exception:  # the waiter's periodic re-check still works without it
            log.warning("the wake-up subscriber could not start", exc_info=True)
    if sub is None:
        yield
        return
    sub.add(roots)
    try:
        yield
    finally:
        sub.discard(roots)


def stop() -> None:
    """Stop this process's subscriber, if any (tests)."""
    global _subscriber
    with _subscriber_lock:
        current, _subscriber = _subscriber, None
    if current is not None and current.pid == os.getpid():
        current.close()
