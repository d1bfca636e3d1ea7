"""The one path of live events (runs_app/live.py): `tree_events` replays the table then passes
on live events, none lost and none doubled, filling a dropped message from the table;
`wait_terminal` returns as soon as the runs end, woken by their events.

The in-memory tests publish from other threads, as the worker and request threads do. The
Redis tests (127.0.0.1:6379/15, keys under a prefix of their own; CLAWBOARD_TEST_REDIS
overrides it) stand for scale-out: "another process" is a second channel-layer instance that
sends to the tree's group, as a worker's `events.publish` does. Without Redis they skip,
except under CI=true, where they fail. Nothing is polled: a waiter that is not woken by the
event fails when the test gives up after GIVE_UP_SECS, long before its own timeout."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncGenerator, Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from channels_redis.core import RedisChannelLayer
from django.db import transaction
from django.utils import timezone

from runs_app import events, live
from runs_app.models import Run, RunEvent

pytestmark = pytest.mark.django_db(transaction=True)

REDIS_URL = os.environ.get("CLAWBOARD_TEST_REDIS", "redis://127.0.0.1:6379/15")
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")
GIVE_UP_SECS = 15.0
LONG_SECS = 600.0


def queued_run() -> Run:
    """A queued top-level run with its run.queued event, never sent to a worker."""
    run_id = uuid.uuid4()
    with transaction.atomic():
        run = Run.objects.create(id=run_id, root_id=run_id, agent="sleeper", prompt="p", tools=[])
        events.emit(run, "run.queued")
    return run


def emit(run: Run, type_: str, data: dict[str, Any] | None = None) -> int:
    """One event written and published on commit, as the engine does."""
    with transaction.atomic():
        events.emit(run, type_, data)
    return int(RunEvent.objects.filter(run=run).latest("id").pk)


def silent_event(run: Run, type_: str) -> int:
    """An event whose row is stored but whose live message never came (a dropped message)."""
    return int(
        RunEvent.objects.create(
            run_id=run.pk, root_id=run.root_id or run.pk, type=type_, at=timezone.now(), data={}
        ).pk
    )


def finish(run: Run) -> None:
    """Complete the run with its terminal event, in one transaction, as a worker does."""
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED, output="done")
        events.emit(run, "run.completed", {"output": "done"})


def stored_ids(run: Run) -> list[int]:
    return list(
        RunEvent.objects.filter(root_id=run.root_id or run.pk).order_by("id").values_list("id", flat=True)
    )


in_thread = sync_to_async  # another thread, as a worker's: `thread_sensitive=False` below


async def next_event(stream: AsyncGenerator[dict[str, Any] | None, None]) -> dict[str, Any]:
    """The next event of the stream, skipping its "caught up" marks."""
    while True:
        event = await asyncio.wait_for(anext(stream), GIVE_UP_SECS)
        if event is not None:
            return event


async def caught_up(stream: AsyncGenerator[dict[str, Any] | None, None]) -> list[dict[str, Any]]:
    """The events the stream yields until it says it is caught up."""
    found = []
    while (event := await asyncio.wait_for(anext(stream), GIVE_UP_SECS)) is not None:
        found.append(event)
    return found


# -- tree_events (embedded mode: the in-memory layer) ------------------------------------------


async def test_tree_events_replays_the_table_then_sends_live_events_each_once() -> None:
    run = await sync_to_async(queued_run)()
    first = await sync_to_async(emit)(run, "run.started")
    stream = live.tree_events(run.pk, 0)
    try:
        replayed = await caught_up(stream)
        assert [e["id"] for e in replayed] == (await sync_to_async(stored_ids)(run))
        assert replayed[-1]["id"] == first
        later = [await in_thread(emit, thread_sensitive=False)(run, "model.request") for _ in range(3)]
        assert [(await next_event(stream))["id"] for _ in later] == later
        await in_thread(finish, thread_sensitive=False)(run)
        last = await next_event(stream)
        assert last["type"] == "run.completed" and set(last) == {
            "id",
            "run_id",
            "root_id",
            "type",
            "at",
            "data",
        }
        assert await caught_up(stream) == []
    finally:
        await stream.aclose()


async def test_tree_events_after_an_id_sends_only_the_later_events() -> None:
    run = await sync_to_async(queued_run)()
    ids = [await sync_to_async(emit)(run, "tool.call") for _ in range(3)]
    stream = live.tree_events(run.pk, ids[0])
    try:
        assert [e["id"] for e in await caught_up(stream)] == ids[1:]
    finally:
        await stream.aclose()


async def test_a_dropped_live_message_is_filled_from_the_table_before_the_next_one() -> None:
    run = await sync_to_async(queued_run)()
    stream = live.tree_events(run.pk, 0)
    try:
        await caught_up(stream)
        dropped = await sync_to_async(silent_event)(run, "model.request")
        published = await in_thread(emit, thread_sensitive=False)(run, "model.response")
        assert [(await next_event(stream))["id"] for _ in range(2)] == [dropped, published]
        assert await caught_up(stream) == []
    finally:
        await stream.aclose()


async def test_tree_events_of_one_run_leaves_out_the_rest_of_its_tree() -> None:
    root = await sync_to_async(queued_run)()

    def child_of(parent: Run) -> Run:
        with transaction.atomic():
            child = Run.objects.create(agent="sleeper", prompt="c", parent=parent, root_id=parent.pk)
            events.emit(child, "run.queued")
        return child

    child = await sync_to_async(child_of)(root)
    stream = live.tree_events(root.pk, 0, run_id=child.pk)
    try:
        assert {e["run_id"] for e in await caught_up(stream)} == {str(child.pk)}
        await in_thread(emit, thread_sensitive=False)(root, "model.request")
        mine = await in_thread(emit, thread_sensitive=False)(child, "model.request")
        assert (await next_event(stream))["id"] == mine
    finally:
        await stream.aclose()


async def test_tree_events_says_when_it_is_idle_and_ends_at_until() -> None:
    run = await sync_to_async(queued_run)()
    stream = live.tree_events(run.pk, 0, idle=0.05, until=time.monotonic() + 0.5)
    marks = [event async for event in stream if event is None]
    assert len(marks) >= 3  # caught up, then idle marks until the end


# -- wait_terminal -------------------------------------------------------------------------------


async def test_wait_terminal_returns_when_the_run_ends_in_another_thread() -> None:
    run = await sync_to_async(queued_run)()
    waiter = asyncio.create_task(live.wait_terminal([run.pk], LONG_SECS))
    await asyncio.sleep(0.2)
    assert not waiter.done()
    await in_thread(finish, thread_sensitive=False)(run)
    assert await asyncio.wait_for(waiter, GIVE_UP_SECS) is True


async def test_wait_terminal_waits_for_every_run() -> None:
    one, two = await sync_to_async(queued_run)(), await sync_to_async(queued_run)()
    waiter = asyncio.create_task(live.wait_terminal([one.pk, two.pk], LONG_SECS))
    await in_thread(finish, thread_sensitive=False)(one)
    await asyncio.sleep(0.2)
    assert not waiter.done()
    await in_thread(finish, thread_sensitive=False)(two)
    assert await asyncio.wait_for(waiter, GIVE_UP_SECS) is True


async def test_wait_terminal_trusts_terminal_events_instead_of_reading_every_run_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    runs = [await sync_to_async(queued_run)() for _ in range(30)]
    reads: list[int] = []
    unfinished = live._unfinished

    def counted(run_ids: list[str]) -> list[tuple[str, str]]:
        reads.append(len(run_ids))
        return unfinished(run_ids)

    monkeypatch.setattr(live, "_unfinished", counted)
    waiter = asyncio.create_task(live.wait_terminal([run.pk for run in runs], LONG_SECS))
    await asyncio.sleep(0.2)

    def finish_all() -> None:
        for run in runs:
            finish(run)

    await in_thread(finish_all, thread_sensitive=False)()
    assert await asyncio.wait_for(waiter, GIVE_UP_SECS) is True
    # Before and after subscribing; a read after a quiet spell at most: never one per run.
    assert reads[:2] == [30, 30] and len(reads) <= 3, reads


async def test_wait_terminal_gives_up_after_its_timeout_and_knows_finished_runs_at_once() -> None:
    run = await sync_to_async(queued_run)()
    assert await live.wait_terminal([run.pk], 0.2) is False
    assert await live.wait_terminal([run.pk], 0) is False
    await sync_to_async(finish)(run)
    assert await asyncio.wait_for(live.wait_terminal([run.pk, uuid.uuid4()], LONG_SECS), 1) is True
    assert await live.wait_terminal([], LONG_SECS) is True


def test_a_subscriber_that_fails_does_not_stop_the_others() -> None:
    run = queued_run()
    heard: list[dict[str, Any]] = []

    def broken(event: dict[str, Any]) -> None:
        raise RuntimeError("a subscriber that fails")

    events.subscribe(run.pk, broken)
    events.subscribe(run.pk, heard.append)
    try:
        finish(run)
    finally:
        events.unsubscribe(run.pk, broken)
        events.unsubscribe(run.pk, heard.append)
    assert [e["type"] for e in heard] == ["run.completed"]
    assert Run.objects.get(pk=run.pk).status == "completed"


# -- Redis (scale-out mode) ---------------------------------------------------------------------


@pytest.fixture
def redis_layer(settings: Any) -> Iterator[dict[str, Any]]:
    """The channel layer of this test is Redis, under a key prefix of its own."""
    client = redis.Redis.from_url(REDIS_URL, socket_timeout=3, socket_connect_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        if IN_CI:
            pytest.fail(f"CI=true and Redis is not reachable at {REDIS_URL}: {exc}", pytrace=False)
        pytest.skip(f"needs Redis at {REDIS_URL}: {exc}")
    prefix = f"clawboard-test-{uuid.uuid4().hex[:12]}"
    config: dict[str, Any] = {"hosts": [{"address": REDIS_URL, "socket_timeout": 15}], "prefix": prefix}
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": config}
    }
    try:
        yield config
    finally:
        for key in client.scan_iter(f"{prefix}*"):
            client.delete(key)
        client.close()


async def send_from_another_process(config: dict[str, Any], event_id: int) -> None:
    """What a worker's `events.publish` sends for a stored event, through a layer of its own."""
    event = await sync_to_async(lambda: events.event_json(RunEvent.objects.get(pk=event_id)))()
    layer = RedisChannelLayer(**config)
    try:
        await layer.group_send(events.group_name(event["root_id"]), {"type": "run.event", "event": event})
    finally:
        await layer.close_pools()


def finish_silently(run: Run) -> int:
    """Complete the run and store its terminal event; nothing is published in this process."""
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED, output="done")
    return silent_event(run, "run.completed")


async def test_with_redis_tree_events_passes_on_the_events_of_another_process(
    redis_layer: dict[str, Any],
) -> None:
    run = await sync_to_async(queued_run)()
    stream = live.tree_events(run.pk, 0)
    try:
        assert [e["type"] for e in await caught_up(stream)] == ["run.queued"]
        dropped = await sync_to_async(silent_event)(run, "model.request")
        sent = await sync_to_async(silent_event)(run, "model.response")
        await send_from_another_process(redis_layer, sent)  # the message of `dropped` never comes
        assert [(await next_event(stream))["id"] for _ in range(2)] == [dropped, sent]
        await send_from_another_process(redis_layer, sent)  # heard twice: sent once
        assert await caught_up(stream) == []
        done = await sync_to_async(finish_silently)(run)
        await send_from_another_process(redis_layer, done)
        assert (await next_event(stream))["id"] == done
    finally:
        await stream.aclose()


async def test_with_redis_a_waiter_is_woken_by_an_event_of_another_process(
    redis_layer: dict[str, Any],
) -> None:
    run = await sync_to_async(queued_run)()
    waiter = asyncio.create_task(live.wait_terminal([run.pk], LONG_SECS))
    await asyncio.sleep(0.3)  # subscribed by now
    assert not waiter.done()
    done = await sync_to_async(finish_silently)(run)
    await send_from_another_process(redis_layer, done)
    assert await asyncio.wait_for(waiter, GIVE_UP_SECS) is True


async def test_with_redis_a_waiter_is_woken_while_another_channel_of_the_process_receives(
    redis_layer: dict[str, Any],
) -> None:
    """A websocket consumer receives on a channel of its own, on the same layer instance: the
    waiter's channel must not starve behind it."""
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    assert layer is not None
    consumer_channel = await layer.new_channel()
    consumer = asyncio.create_task(layer.receive(consumer_channel))  # takes the receive lock first
    try:
        await asyncio.sleep(0.2)
        run = await sync_to_async(queued_run)()
        waiter = asyncio.create_task(live.wait_terminal([run.pk], LONG_SECS))
        await asyncio.sleep(0.3)
        done = await sync_to_async(finish_silently)(run)
        await send_from_another_process(redis_layer, done)
        assert await asyncio.wait_for(waiter, GIVE_UP_SECS) is True
    finally:
        await layer.send(consumer_channel, {"type": "test.done"})  # ends it; no cancel half-way
        await asyncio.wait_for(consumer, GIVE_UP_SECS)


# -- the last message of a burst -----------------------------------------------------------------


async def test_a_dropped_last_message_is_read_from_the_table_once_the_stream_is_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No later message shows the gap, so the stream looks at the table once it fell quiet."""
    monkeypatch.setattr(live, "QUIET_SECS", 0.3)
    run = await sync_to_async(queued_run)()
    stream = live.tree_events(run.pk, 0)
    try:
        await caught_up(stream)
        heard = await in_thread(emit, thread_sensitive=False)(run, "model.request")
        assert (await next_event(stream))["id"] == heard
        dropped = await sync_to_async(finish_silently)(run)
        assert (await next_event(stream))["id"] == dropped
        assert await caught_up(stream) == []
    finally:
        await stream.aclose()


async def test_a_waiter_whose_terminal_message_was_dropped_sees_the_end_once_quiet(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(live, "QUIET_SECS", 0.3)
    run = await sync_to_async(queued_run)()
    waiter = asyncio.create_task(live.wait_terminal([run.pk], LONG_SECS))
    await asyncio.sleep(0.2)
    await in_thread(emit, thread_sensitive=False)(run, "model.request")  # the tree is busy
    await sync_to_async(finish_silently)(run)  # and its terminal message is lost
    assert await asyncio.wait_for(waiter, GIVE_UP_SECS) is True


def scale_out_channel_config() -> dict[str, Any]:
    """The channel layer's CONFIG that the project's settings give a scale-out process."""
    env = {**os.environ, "CHANNEL_LAYER_URL": REDIS_URL, "DJANGO_SETTINGS_MODULE": "zeroclaw_site.settings"}
    env.pop("CLAWBOARD_CHANNEL_CAPACITY", None)
    code = "import json, django; django.setup(); from django.conf import settings; "
    code += "print(json.dumps(settings.CHANNEL_LAYERS['default']['CONFIG']))"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


async def test_with_redis_a_burst_of_one_tree_is_kept_whole_for_a_process_that_reads_late(
    redis_layer: dict[str, Any],
) -> None:
    """channels_redis drops messages past a process's `capacity` silently (its default, 100,
    is one busy tree): the project's settings keep a burst of 2,000 for a reader that is late."""
    config = {**scale_out_channel_config(), "prefix": redis_layer["prefix"]}
    reader, writer = RedisChannelLayer(**config), RedisChannelLayer(**config)
    try:
        channel = await reader.new_channel()
        await reader.group_add("burst", channel)
        for i in range(2000):
            await writer.group_send("burst", {"type": "run.event", "n": i})
        got = [(await asyncio.wait_for(reader.receive(channel), GIVE_UP_SECS))["n"] for _ in range(2000)]
        assert got == list(range(2000))
    finally:
        await reader.close_pools()
        await writer.close_pools()
