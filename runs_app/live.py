"""Live events of run trees (SPEC §9): the one path behind the websocket, the SSE stream and
every REST wait.

`tree_events(root, after)` is "the events of this tree after id N": it subscribes first, then
replays the stored events after N from the table, then passes on live ones. Ids only grow, so
an event that arrives both ways is sent once (ids up to the last one sent are dropped), and
when a live event skips ids, the stored events in between are read first: ids are global, so
the gap may hold only other trees' events, but a message the channel layer dropped is found
there. None lost, none doubled.

`wait_terminal(run_ids, timeout)` subscribes to the same live events of the runs' trees and
reads the runs' statuses after subscribing, then again only when a terminal event of one of
them arrives: no periodic re-read.

Where live events come from:
- the embedded mode (in-memory channel layer): every writer is in this process, and
  `events.publish` hands each event to the subscribers of its tree (`events.subscribe`) in the
  writer's thread. A subscriber here lives on an event loop (daphne's, or the one
  `async_to_sync` made), so its callback only schedules the put on its own loop's queue.
- scale-out (channels_redis, `CHANNEL_LAYER_URL`): the writers are other processes and
  `events.publish` sends to the tree's channel-layer group; a subscriber gets a channel of its
  own in those groups and a task that receives on it."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
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
RETRY_SECS = 1.0  # after a failed receive (Redis restarting): wait, join the groups again

# Put in a subscription's queue when live events may have been lost (the channel layer failed):
# whoever reads it looks at the table instead.
RESYNC: dict[str, Any] = {"type": "live.resync"}

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


def _uses_channel_layer() -> bool:
    layer = get_channel_layer()
    return layer is not None and not isinstance(layer, InMemoryChannelLayer)


class Subscription:
    """The live events of some trees, published after it started, in the order they arrived;
    `RESYNC` in between when some may have been lost."""

    def __init__(self) -> None:
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def get(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next live event (or `RESYNC`), or None when `timeout` seconds passed first."""
        if timeout is None:
            return await self.queue.get()
        try:
            return await asyncio.wait_for(self.queue.get(), max(0.0, timeout))
        except TimeoutError:
            return None


def _put_threadsafe(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[Any], payload: Any) -> None:
    """Called by `events.publish` in the writer's thread: an asyncio queue may only be fed on
    its own loop."""
    with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening any more
        loop.call_soon_threadsafe(queue.put_nowait, payload)


@contextlib.asynccontextmanager
async def subscribe(root_ids: Iterable[Any]) -> AsyncIterator[Subscription]:
    """While inside, the live events of these trees reach the subscription. It is in place
    when this returns, so a read of the table after it misses nothing."""
    roots = sorted({str(r) for r in root_ids if r})
    sub = Subscription()
    if not _uses_channel_layer():
        deliver = functools.partial(_put_threadsafe, asyncio.get_running_loop(), sub.queue)
        for root in roots:
            events.subscribe(root, deliver)
        try:
            yield sub
        finally:
            for root in roots:
                events.unsubscribe(root, deliver)
        return
    layer = get_channel_layer()
    assert layer is not None
    # The default prefix, as the consumers' channels have: channels_redis receives for every
    # channel of a process through the one that holds its receive lock, and that one only pops
    # the Redis list of its own prefix, so a channel of another prefix would starve.
    channel = await layer.new_channel()
    groups = [events.group_name(root) for root in roots]
    for group in groups:
        await layer.group_add(group, channel)
    receiver = asyncio.create_task(_receive(layer, channel, groups, sub.queue))
    try:
        yield sub
    finally:
        receiver.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await receiver
        for group in groups:
            try:
                await layer.group_discard(group, channel)
            except Exception:  # the membership expires on its own (the layer's group_expiry)
                log.warning("leaving %s failed", group, exc_info=True)


async def _receive(layer: Any, channel: str, groups: list[str], queue: asyncio.Queue[dict[str, Any]]) -> None:
    """Receive the channel's messages into the queue, until cancelled. Its own task, so that
    a reader that stops waiting never cancels a receive half-way (a message would be lost)."""
    failing = False
    while True:
        try:
            message = await layer.receive(channel)
        except asyncio.CancelledError:
            raise
        except Exception:
            # Once per outage, not once a second while Redis is away.
            (log.debug if failing else log.warning)("receiving live events failed", exc_info=True)
            failing = True
            await asyncio.sleep(RETRY_SECS)
            # A Redis restarted without persistence forgot the groups; messages may be lost.
            with contextlib.suppress(Exception):
                for group in groups:
                    await layer.group_add(group, channel)
            queue.put_nowait(RESYNC)
            continue
        failing = False
        payload = message.get("event") if message.get("type") == "run.event" else None
        if isinstance(payload, dict):
            queue.put_nowait(payload)


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
            if item is RESYNC:
                before = None
            elif (only is not None and item.get("run_id") != only) or int(item["id"]) <= last:
                continue
            else:
                before = int(item["id"])
            if before is None or before > last + 1:
                async for event in stored_events(root, last, before=before, run_id=only):
                    yield event
                    last = int(event["id"])
            if item is not RESYNC and int(item["id"]) > last:
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
            if item is RESYNC or (item.get("type") in TERMINAL_EVENT_TYPES and item.get("run_id") in waiting):
                waiting = {run for run, _ in await read(functools.partial(_unfinished, sorted(waiting)))}
    return True
