"""The dashboard's one websocket per tab (SPEC §9, §11).

- `ws/runs/<root_id>/?after=<event id>`: what `live.tree_events` yields, the stored events
  after the client's last seen id, then live ones, each once and in id order (see
  runs_app/live.py). With `&notices=1` it also carries the notices below, so the run page
  needs no second socket.
- `ws/live/`: notices only, for every other page: `{"type": "changed", "topics": [...],
  "approvals": <pending count>}` when a list the dashboard shows changed (runs_app/notices.py),
  and `{"type": "hello", "approvals": <n>}` first.

Refusals reach the client as close codes after the handshake (a browser never sees the code of
a socket closed before it was accepted): 4401 not signed in, 4403 no viewer role, 4404 no such
run. A path that names no socket is answered 404 at the handshake (or closed with 4404 on a
server without ASGI's denial-response extension). A frame that is not a JSON object of a known
type is answered `{"type": "error", "code": ..., "detail": ...}` and the socket stays open."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import json
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer, AsyncWebsocketConsumer

from agents_app.roles import has_role
from runs_app import live, notices
from runs_app.models import Approval, Run

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_SERVER_ERROR = 1011
MAX_EVENT_ID = 2**63 - 1  # the largest id a BigAutoField holds
NOTICE_DELAY_SECS = 0.2  # a burst of notices (a tree settling) becomes one message
DENIAL_EXTENSION = "websocket.http.response"


def _root_of(run_id: Any) -> str | None:
    row = Run.objects.filter(pk=run_id).values_list("pk", "root_id").first()
    if row is None:
        return None
    return str(row[1] or row[0])


def _pending_approvals() -> int:
    return Approval.objects.filter(status=Approval.Status.PENDING).count()


def _parse_after(value: Any) -> int:
    """The `after` of the query string: anything that is not an event id means "from the start"."""
    try:
        return min(MAX_EVENT_ID, max(0, int(value)))
    except (TypeError, ValueError, OverflowError):
        return 0


def event_id_or_none(value: Any) -> int | None:
    """The `after` of a resync frame: a JSON integer 0..2**63-1, else None."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EVENT_ID:
        return None
    return value


def error_frame(code: str, detail: str) -> dict[str, str]:
    return {"type": "error", "code": code, "detail": detail}


class LiveConsumer(AsyncJsonWebsocketConsumer):
    """`ws/live/`, and the base of the run-tree socket: sign-in and role checks, notices,
    frames that never close the socket."""

    wants_notices = True
    notice_topics: set[str]
    notice_flush: asyncio.Task[None] | None = None
    listening: Any = None
    joined_group = False
    # The consumer's own context: a notice arrives from a writer's thread, whose context
    # (asgiref's "already in a sync thread" mark) must not leak into the task it starts.
    notice_context: contextvars.Context | None = None

    async def connect(self) -> None:
        await self.accept()  # first: the codes below reach the client only on an open socket
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(has_role)(user, "viewer"):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        if not await self.start():
            await self.close(code=CLOSE_NOT_FOUND)
            return
        if self.wants_notices:
            await self._listen()

    async def start(self) -> bool:
        """What this socket sends besides notices; False when it names nothing (4404)."""
        return True

    async def disconnect(self, code: int) -> None:
        await self._unlisten()

    # -- frames from the client ------------------------------------------------------------

    async def receive(
        self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: Any
    ) -> None:
        if text_data is None:
            await self.send_json(error_frame("binary_frame", "send JSON text frames, not binary ones"))
            return
        try:
            content = json.loads(text_data)
        except ValueError:
            await self.send_json(error_frame("invalid_json", "the frame is not JSON"))
            return
        if not isinstance(content, dict):
            await self.send_json(error_frame("invalid_message", "a message is a JSON object with a 'type'"))
            return
        await self.receive_message(content)

    async def receive_message(self, content: dict[str, Any]) -> None:
        if content.get("type") == "ping":
            await self.send_json({"type": "pong"})
            return
        await self.send_json(
            error_frame("unknown_type", f"unknown message type {str(content.get('type'))[:40]!r}")
        )

    # -- notices ---------------------------------------------------------------------------

    async def _listen(self) -> None:
        self.notice_topics = set()
        self.notice_context = contextvars.copy_context()
        await self.send_json({"type": "hello", "approvals": await live.read(_pending_approvals)})
        if notices.in_memory_layer():
            self.listening = functools.partial(_queue_notice, asyncio.get_running_loop(), self)
            notices.listen(self.listening)
        elif self.channel_layer is not None:
            await self.channel_layer.group_add(notices.GROUP, self.channel_name)
            self.joined_group = True

    async def _unlisten(self) -> None:
        if self.listening is not None:
            notices.unlisten(self.listening)
            self.listening = None
        if self.joined_group and self.channel_layer is not None:
            self.joined_group = False
            with contextlib.suppress(Exception):  # the membership expires on its own
                await self.channel_layer.group_discard(notices.GROUP, self.channel_name)
        flush, self.notice_flush = self.notice_flush, None
        if flush is not None:
            flush.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await flush

    async def notice_changed(self, message: dict[str, Any]) -> None:
        """A notice from the channel-layer group (scale-out)."""
        self.add_notice(frozenset(str(t) for t in message.get("topics", ())))

    def add_notice(self, topics: frozenset[str]) -> None:
        self.notice_topics.update(topics)
        if self.notice_flush is None or self.notice_flush.done():
            loop = asyncio.get_running_loop()
            self.notice_flush = loop.create_task(self._flush_notices(), context=self.notice_context)

    async def _flush_notices(self) -> None:
        await asyncio.sleep(NOTICE_DELAY_SECS)
        topics, self.notice_topics = self.notice_topics, set()
        try:
            count = await live.read(_pending_approvals)
        except Exception:
            log.exception("counting the pending approvals failed")
            return
        await self.send_json({"type": "changed", "topics": sorted(topics), "approvals": count})


def _queue_notice(loop: asyncio.AbstractEventLoop, consumer: LiveConsumer, topics: frozenset[str]) -> None:
    """Called in the writer's thread (embedded mode): hand the notice to the consumer's loop."""
    with contextlib.suppress(RuntimeError):  # the loop closed: nobody is listening any more
        loop.call_soon_threadsafe(consumer.add_notice, topics, context=consumer.notice_context)


class RunTreeConsumer(LiveConsumer):
    """`ws/runs/<root_id>/?after=<event id>[&notices=1]`: every stored event of the tree after
    `after`, in order, then live ones. The client may send `{"type": "resync", "after": N}` at
    any time: the stream starts again after N."""

    root_id: str = ""
    follower: asyncio.Task[None] | None = None

    async def start(self) -> bool:
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.wants_notices = query.get("notices", ["0"])[0] == "1"
        root_id = await database_sync_to_async(_root_of)(self.scope["url_route"]["kwargs"]["root_id"])
        if root_id is None:
            return False
        self.root_id = root_id
        await self._follow(_parse_after(query.get("after", ["0"])[0]))
        return True

    async def disconnect(self, code: int) -> None:
        await self._stop()
        await super().disconnect(code)

    async def receive_message(self, content: dict[str, Any]) -> None:
        if content.get("type") != "resync":
            await super().receive_message(content)
            return
        after = event_id_or_none(content.get("after", 0))
        if after is None:
            await self.send_json(
                error_frame(
                    "invalid_after", f"'after' must be an event id, an integer from 0 to {MAX_EVENT_ID}"
                )
            )
            return
        await self._follow(after)

    async def _follow(self, after: int) -> None:
        """Send the tree's events after `after` from now on, instead of what was being sent."""
        await self._stop()  # first, so that no event of the old stream comes after the new one's
        self.follower = asyncio.create_task(self._send_events(after))

    async def _stop(self) -> None:
        follower, self.follower = self.follower, None
        if follower is not None:
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await follower

    async def _send_events(self, after: int) -> None:
        try:
            async with contextlib.aclosing(live.tree_events(self.root_id, after)) as stream:
                async for event in stream:
                    if event is not None:
                        await self.send_json(event)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("the live events of tree %s failed", self.root_id)
            await self.close(code=CLOSE_SERVER_ERROR)


class NoSuchSocket(AsyncWebsocketConsumer):
    """Every path that names no socket: 404 at the handshake where the server offers ASGI's
    denial response (`manage.py serve` does), else closed with 4404 once open."""

    async def connect(self) -> None:
        if DENIAL_EXTENSION in self.scope.get("extensions", {}):
            await self.base_send(
                {
                    "type": "websocket.http.response.start",
                    "status": 404,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8")],
                }
            )
            await self.base_send({"type": "websocket.http.response.body", "body": b"No such websocket.\n"})
            return
        await self.accept()
        await self.close(code=CLOSE_NOT_FOUND)
