"""The run-tree websocket (SPEC §9) over the full ASGI application: stored events then live
ones, a reconnect with the last seen id gets exactly what it missed, refusals."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth import get_user_model
from django.test import Client

from agents_app.users import user_create_or_update
from runs_app.models import Approval, Run, RunEvent
from runs_app.services import approval_decide, run_start
from tests.runs_app.helpers import configure, wait_for
from zeroclaw_site.asgi import application

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = """
[providers.models.scripted.greet]
model = "greet-1"
script = [
  { match = "^part:", turns = [ { sleep_ms = 300 }, { say = "did {{prompt}}" } ] },
  { turns = [
      { tool_calls = [ { name = "spawn_subagent", arguments = { prompt = "part: one" } } ] },
      { sleep_ms = 300 },
      { say = "summary: {{tool_results}}" },
  ] },
]
[agents.greeter]
model_provider = "scripted.greet"
risk_profile = "team"
"""

ORIGIN = (b"origin", b"http://testserver")


def session_cookie(username: str, role: str | None) -> bytes:
    user: Any
    if role is None:
        user = get_user_model().objects.create_user(username=username, password="pw-123456789")
    else:
        user, _, _ = user_create_or_update(username=username, role=role)
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def stored_ids(root_id: Any) -> list[int]:
    return list(RunEvent.objects.filter(root_id=root_id).order_by("id").values_list("id", flat=True))


def communicator(
    root_id: Any, cookie: bytes | None, *, after: int | None = None, origin: tuple[bytes, bytes] = ORIGIN
) -> WebsocketCommunicator:
    path = f"/ws/runs/{root_id}/" + (f"?after={after}" if after is not None else "")
    headers = [origin] + ([(b"cookie", cookie)] if cookie else [])
    return WebsocketCommunicator(application, path, headers=headers)


async def receive_until_root_finishes(comm: WebsocketCommunicator, root_id: Any) -> list[dict[str, Any]]:
    received: list[dict[str, Any]] = []
    while True:
        event = await comm.receive_json_from(timeout=20)
        received.append(event)
        if event["run_id"] == str(root_id) and event["type"] == "run.completed":
            return received


async def test_a_client_receives_every_event_of_the_tree_in_order(worker: object) -> None:
    await sync_to_async(configure)(SCRIPT)
    cookie = await database_sync_to_async(session_cookie)("vera", "viewer")
    run = await database_sync_to_async(run_start)(agent="greeter", prompt="go")
    comm = communicator(run.pk, cookie)
    connected, _ = await comm.connect()
    assert connected
    received = await receive_until_root_finishes(comm, run.pk)
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()
    assert [e["id"] for e in received] == await database_sync_to_async(stored_ids)(run.pk)
    assert received[0]["type"] == "run.queued"
    assert {e["root_id"] for e in received} == {str(run.pk)}
    assert len({e["run_id"] for e in received}) == 2
    assert set(received[0]) == {"id", "run_id", "root_id", "type", "at", "data"}


async def test_a_reconnect_after_the_last_seen_id_gets_every_missed_event_exactly_once(
    worker: object,
) -> None:
    await sync_to_async(configure)(SCRIPT)
    cookie = await database_sync_to_async(session_cookie)("vera", "viewer")
    run = await database_sync_to_async(run_start)(agent="greeter", prompt="go")
    first = communicator(run.pk, cookie, after=0)
    assert (await first.connect())[0]
    seen = [await first.receive_json_from(timeout=20) for _ in range(3)]
    await first.disconnect()
    assert seen[-1]["type"] != "run.completed"

    again = communicator(run.pk, cookie, after=seen[-1]["id"])
    assert (await again.connect())[0]
    rest = await receive_until_root_finishes(again, run.pk)
    await again.disconnect()
    union = [e["id"] for e in seen + rest]
    assert union == await database_sync_to_async(stored_ids)(run.pk)
    assert len(union) == len(set(union))


async def test_a_resync_message_sends_the_stored_events_after_the_given_id_again(worker: object) -> None:
    await sync_to_async(configure)(SCRIPT)
    cookie = await database_sync_to_async(session_cookie)("vera", "viewer")
    run = await database_sync_to_async(run_start)(agent="greeter", prompt="go")
    await sync_to_async(wait_for)(run.pk)
    ids = await database_sync_to_async(stored_ids)(run.pk)
    comm = communicator(run.pk, cookie)
    assert (await comm.connect())[0]
    assert [(await comm.receive_json_from(timeout=5))["id"] for _ in ids] == ids
    await comm.send_json_to({"type": "resync", "after": ids[-3]})
    assert [(await comm.receive_json_from(timeout=5))["id"] for _ in range(2)] == ids[-2:]
    assert await comm.receive_nothing(timeout=0.2)
    await comm.disconnect()


GATED = """
[providers.models.scripted.gated]
model = "gated-1"
script = [
  { turns = [
      { tool_calls = [ { name = "memory_recall", arguments = { query = "q" } } ] },
      { say = "done: {{tool_results}}" },
  ] },
]
[risk_profiles.gated]
always_ask = ["memory_recall"]
[agents.gater]
model_provider = "scripted.gated"
risk_profile = "gated"
"""


async def test_a_resync_during_a_live_run_sends_every_event_after_the_given_id_once(worker: object) -> None:
    # The run waits for an approval, so the stream is live and nothing new is written while the
    # resync is read: what comes after it is known exactly, on a machine of any speed.
    await sync_to_async(configure)(GATED)
    cookie = await database_sync_to_async(session_cookie)("vera", "operator")
    run = await database_sync_to_async(run_start)(agent="gater", prompt="go")
    await sync_to_async(wait_for)(run.pk, {"awaiting_approval"})
    before = await database_sync_to_async(stored_ids)(run.pk)
    comm = communicator(run.pk, cookie)
    assert (await comm.connect())[0]
    assert [(await comm.receive_json_from(timeout=20))["id"] for _ in before] == before
    await comm.send_json_to({"type": "resync", "after": before[0]})
    assert [(await comm.receive_json_from(timeout=20))["id"] for _ in before[1:]] == before[1:]
    approval = await database_sync_to_async(Approval.objects.get)(run=run)
    user = await database_sync_to_async(lambda: get_user_model().objects.get(username="vera"))()
    await database_sync_to_async(approval_decide)(approval=approval, user=user, approve=True)
    rest = await receive_until_root_finishes(comm, run.pk)
    assert await comm.receive_nothing(timeout=0.3)
    await comm.disconnect()
    ids = await database_sync_to_async(stored_ids)(run.pk)
    assert [e["id"] for e in rest] == ids[len(before) :]
    assert rest[0]["type"] == "approval.decided"


async def test_a_child_run_id_joins_the_tree_of_its_root(worker: object) -> None:
    await sync_to_async(configure)(SCRIPT)
    cookie = await database_sync_to_async(session_cookie)("vera", "viewer")
    run = await database_sync_to_async(run_start)(agent="greeter", prompt="go")
    await sync_to_async(wait_for)(run.pk)
    child = await database_sync_to_async(lambda: Run.objects.get(parent=run))()
    comm = communicator(child.pk, cookie)
    assert (await comm.connect())[0]
    first = await comm.receive_json_from(timeout=5)
    assert first["run_id"] == str(run.pk) and first["type"] == "run.queued"
    await comm.disconnect()


async def closed_with(comm: WebsocketCommunicator) -> int:
    """The code of a refusal: the socket is accepted first, so that a browser sees the code
    (one closed before its handshake completes only reports 1006)."""
    assert (await comm.connect())[0]
    message = await comm.receive_output(timeout=5)
    assert message["type"] == "websocket.close", message
    return int(message["code"])


async def test_anonymous_users_are_refused_with_4401() -> None:
    comm = communicator(uuid.uuid4(), None)
    assert await closed_with(comm) == 4401


async def test_users_without_a_role_are_refused_with_4403() -> None:
    cookie = await database_sync_to_async(session_cookie)("nobody", None)
    comm = communicator(uuid.uuid4(), cookie)
    assert await closed_with(comm) == 4403


async def test_an_unknown_run_is_refused_with_4404() -> None:
    cookie = await database_sync_to_async(session_cookie)("vera", "viewer")
    comm = communicator(uuid.uuid4(), cookie)
    assert await closed_with(comm) == 4404


async def test_a_foreign_origin_is_refused() -> None:
    cookie = await database_sync_to_async(session_cookie)("vera", "viewer")
    run = await database_sync_to_async(Run.objects.create)(agent="greeter")
    comm = communicator(run.pk, cookie, origin=(b"origin", b"http://evil.example"))
    connected, _ = await comm.connect()
    assert not connected
