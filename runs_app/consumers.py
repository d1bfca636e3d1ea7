"""Live events of one run tree over a websocket (SPEC §9).

Joining the group comes first, reading the stored events second: an event committed in
between arrives both ways and is sent once (ids only grow), none falls between the two.
A live event that skips ids the client has not been sent is preceded by the missing ones
from the database, so a message the channel layer dropped is not lost either."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agents_app.roles import has_role
from runs_app import events
from runs_app.models import Run, RunEvent

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
BATCH = 500


def _root_of(run_id: Any) -> str | None:
    row = Run.objects.filter(pk=run_id).values_list("pk", "root_id").first()
    if row is None:
        return None
    return str(row[1] or row[0])


def _stored_events(root_id: str, after: int, before: int | None = None) -> list[dict[str, Any]]:
    qs = RunEvent.objects.filter(root_id=root_id, id__gt=after).order_by("id")
    if before is not None:
        qs = qs.filter(id__lt=before)
    return [events.event_json(e) for e in qs[:BATCH]]


def _parse_after(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


class RunTreeConsumer(AsyncJsonWebsocketConsumer):
    """`ws/runs/<root_id>/?after=<event id>`: every stored event of the tree after `after`, in
    order, then live ones. The client may send `{"type": "resync", "after": N}` at any time."""

    root_id: str = ""
    group: str = ""
    last_sent: int = 0

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await database_sync_to_async(has_role)(user, "viewer"):
            await self.close(code=CLOSE_FORBIDDEN)
            return
        root_id = await database_sync_to_async(_root_of)(self.scope["url_route"]["kwargs"]["root_id"])
        if root_id is None:
            await self.close(code=CLOSE_NOT_FOUND)
            return
        events.set_server_loop(asyncio.get_running_loop())
        self.root_id = root_id
        self.group = events.group_name(root_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        await self._resync(_parse_after(query.get("after", ["0"])[0]))

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "resync":
            await self._resync(_parse_after(content.get("after")))

    async def run_event(self, message: dict[str, Any]) -> None:
        event = message["event"]
        event_id = int(event["id"])
        if event_id <= self.last_sent:
            return
        if event_id > self.last_sent + 1:
            # Ids are global, so a jump may only be other trees' events; the database knows.
            await self._send_stored(self.last_sent, before=event_id)
        if event_id > self.last_sent:
            await self._send(event)

    async def _resync(self, after: int) -> None:
        # The client has everything up to `after`: never fill a later gap with those again.
        self.last_sent = max(self.last_sent, after)
        await self._send_stored(after)

    async def _send_stored(self, after: int, before: int | None = None) -> None:
        while True:
            batch = await database_sync_to_async(_stored_events)(self.root_id, after, before)
            for event in batch:
                await self._send(event)
            if len(batch) < BATCH:
                return
            after = int(batch[-1]["id"])

    async def _send(self, event: dict[str, Any]) -> None:
        await self.send_json(event)
        self.last_sent = max(self.last_sent, int(event["id"]))
