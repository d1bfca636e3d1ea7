"""Waking waiters with the events of other processes (runs_app.wakeups), and the threads of
the views that wait.

The channel-layer tests use a real Redis (127.0.0.1:6379/15, keys under a prefix of their
own; CLAWBOARD_TEST_REDIS overrides it). Without Redis they skip, except under CI=true, where
they fail. "Another process" is a second channel-layer instance that sends to the tree's group,
as a worker's `events.publish` does; nothing is published in this process, so only the
subscriber can wake the waiter. The waiter's periodic re-read is made 10 minutes long, and
the test gives up after 15 s: a waiter that ends in time was woken by the event."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
from channels_redis.core import RedisChannelLayer
from django.db import connections
from django.http import HttpRequest, HttpResponse
from django.test import AsyncRequestFactory
from django.utils import timezone

from runs_app import events, waiting, wakeups
from runs_app.api import views
from runs_app.models import Run, RunEvent

REDIS_URL = os.environ.get("CLAWBOARD_TEST_REDIS", "redis://127.0.0.1:6379/15")
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")
GIVE_UP_SECS = 15.0
LONG_RECHECK_SECS = 600.0


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
        wakeups.stop()
        for key in client.scan_iter(f"{prefix}*"):
            client.delete(key)
        client.close()


def send_from_another_process(config: dict[str, Any], payload: dict[str, Any]) -> None:
    """What a worker's `events.publish` sends, through a channel layer of its own."""

    async def send() -> None:
        layer = RedisChannelLayer(**config)
        try:
            await layer.group_send(
                events.group_name(payload["root_id"]), {"type": "run.event", "event": payload}
            )
        finally:
            await layer.close_pools()

    asyncio.run(send())


def until(check: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + GIVE_UP_SECS
    while not (value := check()):
        assert time.monotonic() < deadline, f"{what} not reached after {GIVE_UP_SECS}s"
        time.sleep(0.02)
    return value


def watched_trees() -> set[str]:
    sub = wakeups._subscriber
    return sub.groups() if sub is not None else set()


def in_thread(target: Callable[[], Any]) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(target())
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            out.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def queued_run(**fields: Any) -> Run:
    """A queued top-level run with its first event, never sent to the broker: no worker of
    this process (other tests start one) runs it or publishes anything about it."""
    run = Run.objects.create(agent="sleeper", **fields)
    Run.objects.filter(pk=run.pk).update(root_id=run.pk)
    run.refresh_from_db()
    RunEvent.objects.create(run_id=run.pk, root_id=run.pk, type="run.queued", at=timezone.now(), data={})
    return run


def finish(run: Run) -> dict[str, Any]:
    """Mark the run completed with its terminal event, as a worker would (no publishing)."""
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED, output="done")
    event = RunEvent.objects.create(
        run_id=run.pk, root_id=run.root_id or run.pk, type="run.completed", at=timezone.now(), data={}
    )
    return events.event_json(event)


# -- the in-memory layer (embedded mode) ---------------------------------------------------------


def test_with_the_in_memory_layer_watching_starts_no_subscriber() -> None:
    wakeups.stop()
    assert not wakeups.enabled()
    with wakeups.watching([str(uuid.uuid4())]):
        assert wakeups._subscriber is None


def test_dispatch_local_calls_every_listener_even_after_one_fails() -> None:
    heard: list[dict[str, Any]] = []

    def broken(event: dict[str, Any]) -> None:
        raise RuntimeError("a listener that fails")

    events.add_listener(broken)
    events.add_listener(heard.append)
    try:
        payload = {"id": 1, "run_id": "r", "root_id": "r", "type": "run.completed", "at": "", "data": {}}
        events.dispatch_local(payload)
    finally:
        events.remove_listener(broken)
        events.remove_listener(heard.append)
    assert heard == [payload]


# -- Redis (scale-out mode) ---------------------------------------------------------------------


def test_the_groups_of_a_tree_are_joined_while_someone_waits_on_it(redis_layer: dict[str, Any]) -> None:
    one, two = str(uuid.uuid4()), str(uuid.uuid4())
    client = redis.Redis.from_url(REDIS_URL)
    layer = RedisChannelLayer(**redis_layer)

    def members(root: str) -> int:
        return int(client.zcard(layer._group_key(events.group_name(root))))

    with wakeups.watching([one]):
        with wakeups.watching([one, two]):
            assert watched_trees() == {one, two}
            assert members(one) and members(two)
        until(lambda: watched_trees() == {one}, "leaving the tree nobody waits on")
        assert members(one) and not members(two)
    until(lambda: watched_trees() == set(), "leaving every tree")
    assert not members(one)
    client.close()


def test_groups_that_redis_forgot_are_joined_again(
    redis_layer: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Redis restarted without persistence forgets the groups; the subscriber joins them again."""
    monkeypatch.setattr(wakeups, "REFRESH_SECS", 0.1)
    root = str(uuid.uuid4())
    client = redis.Redis.from_url(REDIS_URL)
    key = RedisChannelLayer(**redis_layer)._group_key(events.group_name(root))
    heard = threading.Event()

    def listener(event: dict[str, Any]) -> None:
        if event["root_id"] == root:
            heard.set()

    events.add_listener(listener)
    try:
        with wakeups.watching([root]):
            assert client.zcard(key) == 1
            client.delete(key)
            until(lambda: client.zcard(key) == 1, "the group joined again")
            payload = {
                "id": 1,
                "run_id": root,
                "root_id": root,
                "type": "run.completed",
                "at": "",
                "data": {},
            }
            send_from_another_process(redis_layer, payload)
            assert heard.wait(GIVE_UP_SECS), "the event of the other process never reached the listener"
    finally:
        events.remove_listener(listener)
        client.close()


@pytest.mark.django_db(transaction=True)
def test_a_waiter_is_woken_by_an_event_of_another_process(
    redis_layer: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = queued_run()
    monkeypatch.setattr(waiting, "RECHECK_SECS", LONG_RECHECK_SECS)
    thread, out = in_thread(lambda: waiting.wait_for_terminal([run.pk], LONG_RECHECK_SECS))
    until(lambda: str(run.pk) in watched_trees(), "the waiter watching the run's tree")
    send_from_another_process(redis_layer, finish(run))
    thread.join(GIVE_UP_SECS)
    assert not thread.is_alive(), "the waiter was not woken by the event from the channel layer"
    assert out == [True]


@pytest.mark.django_db(transaction=True)
def test_watching_runs_brings_the_events_of_their_trees_to_the_listeners(redis_layer: dict[str, Any]) -> None:
    """What `results/await` relies on: await_sessions listens for the tasks' terminal events,
    and the view watches the tasks' trees (ids that name no run are left out)."""
    run = queued_run(kind=Run.Kind.DELEGATE, execution=Run.Execution.BACKGROUND)
    heard: list[dict[str, Any]] = []
    arrived = threading.Event()

    def listener(event: dict[str, Any]) -> None:
        if event["root_id"] == str(run.pk):  # not the events of other tests' runs
            heard.append(event)
            arrived.set()

    events.add_listener(listener)
    try:
        with waiting.watching_runs([run.pk, "not a uuid", uuid.uuid4()]):
            assert watched_trees() == {str(run.pk)}
            payload = finish(run)
            send_from_another_process(redis_layer, payload)
            assert arrived.wait(GIVE_UP_SECS), "the event of the other process never reached the listener"
    finally:
        events.remove_listener(listener)
    assert heard == [payload]


@pytest.mark.django_db(transaction=True)
def test_the_sse_stream_is_woken_by_an_event_of_another_process(
    redis_layer: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    run = queued_run()
    monkeypatch.setattr(waiting, "RECHECK_SECS", LONG_RECHECK_SECS)
    stop = threading.Event()
    thread, out = in_thread(lambda: b"".join(views.event_stream(run, 0, LONG_RECHECK_SECS, stop)))
    until(lambda: str(run.pk) in watched_trees(), "the stream watching the run's tree")
    send_from_another_process(redis_layer, finish(run))
    thread.join(GIVE_UP_SECS)
    stop.set()
    assert not thread.is_alive(), "the SSE stream was not woken by the event from the channel layer"
    body = out[0].decode()
    assert "event: run.queued" in body and body.rstrip().split("\n\n")[-1].startswith("id: ")
    assert "event: run.completed" in body.rstrip().split("\n\n")[-1]


# -- the threads of the views that wait ---------------------------------------------------------


async def test_more_requests_wait_at_once_than_the_default_executor_has_threads() -> None:
    """Every request holds its thread until all of them are running: more than the event
    loop's default executor (min(32, CPUs + 4) threads) could hold."""
    at_once = min(32, (os.cpu_count() or 1) + 4) + 2
    barrier = threading.Barrier(at_once, timeout=GIVE_UP_SECS)

    @views.off_server_thread
    def view(request: HttpRequest) -> HttpResponse:
        barrier.wait()
        return HttpResponse(threading.current_thread().name)

    factory = AsyncRequestFactory()
    answers = await asyncio.gather(*(view(factory.get("/")) for _ in range(at_once)))
    names = {answer.content.decode() for answer in answers}
    assert len(names) == at_once
    assert all(name.startswith("clawboard-wait") for name in names), names
