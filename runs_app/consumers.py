"""Live events of one run tree over a websocket (SPEC §9).

The socket sends what `live.tree_events` yields: the stored events after the client's last
seen id, then live ones, each once and in id order (see runs_app/live.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any
from urllib.parse import parse_qs

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from agents_app.roles import has_role
from runs_app import live
from runs_app.models import Run

log = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_SERVER_ERROR = 1011


def _root_of(run_id: Any) -> str | None:
    row = Run.objects.filter(pk=run_id).values_list("pk", "root_id").first()
    if row is None:
        return None
    return str(row[1] or row[0])


def _parse_after(value: Any) -> int:
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return 0


class RunTreeConsumer(AsyncJsonWebsocketConsumer):
    """`ws/runs/<root_id>/?after=<event id>`: every stored event of the tree after `after`, in
    order, then live ones. The client may send `{"type": "resync", "after": N}` at any time:
    the stream starts again after N."""

    root_id: str = ""
    follower: asyncio.Task[None] | None = None

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
        self.root_id = root_id
        await self.accept()
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        await self._follow(_parse_after(query.get("after", ["0"])[0]))

    async def disconnect(self, code: int) -> None:
        await self._stop()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "resync":
            await self._follow(_parse_after(content.get("after")))

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
