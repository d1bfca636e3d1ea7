"""Shared helpers of the REST API tests: users of each role with an API client each, and
reading a streamed Server-Sent Events body."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, cast

from asgiref.sync import async_to_sync
from django.http import StreamingHttpResponse
from rest_framework.test import APIClient

from agents_app.users import user_create_or_update
from runs_app.models import Run


def client_for(username: str, role: str | None) -> APIClient:
    client = APIClient()
    if role is None:
        return client
    _, _, token = user_create_or_update(username=username, role=role)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def streamed(response: Any) -> bytes:
    """The whole body of a streaming response (read until the server ends the stream). The
    event stream's body is an async iterator, read here on an event loop of its own, as daphne
    would read it."""
    stream = cast(StreamingHttpResponse, response)
    if not stream.is_async:
        return b"".join(stream.streaming_content)  # type: ignore[arg-type]

    async def read() -> bytes:
        return b"".join([chunk async for chunk in stream])

    return async_to_sync(read)()


def send_raw(client: APIClient, method: str, url: str, body: bytes, content_type: str) -> Any:
    """A request whose body is exactly these bytes (invalid JSON, invalid UTF-8, ...)."""
    return client.generic(method, url, cast(Any, body), content_type=content_type)


def parse_sse(body: bytes) -> list[dict[str, Any]]:
    """The events of an SSE body: [{"id", "event", "data"}] (comments skipped)."""
    found: list[dict[str, Any]] = []
    for block in body.decode().split("\n\n"):
        fields: dict[str, Any] = {}
        for line in block.splitlines():
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value
        if fields:
            if "data" in fields:
                fields["data"] = json.loads(fields["data"])
            found.append(fields)
    return found


def poll(check: Callable[[], Any], timeout: float = 20, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached after {timeout}s")
        time.sleep(0.02)


def child_of(parent_id: Any) -> Run:
    return poll(lambda: Run.objects.filter(parent_id=parent_id).first(), what=f"a child of {parent_id}")
