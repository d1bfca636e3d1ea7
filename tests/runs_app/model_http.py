"""A real HTTP/1.1 server with keep-alive that stands in for a model endpoint in provider tests.

It counts the TCP connections it accepted and the most requests it had in flight at once, so
tests can see whether a provider reuses its connections and how many calls it makes at once.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .test_providers_openai import Reply, completion


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # the default backlog of 5 delays bursts of connects by a SYN retry


class KeepAliveServer:
    """Answers every POST with `answer(path, body)`, after `delay` seconds."""

    def __init__(
        self, answer: Callable[[str, dict[str, Any]], Reply] | None = None, delay: float = 0.0
    ) -> None:
        self.answer = answer or (lambda path, body: completion("ok"))
        self.delay = delay
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with fake._lock:
                    fake.connections += 1

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake._lock:
                    fake.requests.append(
                        {
                            "path": self.path,
                            "authorization": self.headers.get("Authorization", ""),
                            "body": body,
                        }
                    )
                    fake.in_flight += 1
                    fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
                try:
                    reply = fake.answer(self.path, body)
                    if fake.delay or reply.delay:
                        time.sleep(fake.delay + reply.delay)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1
                payload = (reply.body if isinstance(reply.body, str) else json.dumps(reply.body)).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def queue(self, *replies: Reply) -> None:
        """Answer the next requests with `replies`, in order, then with HTTP 500."""
        pending = list(replies)

        def answer(path: str, body: dict[str, Any]) -> Reply:
            with self._lock:
                if pending:
                    return pending.pop(0)
            return Reply(500, {"error": {"message": "no more replies", "type": "server_error"}})

        self.answer = answer

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
