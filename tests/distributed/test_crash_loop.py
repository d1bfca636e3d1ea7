"""Worker crashes: SIGKILL a worker process while runs are in flight, 20 times, at different
moments, and start a replacement each time.

Afterwards every run must be terminal within 90 s of the last kill that happened during its
life (finished by another worker, or `lost` by the reaper), every tool call whose children
ended must be done, the event log must hold exactly one terminal event per run and no
duplicate, no child may announce twice, and every websocket following a tree must have
received each event of that tree exactly once, in increasing id order (with one reconnection
`after=<last seen id>` at the end, as a browser does, for events whose publication died with
the worker that committed them).

Knobs (environment): CLAWBOARD_CRASH_ITERATIONS (20), CLAWBOARD_CRASH_SEED (random)."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.distributed.conftest import (
    TERMINAL,
    Cluster,
    Proc,
    WsClient,
    agent,
    audit_trees,
    check_stream,
    db_events,
    describe,
    fail_on,
    load_config,
    provider,
    start_run,
    statuses,
)

ITERATIONS = int(os.environ.get("CLAWBOARD_CRASH_ITERATIONS", "20"))
TREES_PER_ITERATION = 2
SETTLE_LIMIT_SECS = 90.0

CONFIG = provider(
    "crash",
    [
        {"match": "^fast:", "turns": [{"sleep_ms": 300}, {"say": "fast {{prompt}}"}]},
        {"match": "^mid:", "turns": [{"sleep_ms": 800}, {"say": "mid {{prompt}}"}]},
        {"match": "^slow:", "turns": [{"sleep_ms": 1500}, {"say": "slow {{prompt}}"}]},
        {"match": "^bg:", "turns": [{"sleep_ms": 1000}, {"say": "bg {{prompt}}"}]},
        {
            "turns": [
                {"sleep_ms": 150},
                {
                    "tool_calls": [
                        {"name": "spawn_subagent", "arguments": {"prompt": "fast: a"}},
                        {"name": "spawn_subagent", "arguments": {"prompt": "mid: b"}},
                        {"name": "spawn_subagent", "arguments": {"prompt": "slow: c"}},
                        {
                            "name": "spawn_subagent",
                            "arguments": {"prompt": "bg: d", "background": True, "label": "bg"},
                        },
                    ]
                },
                {"tool_calls": [{"name": "sessions_yield", "arguments": {}}]},
                {"say": "done: {{tool_results}}"},
            ]
        },
    ],
) + agent("crasher", "scripted.crash")


@dataclass
class Kill:
    iteration: int
    at: float
    delay: float
    victim: str
    in_flight: int


@dataclass
class Followed:
    root_id: str
    ws: WsClient
    extra: list[dict[str, Any]] = field(default_factory=list)


def running_by_pid(c: Cluster) -> dict[int, int]:
    """How many runs each worker process holds right now (owner = host:pid:boot)."""
    counts: dict[int, int] = {}
    for (owner,) in c.q("SELECT owner FROM runs_app_run WHERE status = 'running' AND owner <> ''"):
        parts = str(owner).split(":")
        if len(parts) >= 2 and parts[-2].isdigit():
            counts[int(parts[-2])] = counts.get(int(parts[-2]), 0) + 1
    return counts


def pick_victim(c: Cluster, rng: random.Random) -> tuple[Proc, int]:
    """The worker holding the most running runs (ties: at random)."""
    held = running_by_pid(c)
    workers = c.workers()
    rng.shuffle(workers)
    victim = max(workers, key=lambda p: held.get(p.pid, 0))
    return victim, held.get(victim.pid, 0)


def settle_seconds(c: Cluster, root_ids: list[str], kills: list[Kill]) -> dict[str, float]:
    """Per run that lived through a kill: seconds from the last such kill to its end."""
    rows = c.q(
        "SELECT id, extract(epoch FROM created_at), extract(epoch FROM finished_at) FROM runs_app_run "
        "WHERE root_id = ANY(%s::uuid[])",
        (root_ids,),
    )
    out: dict[str, float] = {}
    for run_id, created, finished in rows:
        if finished is None:
            continue
        during = [k.at for k in kills if float(created) <= k.at < float(finished)]
        if during:
            out[str(run_id)] = float(finished) - max(during)
    return out


def test_sigkill_a_worker_twenty_times_loses_nothing(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    c = cluster
    load_config(c, CONFIG)
    seed = int(os.environ.get("CLAWBOARD_CRASH_SEED", str(random.SystemRandom().randrange(1 << 30))))
    rng = random.Random(seed)
    followed: list[Followed] = []
    kills: list[Kill] = []
    started = time.monotonic()

    for i in range(ITERATIONS):
        for j in range(TREES_PER_ITERATION):
            index = (i + j) % 2
            root_id = start_run(c, "crasher", f"tree {i}.{j}", index=index)
            followed.append(Followed(root_id, c.websocket(root_id, after=0, index=1 - index)))
        # From "just started" to "children half done": a different moment each time.
        delay = 0.1 + (1.9 * i / max(1, ITERATIONS - 1) + rng.uniform(-0.1, 0.1)) % 1.9
        time.sleep(delay)
        victim, in_flight = pick_victim(c, rng)
        at = c.kill_worker(victim)
        kills.append(Kill(i, at, delay, victim.name, in_flight))
        c.start_worker(wait=True)

    roots = [f.root_id for f in followed]
    last_kill = kills[-1].at
    deadline = last_kill + SETTLE_LIMIT_SECS
    while True:
        now = statuses(c, roots)
        if all(s in TERMINAL for s in now.values()) or time.time() > deadline:
            break
        time.sleep(0.5)
    active = [rid for rid, s in now.items() if s not in TERMINAL]

    problems: list[str] = []
    if active:
        problems.append(f"{len(active)} runs not terminal {SETTLE_LIMIT_SECS:.0f}s after the last kill:")
        problems.append(describe(c, active))
    settle = settle_seconds(c, roots, kills)
    late = {rid: s for rid, s in settle.items() if s > SETTLE_LIMIT_SECS}
    if late:
        problems.append(f"runs that took more than {SETTLE_LIMIT_SECS:.0f}s after a kill to end: {late}")
    problems += audit_trees(c, roots)

    failed = c.q(
        "SELECT id, kind, error FROM runs_app_run WHERE root_id = ANY(%s::uuid[]) "
        "AND status NOT IN ('completed', 'lost')",
        (roots,),
    )
    for run_id, kind, error in failed:
        problems.append(f"run {run_id} ({kind}) ended neither completed nor lost: {error[:300]}")

    # Websockets: what arrived live, then one reconnection after the last id seen.
    live_complete = 0
    for f in followed:
        logged = db_events(c, f.root_id)
        expected = [e[0] for e in logged]
        f.ws.wait_for_ids(expected, timeout=3)
        f.ws.close()
        seen = f.ws.events()
        if {int(e["id"]) for e in seen} >= set(expected):
            live_complete += 1
        last = max((int(e["id"]) for e in seen), default=0)
        again = c.websocket(f.root_id, after=last, index=0)
        missed = set(expected) - {int(e["id"]) for e in seen}
        again.wait_for_ids(missed, timeout=5)
        again.close()
        f.extra = again.events()
        problems += check_stream(seen + f.extra, logged, f"websocket of tree {f.root_id}")

    rows = c.q(
        "SELECT status, count(*) FROM runs_app_run WHERE root_id = ANY(%s::uuid[]) GROUP BY status", (roots,)
    )
    by_status = {str(s): int(n) for s, n in rows}
    root_rows = c.q(
        "SELECT status, count(*) FROM runs_app_run WHERE id = ANY(%s::uuid[]) GROUP BY status", (roots,)
    )
    roots_by_status = {str(s): int(n) for s, n in root_rows}
    moved = c.scalar(
        "SELECT count(*) FROM (SELECT run_id FROM runs_app_runevent WHERE root_id = ANY(%s::uuid[]) "
        "AND type = 'run.started' GROUP BY run_id HAVING count(DISTINCT data->>'owner') > 1) x",
        (roots,),
    )
    summary = [
        "",
        f"crash loop summary (seed {seed}, {time.monotonic() - started:.0f}s)",
        f"  {'iterations':<40}{ITERATIONS}",
        f"  {'trees':<40}{len(roots)}  (completed {roots_by_status.get('completed', 0)}, "
        f"lost {roots_by_status.get('lost', 0)})",
        f"  {'runs':<40}{sum(by_status.values())}",
        f"  {'completed':<40}{by_status.get('completed', 0)}",
        f"  {'lost':<40}{by_status.get('lost', 0)}",
        f"  {'other terminal / still active':<40}"
        f"{sum(n for s, n in by_status.items() if s not in ('completed', 'lost'))}",
        f"  {'runs held by the killed worker':<40}{sum(k.in_flight for k in kills)}",
        f"  {'runs continued on another worker':<40}{moved}",
        f"  {'max settle seconds after a kill':<40}{max(settle.values(), default=0.0):.1f}",
        f"  {'websockets complete without resync':<40}{live_complete}/{len(followed)}",
        f"  {'problems':<40}{len(problems)}",
    ]
    with capsys.disabled():
        print("\n".join(summary))
    fail_on(problems)
