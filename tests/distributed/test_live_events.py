"""REST waits and the SSE stream are woken by the workers' events, through the channel layer
(runs_app/live.py): nothing on the server reads the database again on a timer.

The requests go to a third daphne of their own. Each run sleeps 1.5 s on a worker process
before it answers, so the request is waiting before the run ends; the server may wait 60 s,
and the client gives up after 15 s. An answer within those 15 s can only come from the
worker's terminal event, heard by that daphne through Redis: without it, the server would
look at the runs again only when its 60 s are up."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.distributed.conftest import Cluster, agent, db_events, load_config, provider, start_run

CLIENT_TIMEOUT = 15.0  # well below WAIT: past it, the wake-up did not happen
WAIT = 60  # seconds the server may wait

CONFIG = (
    provider(
        "nap",
        [
            {"match": "^child:", "turns": [{"sleep_ms": 1500}, {"say": "child rested"}]},
            {"match": "^parent", "turns": [{"say": "ready"}]},
            {"turns": [{"sleep_ms": 1500}, {"say": "rested"}]},
        ],
    )
    + agent("napper", "scripted.nap", delegates=["helper"])
    + agent("helper", "scripted.nap", runtime="oneshot")
)


@pytest.fixture(scope="module")
def waiting_daphne(cluster: Cluster) -> Iterator[tuple[Cluster, int]]:
    """The cluster's configuration, and a daphne of this module's own."""
    load_config(cluster, CONFIG)
    with cluster.extra_daphne({}) as index:
        yield cluster, index


def _client(c: Cluster, index: int) -> httpx.Client:
    client = c.api(index)
    client.timeout = httpx.Timeout(CLIENT_TIMEOUT)
    return client


def _post(c: Cluster, index: int, path: str, body: dict[str, Any]) -> httpx.Response:
    with _client(c, index) as api:
        try:
            return api.post(path, json=body)
        except httpx.TimeoutException:
            pytest.fail(
                f"POST {path} did not answer within {CLIENT_TIMEOUT} s: the waiter was not woken by "
                "the worker's event",
                pytrace=False,
            )


def _finished_parent(c: Cluster) -> str:
    answer = _post(c, 0, "/runs/", {"agent": "napper", "prompt": "parent", "wait": WAIT})
    assert answer.status_code == 201, answer.text
    assert answer.json()["status"] == "completed", answer.text
    return str(answer.json()["id"])


def test_a_run_started_with_wait_answers_completed_when_a_worker_finishes_it(
    waiting_daphne: tuple[Cluster, int],
) -> None:
    c, index = waiting_daphne
    answer = _post(c, index, "/runs/", {"agent": "napper", "prompt": "take a nap", "wait": WAIT})
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert (body["status"], body["output"]) == ("completed", "rested"), body


def test_a_spawn_with_wait_answers_with_the_child_result(waiting_daphne: tuple[Cluster, int]) -> None:
    c, index = waiting_daphne
    parent = _finished_parent(c)
    answer = _post(c, index, f"/runs/{parent}/spawn/", {"prompt": "child: nap", "wait": WAIT})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["success"] is True, body
    assert "child rested" in body["output"], body


def test_results_await_answers_when_the_background_task_ends(waiting_daphne: tuple[Cluster, int]) -> None:
    c, index = waiting_daphne
    parent = _finished_parent(c)
    started = _post(
        c, 0, f"/runs/{parent}/delegate/", {"agent": "helper", "prompt": "child: nap", "background": True}
    )
    assert started.status_code == 202, started.text
    task_id = started.json()["run_id"]
    answer = _post(c, index, "/results/await/", {"task_ids": [task_id], "timeout_ms": WAIT * 1000})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["success"] is True, body
    assert json.loads(body["output"])["status"] == "complete", body


def test_the_sse_stream_carries_a_workers_events_and_ends_with_the_run(
    waiting_daphne: tuple[Cluster, int],
) -> None:
    c, index = waiting_daphne
    root = start_run(c, "napper", "take a nap", index=0)
    chunks: list[str] = []
    failure: list[BaseException] = []
    client = _client(c, index)

    def read() -> None:
        try:
            with client.stream(
                "GET",
                f"/runs/{root}/events/",
                params={"timeout": WAIT},
                headers={"Accept": "text/event-stream"},
            ) as response:
                assert response.status_code == 200, response.read()
                chunks.extend(response.iter_text())
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            failure.append(exc)

    reader = threading.Thread(target=read, name="sse-reader", daemon=True)
    reader.start()
    reader.join(CLIENT_TIMEOUT)
    if reader.is_alive():
        client.close()
        pytest.fail(
            f"the SSE stream did not end within {CLIENT_TIMEOUT} s: the stream was not woken by the "
            "worker's events",
            pytrace=False,
        )
    client.close()
    assert not failure, failure
    received = [
        json.loads(line.removeprefix("data: "))
        for block in "".join(chunks).split("\n\n")
        for line in block.splitlines()
        if line.startswith("data: ")
    ]
    stored = db_events(c, root)
    assert [e["id"] for e in received] == [row[0] for row in stored]
    assert received[-1]["type"] == "run.completed", received[-1]
    assert received[-1]["data"]["output"] == "rested", received[-1]
