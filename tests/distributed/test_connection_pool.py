"""Each server process borrows database connections from a pool of its own (settings,
CLAWBOARD_DB_POOL_MAX), and a request that waits gives its connection back while it waits
(runs_app/live.py). So many waiting requests cost a process no more connections than its
pool, where they used to cost one each and ran PostgreSQL out of connections (HTTP 500).

A daphne with a pool of 3 answers 24 requests that wait at the same time; its connections are
counted in pg_stat_activity by the application name it connects under."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.distributed.conftest import Cluster, agent, load_config, provider

POOL = 3
REQUESTS = 24
APP = "clawboard-pool-test"

CONFIG = provider("doze", [{"turns": [{"sleep_ms": 1500}, {"say": "rested"}]}]) + agent(
    "dozer", "scripted.doze"
)


@pytest.fixture(scope="module")
def pooled_daphne(cluster: Cluster) -> Iterator[tuple[Cluster, int]]:
    load_config(cluster, CONFIG)
    sep = "&" if "?" in cluster.db_url else "?"
    env = {"CLAWBOARD_DB_POOL_MAX": str(POOL), "DATABASE_URL": f"{cluster.db_url}{sep}application_name={APP}"}
    with cluster.extra_daphne(env) as index:
        yield cluster, index


def connections_of_app(c: Cluster) -> int:
    return int(c.q("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [APP])[0][0])


def test_many_waiting_requests_share_a_small_pool(pooled_daphne: tuple[Cluster, int]) -> None:
    c, index = pooled_daphne
    answers: list[httpx.Response | BaseException] = []
    peak = 0
    done = threading.Event()

    def ask() -> None:
        try:
            with c.api(index) as api:
                api.timeout = httpx.Timeout(120)
                answers.append(api.post("/runs/", json={"agent": "dozer", "prompt": "nap", "wait": 90}))
        except BaseException as exc:  # reported below with the others
            answers.append(exc)

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, connections_of_app(c))
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    threads = [threading.Thread(target=ask) for _ in range(REQUESTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(150)
    done.set()
    watcher.join(5)

    failures: list[Any] = [a for a in answers if not isinstance(a, httpx.Response) or a.status_code != 201]
    assert len(answers) == REQUESTS and not failures, failures[:3]
    assert all(a.json()["status"] == "completed" for a in answers if isinstance(a, httpx.Response))
    assert 1 <= peak <= POOL, f"{peak} connections for a pool of {POOL}"
