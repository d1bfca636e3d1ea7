"""Live events of run trees (SPEC §9): the one path behind the websocket, the SSE stream and
every REST wait.

`tree_events(root, after)` is "the events of this tree after id N": it subscribes first, then
replays the stored events after N from the table, then passes on live ones. Ids only grow, so
an event that arrives both ways is sent once (ids up to the last one sent are dropped), and
when a live event skips ids, the stored events in between are read first: ids are global, so
the gap may hold only other trees' events, but a message the channel layer dropped is found
there, and the last of a burst is looked for once the stream falls quiet (a resync mark of
the subscription). None lost, none doubled.

`wait_terminal(run_ids, timeout)` subscribes to the same live events of the runs' trees and
reads the runs' statuses after subscribing; a run's terminal event ends its wait, and a resync
mark (once after a burst) reads the statuses again: no periodic re-read.

Where live events come from: a subscriber registers with this process's subscribers of its
trees (`events.subscribe`), which `events.deliver` calls with each event. A subscriber lives
on an event loop (daphne's, or one `async_to_sync` made), so its callback only schedules the
put on its own loop's queue.
- Embedded mode (in-memory channel layer): every writer is in this process, and
  `events.publish` delivers each event itself, in the writer's thread, after its commit.
- Scale-out (channels_redis, `CHANNEL_LAYER_URL`): the writers are other processes, and
  `events.publish` sends to the tree's channel-layer group. Each event loop of a process has
  one `Relay`: a channel in the groups of the trees followed there, and a task that delivers
  what it receives."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterable
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from channels.layers import InMemoryChannelLayer, get_channel_layer
from django.db import connection

from runs_app import events
from runs_app.models import TERMINAL_STATUSES, Run, RunEvent

log = logging.getLogger(__name__)

TERMINAL_EVENT_TYPES: frozenset[str] = frozenset(f"run.{status}" for status in TERMINAL_STATUSES)
BATCH = 500
STOP_TYPE = "live.stop"
STOP_SECS = 10.0
RETRY_SECS = 1.0  # after a failed receive (Redis restarting): wait, join the groups again
# A message the channel layer dropped is found in the table when a later one shows the gap; the
# last of a burst has none, so a subscription quiet this long after live events gives a resync
# mark (`Subscription.get`): one table read per burst, none while a tree sleeps.
QUIET_SECS = 2.0

# The type of the mark a subscription gets when live events of its tree may have been lost
# (receiving from the channel layer failed): whoever reads it looks at the table instead.
RESYNC_TYPE = "live.resync"

T = TypeVar("T")


def release_connection() -> None:
    """Give this thread's database connection back to the pool, when there is one (PostgreSQL,
    see settings): a request that waits minutes must not hold one of the process's few
    connections. The next read borrows one again."""
    if connection.settings_dict.get("OPTIONS", {}).get("pool") and not connection.in_atomic_block:
        connection.close()


async def read(fn: Callable[[], T]) -> T:
    """`fn()` (a database read) on the thread Django gives this request or consumer."""

    def call() -> T:
        try:
            return fn()
        finally:
            release_connection()

    return await sync_to_async(call, thread_sensitive=True)()


class Subscription:
    """The live events of some trees, published after it started, in the order they arrived;
    a resync mark (`is_resync`) in between when some may have been lost: when receiving from
    the channel layer failed, and once QUIET_SECS after live events when nothing followed them
    (the layer may have dropped the last of a burst, and no later one shows the gap)."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.quiet_at: float | None = None

    async def get(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next live event (or resync mark), or None when `timeout` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + max(0.0, timeout)
        wake = min((t for t in (deadline, self.quiet_at) if t is not None), default=None)
        try:
            if wake is None:
                item = await self.queue.get()
            else:
                item = await asyncio.wait_for(self.queue.get(), max(0.0, wake - time.monotonic()))
        except TimeoutError:
            if self.quiet_at is not None and self.quiet_at <= time.monotonic():
                self.quiet_at = None
                return {"type": RESYNC_TYPE, "id": 0}
            return None
        self.quiet_at = None if is_resync(item) else time.monotonic() + QUIET_SECS
        return item


def is_resync(item: dict[str, Any]) -> bool:
    return item.get("type") == RESYNC_TYPE


def _put_threadsafe(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any], payload: Any) -> None:
    """Called by `events.deliver` in the writer's thread: an asyncio queue may only be fed on
    its own loop."""
    with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening any more
        loop.call_soon_threadsafe(queue.put_nowait, payload)


@contextlib.asynccontextmanager
async def subscribe(root_ids: Iterable[Any]) -> AsyncIterator[Subscription]:
    """While inside, the live events of these trees reach the subscription. It is in place
    when this returns, so a read of the table after it misses nothing."""
    roots = sorted({str(r) for r in root_ids if r})
    sub = Subscription()
    deliver = functools.partial(_put_threadsafe, asyncio.get_running_loop(), sub.queue)
    for root in roots:
        events.subscribe(root, deliver)
    relay = await _relay()
    try:
        if relay is not None:
            await relay.add(roots)
        yield sub
    finally:
        for root in roots:
            events.unsubscribe(root, deliver)
        if relay is not None:
            await relay.discard(roots)


class Relay:
    """Scale-out: one channel of this event loop, in the channel-layer groups of the trees
    this process's subscribers follow (counted per tree), and a task that hands what it
    receives to them (`events.deliver`). One receiver per loop, not one per subscriber: it is
    only stopped when nobody follows any tree, because channels_redis receives for every
    channel of a process through one of them, and a receive cancelled half-way can lose a
    message meant for another channel (seen as waits that were never woken)."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.channel = ""
        self.counts: collections.Counter[str] = collections.Counter()
        self.joined: set[str] = set()
        self.membership = asyncio.Lock()
        self.receiver: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.channel = await self.layer.new_channel()
        self.receiver = asyncio.create_task(self._receive())

    def alive(self) -> bool:
        return self.receiver is not None and not self.receiver.done()

    async def add(self, roots: list[str]) -> None:
        """Count one more subscriber on each tree; return once the channel is in their groups."""
        self.counts.update(roots)
        await self._sync(roots)

    async def discard(self, roots: list[str]) -> None:
        """One subscriber fewer on each tree; the group of a tree nobody follows is left.
        With no subscriber left the relay stops (the next subscriber starts another), so a
        short-lived loop (`async_to_sync` in a command) ends with nothing receiving."""
        self.counts.subtract(roots)
        for root in roots:
            if self.counts[root] <= 0:
                del self.counts[root]
        stopping = not self.counts
        if stopping:
            loop = asyncio.get_running_loop()
            if _relays.get(loop) is self:
                del _relays[loop]
        await self._sync(roots)
        if stopping and self.receiver is not None:
            await self._stop(self.receiver)

    async def _stop(self, receiver: asyncio.Task[None]) -> None:
        """End the receiver with a message of its own rather than a cancel, which can leave
        channels_redis receiving forever."""
        try:
            await self.layer.send(self.channel, {"type": STOP_TYPE})
            await asyncio.wait_for(asyncio.shield(receiver), STOP_SECS)
        except Exception:
            log.warning("stopping the live relay took too long", exc_info=True)
            receiver.cancel()

    async def _sync(self, roots: list[str]) -> None:
        async with self.membership:
            for root in roots:
                wanted = self.counts[root] > 0
                if wanted and root not in self.joined:
                    await self.layer.group_add(events.group_name(root), self.channel)
                    self.joined.add(root)
                elif not wanted and root in self.joined:
                    self.joined.discard(root)
                    try:
                        await self.layer.group_discard(events.group_name(root), self.channel)
                    except Exception:  # the membership expires on its own (group_expiry)
                        log.warning("leaving the group of %s failed", root, exc_info=True)

    async def _receive(self) -> None:
        failing = False
        while True:
            try:
                message = await self.layer.receive(self.channel)
            except asyncio.CancelledError:
                raise
            except Exception:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    # The loop is closing: redis-py turned the cancellation into an error.
                    raise asyncio.CancelledError from None
                # Once per outage, not once a second while Redis is away.
                (log.debug if failing else log.warning)("receiving live events failed", exc_info=True)
                failing = True
                await asyncio.sleep(RETRY_SECS)
                await self._rejoin()
                continue
            failing = False
            if message.get("type") == STOP_TYPE:
                return
            payload = message.get("event") if message.get("type") == "run.event" else None
            if isinstance(payload, dict):
                events.deliver(payload)

    async def _rejoin(self) -> None:
        """After a failure: join the groups again (a Redis restarted without persistence
        forgot them), and tell the subscribers that events may have been lost."""
        async with self.membership:
            for root in list(self.joined):
                try:
                    await self.layer.group_add(events.group_name(root), self.channel)
                except Exception:
                    log.debug("joining the group of %s again failed", root, exc_info=True)
                events.deliver({"type": RESYNC_TYPE, "root_id": root, "id": 0})


_relays: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Relay] = weakref.WeakKeyDictionary()


async def _relay() -> Relay | None:
    """This loop's relay, started on first use; None with the in-memory layer, where
    `events.publish` delivers in this process itself."""
    layer = get_channel_layer()
    if layer is None or isinstance(layer, InMemoryChannelLayer):
        return None
    loop = asyncio.get_running_loop()
    relay = _relays.get(loop)
    if relay is None or relay.layer is not layer or not relay.alive():
        relay = _relays[loop] = Relay(layer)
        await relay.start()
    return relay


def _stored_batch(root_id: str, after: int, before: int | None, run_id: str | None) -> list[dict[str, Any]]:
    qs = RunEvent.objects.filter(root_id=root_id, id__gt=after).order_by("id")
    if before is not None:
        qs = qs.filter(id__lt=before)
    if run_id is not None:
        qs = qs.filter(run_id=run_id)
    return [events.event_json(e) for e in qs[:BATCH]]


async def stored_events(
    root_id: Any, after: int, *, before: int | None = None, run_id: Any = None
) -> AsyncGenerator[dict[str, Any], None]:
    """The stored events of the tree (of one run of it, with `run_id`) with after < id < before,
    in order, read in batches."""
    root, run = str(root_id), (str(run_id) if run_id is not None else None)
    while True:
        batch = await read(functools.partial(_stored_batch, root, after, before, run))
        for event in batch:
            yield event
        if len(batch) < BATCH:
            return
        after = int(batch[-1]["id"])


async def tree_events(
    root_id: Any,
    after: int = 0,
    *,
    run_id: Any = None,
    idle: float | None = None,
    until: float | None = None,
) -> AsyncGenerator[dict[str, Any] | None, None]:
    """Every event of the tree after id `after`, in id order, each once: the stored ones, then
    live ones as they are published. With `run_id`, only that run's events.

    Yields None whenever it has sent everything it knows of and is about to wait (a caller can
    check the runs' state then), and after every `idle` seconds without an event (for
    keep-alives). Ends at `until` (a `time.monotonic()` value), or never."""
    root = str(root_id)
    only = str(run_id) if run_id is not None else None
    last = after
    async with subscribe([root]) as live:
        async for event in stored_events(root, last, run_id=only):
            yield event
            last = int(event["id"])
        while True:
            yield None
            timeout = idle
            if until is not None:
                remaining = until - time.monotonic()
                if remaining <= 0:
                    return
                timeout = remaining if timeout is None else min(timeout, remaining)
            item = await live.get(timeout)
            if item is None:
                continue
            if is_resync(item):
                before = None
            elif (only is not None and item.get("run_id") != only) or int(item["id"]) <= last:
                continue
            else:
                before = int(item["id"])
            if before is None or before > last + 1:
                async for event in stored_events(root, last, before=before, run_id=only):
                    yield event
                    last = int(event["id"])
            if not is_resync(item) and int(item["id"]) > last:
                yield item
                last = int(item["id"])


def _unfinished(run_ids: list[str]) -> list[tuple[str, str]]:
    """(run id, root id) of the runs that are not terminal. An id that names no run is not
    waited on."""
    rows = Run.objects.filter(pk__in=run_ids).exclude(status__in=TERMINAL_STATUSES)
    return [(str(pk), str(root_id or pk)) for pk, root_id in rows.values_list("pk", "root_id")]


async def wait_terminal(run_ids: Iterable[Any], timeout: float) -> bool:
    """Wait until every run is terminal (True) or `timeout` seconds have passed (False)."""
    ids = sorted({str(i) for i in run_ids})
    if not ids:
        return True
    going = await read(functools.partial(_unfinished, ids))
    if not going or timeout <= 0:
        return not going
    deadline = time.monotonic() + timeout
    waiting = {run for run, _ in going}
    async with subscribe(root for _, root in going) as live:
        # Read again now that the subscription is in place: a run that ended in between is seen.
        waiting = {run for run, _ in await read(functools.partial(_unfinished, sorted(waiting)))}
        while waiting:
            item = await live.get(deadline - time.monotonic())
            if item is None:  # the time is up: one last look
                return not await read(functools.partial(_unfinished, sorted(waiting)))
            if is_resync(item):
                waiting = {run for run, _ in await read(functools.partial(_unfinished, sorted(waiting)))}
            elif item.get("type") in TERMINAL_EVENT_TYPES:
                # Published after the commit that made the run terminal, and a terminal status
                # never changes: the others need no new read (one per ending would make a wait
                # on many runs quadratic in their number).
                waiting.discard(item.get("run_id"))
    return True
