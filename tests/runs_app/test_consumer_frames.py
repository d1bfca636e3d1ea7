"""The dashboard's websocket over the full ASGI application: bad paths and bad frames never
close it with an error, and `ws/live/` (or the run socket with `notices=1`) tells each page
which of its lists changed, with the pending approvals count of the nav badge."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator

from runs_app.models import Run
from runs_app.services import run_start
from tests.runs_app.helpers import configure, wait_for
from tests.runs_app.test_consumer import ORIGIN, SCRIPT, communicator, session_cookie
from zeroclaw_site.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

GATED = """
[providers.models.scripted.ask]
model = "ask-1"
script = [ { turns = [ { tool_calls = [ { name = "shell", arguments = { command = "echo hi" } } ] }, { say = "ok" } ] } ]
[risk_profiles.asking]
allowed_commands = ["echo"]
always_ask = ["shell"]
[agents.asker]
model_provider = "scripted.ask"
risk_profile = "asking"
"""


def socket(path: str, cookie: bytes | None) -> WebsocketCommunicator:
    headers = [ORIGIN] + ([(b"cookie", cookie)] if cookie else [])
    return WebsocketCommunicator(application, path, headers=headers)


async def viewer_cookie() -> bytes:
    return await database_sync_to_async(session_cookie)("vera", "viewer")


@pytest.mark.parametrize("path", ["/ws/runs/abc/", "/ws/foo/", "/", "/ws/runs/", "/ws/live/extra/"])
async def test_a_path_that_names_no_socket_is_closed_with_4404_not_an_error(path: str) -> None:
    comm = socket(path, await viewer_cookie())
    assert (await comm.connect())[0]
    message = await comm.receive_output(timeout=5)
    assert message == {"type": "websocket.close", "code": 4404}


async def test_a_server_with_the_denial_extension_answers_404_at_the_handshake() -> None:
    comm = socket("/ws/foo/", await viewer_cookie())
    comm.scope["extensions"] = {"websocket.http.response": {}}
    await comm.send_input({"type": "websocket.connect"})
    start = await comm.receive_output(timeout=5)
    body = await comm.receive_output(timeout=5)
    assert start["type"] == "websocket.http.response.start" and start["status"] == 404
    assert body == {"type": "websocket.http.response.body", "body": b"No such websocket.\n"}


async def run_socket(cookie: bytes) -> WebsocketCommunicator:
    run = await database_sync_to_async(Run.objects.create)(agent="greeter")
    comm = communicator(run.pk, cookie)
    assert (await comm.connect())[0]
    return comm


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        ("not json", "invalid_json"),
        ("{", "invalid_json"),
        ("[1, 2]", "invalid_message"),
        ('"resync"', "invalid_message"),
        ('{"type": "resync", "after": 1e400}', "invalid_after"),
        ('{"type": "resync", "after": 1' + "0" * 400 + "}", "invalid_after"),
        ('{"type": "resync", "after": -1}', "invalid_after"),
        ('{"type": "resync", "after": "12"}', "invalid_after"),
        ('{"type": "resync", "after": true}', "invalid_after"),
        ('{"type": "resync", "after": 1.5}', "invalid_after"),
        ('{"type": "resync", "after": NaN}', "invalid_after"),
        ('{"type": "dance"}', "unknown_type"),
        ("{}", "unknown_type"),
    ],
)
async def test_a_bad_text_frame_gets_a_json_error_and_the_socket_stays_open(frame: str, code: str) -> None:
    comm = await run_socket(await viewer_cookie())
    await comm.send_to(text_data=frame)
    answer = await comm.receive_json_from(timeout=5)
    assert answer["type"] == "error" and answer["code"] == code and answer["detail"]
    await comm.send_json_to({"type": "ping"})
    assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
    await comm.disconnect()


async def test_a_binary_frame_gets_a_json_error_and_the_socket_stays_open() -> None:
    comm = await run_socket(await viewer_cookie())
    await comm.send_to(bytes_data=b"\x00\xff")
    assert await comm.receive_json_from(timeout=5) == {
        "type": "error",
        "code": "binary_frame",
        "detail": "send JSON text frames, not binary ones",
    }
    await comm.send_json_to({"type": "ping"})
    assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
    await comm.disconnect()


async def test_a_huge_after_in_the_query_string_starts_from_the_beginning_instead_of_failing() -> None:
    cookie = await viewer_cookie()
    run = await database_sync_to_async(Run.objects.create)(agent="greeter")
    comm = socket(f"/ws/runs/{run.pk}/?after=1{'0' * 400}", cookie)
    assert (await comm.connect())[0]
    assert await comm.receive_nothing(timeout=0.3)
    await comm.send_json_to({"type": "ping"})
    assert await comm.receive_json_from(timeout=5) == {"type": "pong"}
    await comm.disconnect()


async def test_the_live_socket_refuses_anonymous_users_with_4401() -> None:
    comm = socket("/ws/live/", None)
    assert (await comm.connect())[0]
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4401}


async def receive_until(comm: WebsocketCommunicator, check: Any, timeout: float = 20) -> dict[str, Any]:
    while True:
        message = await comm.receive_json_from(timeout=timeout)
        if check(message):
            return dict(message)


async def test_the_live_socket_says_hello_with_the_badge_count_then_tells_what_changed(
    worker: object,
) -> None:
    await sync_to_async(configure)(GATED)
    comm = socket("/ws/live/", await viewer_cookie())
    assert (await comm.connect())[0]
    assert await comm.receive_json_from(timeout=5) == {"type": "hello", "approvals": 0}
    await database_sync_to_async(run_start)(agent="asker", prompt="go")
    seen: list[dict[str, Any]] = []

    def asked(message: dict[str, Any]) -> bool:
        seen.append(message)
        return bool(message["approvals"] == 1)

    await receive_until(comm, asked)
    assert {m["type"] for m in seen} == {"changed"}
    assert {"runs", "approvals", "home"} <= {t for m in seen for t in m["topics"]}
    await comm.disconnect()


async def test_the_run_socket_carries_notices_only_when_asked(worker: object) -> None:
    await sync_to_async(configure)(SCRIPT)
    cookie = await viewer_cookie()
    run = await database_sync_to_async(run_start)(agent="greeter", prompt="go")
    await sync_to_async(wait_for)(run.pk)
    plain = communicator(run.pk, cookie)
    assert (await plain.connect())[0]
    first = await plain.receive_json_from(timeout=5)
    assert first["type"] == "run.queued"
    await plain.disconnect()

    both = socket(f"/ws/runs/{run.pk}/?after=0&notices=1", cookie)
    assert (await both.connect())[0]
    messages = [await both.receive_json_from(timeout=5) for _ in range(2)]
    assert {"type": "hello", "approvals": 0} in messages
    assert any(m["type"] == "run.queued" for m in messages)
    await both.disconnect()


async def test_an_unknown_uuid_on_the_run_socket_is_4404() -> None:
    comm = socket(f"/ws/runs/{uuid.uuid4()}/?notices=1", await viewer_cookie())
    assert (await comm.connect())[0]
    assert await comm.receive_output(timeout=5) == {"type": "websocket.close", "code": 4404}
