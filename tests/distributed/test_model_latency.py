"""A model that takes its time, with the documented defaults (docs/deployment.md: two workers
with `-P threads -c 4`, `CLAWBOARD_DB_POOL_MAX` unset, `[delegate].max_concurrent_runs = 8`):
one run spawns 20 children in one turn through the OpenAI-compatible provider, over real HTTP,
against a local server that answers every call after 500 ms. Every child and the root complete
(issue 18: with `-c 64` and a fixed pool of 10 this tree stalled). No timing is asserted.

And a worker whose explicit pool is smaller than its threads need refuses to start."""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.distributed.conftest import (
    BIN,
    ROOT,
    Cluster,
    agent,
    load_config,
    run_row,
    start_run,
    wait_terminal,
)

DELAY = 0.5
CHILDREN = 20


class DelayedModel:
    """OpenAI chat completions after DELAY: a task "fanout:N" gets N spawn_subagent calls in its
    first turn and "done" once their results are in; any other task gets "ok"."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                with model.lock:
                    model.calls += 1
                time.sleep(DELAY)
                payload = json.dumps(model.answer(body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

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
        task = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
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


@pytest.fixture(scope="module")
def model() -> Iterator[DelayedModel]:
    server = DelayedModel()
    yield server
    server.close()


def test_twenty_children_of_one_turn_complete_against_a_delayed_model(
    cluster: Cluster, model: DelayedModel
) -> None:
    provider = f'[providers.models.openai.slow]\nmodel = "slow-1"\nuri = "{model.url}"\ntimeout_secs = 60\n'
    load_config(cluster, provider + agent("coordinator", "openai.slow"))

    root = start_run(cluster, "coordinator", f"fanout:{CHILDREN} coordinate")
    final = wait_terminal(cluster, [root], timeout=600)

    assert len(final) == CHILDREN + 1, final
    assert sorted(set(final.values())) == ["completed"], final
    row = run_row(cluster, root)
    assert (row["status"], row["output"]) == ("completed", "done")
    assert model.calls >= CHILDREN + 2  # every child's call and the root's two went over HTTP


def test_a_worker_refuses_an_explicit_pool_smaller_than_its_threads(cluster: Cluster) -> None:
    env = {**cluster.env, "CLAWBOARD_DB_POOL_MAX": "10"}
    done = subprocess.run(
        [
            str(BIN / "celery"), "-A", "zeroclaw_site", "worker", "-P", "threads", "-c", "64",
            "-Q", "pool-refusal-test", "--without-mingle", "--without-gossip", "-n", "refused@%h",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "CLAWBOARD_DB_POOL_MAX=10 is too small for a worker with -c 64" in done.stdout + done.stderr
