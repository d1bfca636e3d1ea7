"""A local OpenAI-compatible model server for benchmarks: asyncio, HTTP/1.1 with keep-alive, and
every `/v1/chat/completions` answered after a fixed delay.

It plays the model of `real_latency.py`'s workloads, deciding from the conversation (the first
user message is the task, role "tool" messages are the results so far):

  "fanout:N ..."  first turn: N `spawn_subagent` calls in one reply; then the text "done"
  "chain:N ..."   one `spawn_subagent` call per turn until N results are in; then "done"
  anything else   the text "ok" (a child, or a top-level run with nothing to spawn)

The spawned prompt is "child: work". It counts the chat requests in flight and keeps their
maximum. Control endpoints for the benchmark: `POST /bench/reset` with `{"delay_ms": n}`
(set the delay, zero the counters) and `GET /bench/stats`.

Run on its own: python bench/_model_server.py [--port 8765] [--delay-ms 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import threading
import time
from typing import Any

CHILD_PROMPT = "child: work"
_FANOUT = re.compile(r"\bfanout:(\d+)")
_CHAIN = re.compile(r"\bchain:(\d+)")


def _task_and_results(messages: list[dict[str, Any]]) -> tuple[str, int]:
    task = ""
    for message in messages:
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                content = " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
            task = str(content or "")
            break
    return task, sum(1 for m in messages if m.get("role") == "tool")


def decide(body: dict[str, Any]) -> dict[str, Any]:
    """The assistant message for a chat-completions request body."""
    task, results = _task_and_results(body.get("messages") or [])
    calls = 0
    if (fanout := _FANOUT.search(task)) is not None:
        calls = int(fanout.group(1)) if results == 0 else 0
    elif (chain := _CHAIN.search(task)) is not None:
        calls = 1 if results < int(chain.group(1)) else 0
    if calls:
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{results}_{i}",
                    "type": "function",
                    "function": {"name": "spawn_subagent", "arguments": json.dumps({"prompt": CHILD_PROMPT})},
                }
                for i in range(calls)
            ],
        }
    text = "done" if fanout or _CHAIN.search(task) else "ok"
    return {"role": "assistant", "content": text}


def completion(body: dict[str, Any]) -> dict[str, Any]:
    message = decide(body)
    return {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": str(body.get("model") or "bench-model"),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if "tool_calls" in message else "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }


class ModelServer:
    """The server in a thread of its own (its own event loop); `start()` returns its base URL."""

    def __init__(self, delay_ms: float = 1000, host: str = "127.0.0.1", port: int = 0) -> None:
        self.delay = delay_ms / 1000
        self.host = host
        self.port = port
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests = 0
        self.connections = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="model-server", daemon=True)

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> str:
        self._thread.start()
        self._ready.wait(10)
        return self.url

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _main(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, self.host, self.port, backlog=4096)
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
                headers = {
                    name.strip().lower(): value.strip()
                    for name, _, value in (line.partition(":") for line in lines[1:] if ":" in line)
                }
                length = int(headers.get("content-length") or 0)
                raw = await reader.readexactly(length) if length else b""
                status, payload = await self._answer(method, path.split("?", 1)[0], raw)
                data = json.dumps(payload).encode()
                writer.write(
                    f"HTTP/1.1 {status} {'OK' if status == 200 else 'Error'}\r\n"
                    f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
                if headers.get("connection", "").lower() == "close":
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _answer(self, method: str, path: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            return 400, {"error": {"message": "invalid JSON", "type": "invalid_request_error"}}
        if path.endswith("/chat/completions") and method == "POST":
            self.requests += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            try:
                await asyncio.sleep(self.delay)
                return 200, completion(body)
            finally:
                self.in_flight -= 1
        if path == "/bench/reset" and method == "POST":
            self.delay = float(body.get("delay_ms", self.delay * 1000)) / 1000
            self.max_in_flight = self.in_flight
            self.requests = self.connections = 0
            return 200, self.stats()
        if path == "/bench/stats":
            return 200, self.stats()
        return 404, {"error": {"message": f"no route {path}", "type": "not_found"}}

    def stats(self) -> dict[str, Any]:
        return {
            "delay_ms": self.delay * 1000,
            "max_in_flight": self.max_in_flight,
            "in_flight": self.in_flight,
            "requests": self.requests,
            "connections": self.connections,
        }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--delay-ms", type=float, default=1000)
    args = parser.parse_args()
    server = ModelServer(args.delay_ms, port=args.port)
    print(f"OpenAI-compatible model server on {server.start()}/v1 (delay {args.delay_ms:g} ms)", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait()
    server.stop()


if __name__ == "__main__":
    main()
