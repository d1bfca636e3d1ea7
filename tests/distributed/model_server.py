"""A local OpenAI-compatible server for the distributed tests: real HTTP, every answer after a
delay, so that model calls are in flight while the cluster works."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def task_of(body: dict[str, Any]) -> str:
    """The run's task: the conversation's first user message."""
    messages = body.get("messages") or []
    return next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")


class DelayedModel:
    """OpenAI chat completions after `delay` seconds (settable while it serves): a task
    "fanout:N" gets N spawn_subagent calls in its first turn and "done" once their results are
    in; any other task gets "ok". It keeps each call's task and the most calls in flight."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.calls: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                with model.lock:
                    model.calls.append(task_of(body))
                    model.in_flight += 1
                    model.max_in_flight = max(model.max_in_flight, model.in_flight)
                try:
                    time.sleep(model.delay)
                finally:
                    with model.lock:
                        model.in_flight -= 1
                payload = json.dumps(model.answer(body)).encode()
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the worker that asked was killed

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 128

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    @staticmethod
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        messages = body.get("messages") or []
        task = task_of(body)
        results = sum(1 for m in messages if m.get("role") == "tool")
        fanout = re.search(r"fanout:(\d+)", task)
        message: dict[str, Any] = {"role": "assistant", "content": "done" if fanout else "ok"}
        if fanout and results == 0:
            arguments = json.dumps({"prompt": "child: work"})
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{i}",
                        "type": "function",
                        "function": {"name": "spawn_subagent", "arguments": arguments},
                    }
                    for i in range(int(fanout.group(1)))
                ],
            }
        return {
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "created": 1,
            "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        }

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
