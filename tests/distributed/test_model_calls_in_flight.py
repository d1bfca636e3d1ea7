"""Model calls in flight across worker processes (docs/runs.md, "A model call in flight").

A real local HTTP server speaks the OpenAI protocol and answers after a delay
(`model_server.py`). The runs use
Clawboard's OpenAI-compatible provider, so each model call is awaited on a worker's event
loop and its answer comes back as a `runs.continue_run` task through Redis, to whichever
worker takes it. Then every worker is SIGKILLed while calls are in flight: the reaper queues
those runs again and a new worker makes their calls again; none is lost."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.distributed.conftest import Cluster, agent, db_events, load_config, start_run, wait_terminal
from tests.distributed.model_server import DelayedModel

RUNS = 8  # BASE_TOML's [delegate].max_concurrent_runs: all of them in flight at once


@pytest.fixture
def slow_model() -> Iterator[DelayedModel]:
    model = DelayedModel(delay=1.0)
    yield model
    model.close()


def config(model: DelayedModel) -> str:
    return f'[providers.models.openai.slow]\nmodel = "slow-1"\nuri = "{model.url}"\n' + agent(
        "thinker", "openai.slow"
    )


def wait_for(predicate: Any, timeout: float, message: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{message}: not after {timeout}s")
        time.sleep(0.05)


def outputs(c: Cluster, run_ids: list[str]) -> dict[str, tuple[str, str]]:
    rows = c.q("SELECT id, status, output FROM runs_app_run WHERE id = ANY(%s::uuid[])", (run_ids,))
    return {str(r[0]): (r[1], r[2]) for r in rows}


def test_calls_in_flight_on_two_workers_continue_on_any(cluster: Cluster, slow_model: DelayedModel) -> None:
    c = cluster
    load_config(c, config(slow_model))
    runs = [start_run(c, "thinker", f"task {i}", index=i % 2) for i in range(RUNS)]
    wait_terminal(c, runs, timeout=60)
    assert outputs(c, runs) == {rid: ("completed", "ok") for rid in runs}
    # 2 workers × 4 threads, but the calls hold none: all of them were in flight together.
    assert slow_model.max_in_flight == RUNS
    assert sorted(slow_model.calls) == sorted(f"task {i}" for i in range(RUNS))


def test_killing_every_worker_during_the_calls_makes_them_again(
    cluster: Cluster, slow_model: DelayedModel
) -> None:
    c = cluster
    load_config(c, config(slow_model))
    slow_model.delay = 3.0
    runs = [start_run(c, "thinker", f"job {i}", index=i % 2) for i in range(RUNS)]
    wait_for(lambda: slow_model.in_flight == RUNS, 30, "every call in flight")
    for proc in c.workers():
        c.kill_worker(proc)
    slow_model.delay = 0.2
    c.start_worker()
    c.start_worker()
    wait_terminal(c, runs, timeout=90)
    assert outputs(c, runs) == {rid: ("completed", "ok") for rid in runs}
    # each call was made once before the kill and once again after it
    assert sorted(slow_model.calls) == sorted(f"job {i}" for i in range(RUNS) for _ in range(2))
    reason = "its worker stopped during a model call; the call is made again"
    for rid in runs:
        events = db_events(c, rid)
        again = [data for _, _, kind, data in events if kind == "run.queued" and data.get("reason")]
        assert again == [{"reason": reason}], events
        assert [kind for _, _, kind, _ in events].count("run.completed") == 1
