"""A model that takes its time, with the documented defaults (docs/deployment.md: two workers
with `-P threads -c 4`, `CLAWBOARD_DB_POOL_MAX` unset, `[delegate].max_concurrent_runs = 8`):
one run spawns 20 children in one turn through the OpenAI-compatible provider, over real HTTP,
against a local server that answers every call after 500 ms. Every child and the root complete
(issue 18: with `-c 64` and a fixed pool of 10 this tree stalled). No timing is asserted.

And a worker whose explicit pool is smaller than its threads need refuses to start."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

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
from tests.distributed.model_server import DelayedModel

DELAY = 0.5
CHILDREN = 20


@pytest.fixture(scope="module")
def model() -> Iterator[DelayedModel]:
    server = DelayedModel(DELAY)
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
    assert len(model.calls) >= CHILDREN + 2  # every child's call and the root's two went over HTTP


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
