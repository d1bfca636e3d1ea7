"""The run engine's key scenarios on a real cluster: two worker processes, two daphne
processes, PostgreSQL and Redis. Every tree is started through REST on one daphne and followed
over a websocket on the other, which must receive every event the workers produced: once,
in increasing id order (so `after=<last id>` is always a safe resume point)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.distributed.conftest import (
    Cluster,
    Watched,
    agent,
    children_of,
    fail_on,
    load_config,
    provider,
    run_row,
    settle_watched,
    start_watched,
    transcript,
    wait_terminal,
)

CONFIG = (
    provider(
        "coord",
        [
            {"match": "^part:", "turns": [{"sleep_ms": 200}, {"say": "did {{prompt}}"}]},
            {"match": "^bg:", "turns": [{"sleep_ms": 600}, {"say": "background {{prompt}} finished"}]},
            {
                "match": "^spawn-background-pair",
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "spawn_subagent",
                                "arguments": {"prompt": "bg: one", "background": True},
                            },
                            {
                                "name": "spawn_subagent",
                                "arguments": {"prompt": "bg: two", "background": True},
                            },
                        ]
                    },
                    {"tool_calls": [{"name": "sessions_yield", "arguments": {}}]},
                    {"say": "both done"},
                ],
            },
            {
                "match": "^event-storm",
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "delegate",
                                "arguments": {"parallel": ["sa", "sb", "sc", "sd"], "prompt": "storm"},
                            }
                        ]
                    },
                    {"say": "storm over"},
                ],
            },
            {
                "match": "^spawn-sync",
                "turns": [
                    {"tool_calls": [{"name": "spawn_subagent", "arguments": {"prompt": "part: outline"}}]},
                    {"say": "summary: {{tool_results}}"},
                ],
            },
            {
                "match": "^spawn-background",
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "spawn_subagent",
                                "arguments": {
                                    "prompt": "bg: changelog",
                                    "background": True,
                                    "label": "changelog",
                                },
                            }
                        ]
                    },
                    {"tool_calls": [{"name": "sessions_yield", "arguments": {}}]},
                    {"say": "after yield: {{tool_results}}"},
                ],
            },
            {
                "match": "^delegate-bounded",
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "delegate",
                                "arguments": {"agent": "reviewer", "prompt": "review the outline"},
                            }
                        ]
                    },
                    {"say": "reviewed: {{tool_results}}"},
                ],
            },
            {
                "match": "^delegate-independent",
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "delegate", "arguments": {"agent": "indie", "prompt": "work alone"}}
                        ]
                    },
                    {"say": "independent: {{tool_results}}"},
                ],
            },
            {
                "match": "^delegate-parallel",
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "delegate",
                                "arguments": {"parallel": ["pa", "pb", "pc", "pd"], "prompt": "go"},
                            }
                        ]
                    },
                    {"say": "{{tool_results}}"},
                ],
            },
            {
                "match": "^delegate-background",
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "delegate",
                                "arguments": {"agent": "pa", "prompt": "slow job", "background": True},
                            }
                        ]
                    },
                    {"say": "started: {{tool_results}}"},
                ],
            },
        ],
    )
    + provider("review", [{"turns": [{"say": "looks fine: {{prompt}}"}]}])
    + provider("indie", [{"turns": [{"sleep_ms": 150}, {"say": "{{agent}} did {{prompt}} on its own"}]}])
    # The parallel targets all sleep the same time, so their ends race on two workers.
    + provider("par", [{"turns": [{"sleep_ms": 400}, {"say": "{{agent}} did {{prompt}}"}]}])
    # Agentic targets that take six quick turns each: many events of one tree, written
    # concurrently by several threads on two workers.
    + provider(
        "storm",
        [
            {
                "turns": [
                    *[{"tool_calls": [{"name": "file_list", "arguments": {"path": "."}}]}] * 5,
                    {"say": "calm"},
                ]
            }
        ],
    )
    + provider(
        "ops",
        [
            {
                "match": "^child:",
                "turns": [
                    {"tool_calls": [{"name": "shell", "arguments": {"command": "echo child ran"}}]},
                    {"say": "child report: {{tool_results}}"},
                ],
            },
            {
                "match": "^with-child",
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "spawn_subagent", "arguments": {"prompt": "child: check the disk"}}
                        ]
                    },
                    {"say": "parent got: {{tool_results}}"},
                ],
            },
            {
                "turns": [
                    {"tool_calls": [{"name": "shell", "arguments": {"command": "echo disk ok"}}]},
                    {"say": "ops report: {{tool_results}}"},
                ],
            },
        ],
    )
    + """
[risk_profiles.solo]
allowed_commands = ["*"]
[risk_profiles.solo.delegation_policy]
mode = "forbidden"

[risk_profiles.gated]
level = "full"
allowed_commands = ["echo"]
always_ask = ["shell"]
[risk_profiles.gated.delegation_policy]
mode = "forbidden"
"""
    + agent("coordinator", "scripted.coord", delegates=[{"agent": "indie", "mode": "independent"}])
    + agent("reviewer", "scripted.review", runtime="oneshot")
    + agent("indie", "scripted.indie", risk="solo")
    + "".join(agent(name, "scripted.par", runtime="oneshot") for name in ("pa", "pb", "pc", "pd"))
    + "".join(agent(name, "scripted.storm") for name in ("sa", "sb", "sc", "sd"))
    + agent("ops", "scripted.ops", risk="gated")
)
ROUNDS = 4
TREES_PER_ROUND = 6


@pytest.fixture(scope="module")
def c(cluster: Cluster) -> Cluster:
    load_config(cluster, CONFIG)
    return cluster


def test_sync_spawn_returns_the_child_text_across_workers(c: Cluster) -> None:
    tree = start_watched(c, "coordinator", "spawn-sync: plan the release")
    fail_on(settle_watched(c, [tree]))
    root = run_row(c, tree.root_id)
    assert root["status"] == "completed", root["error"]
    assert root["output"] == "summary: did part: outline"
    (child,) = children_of(c, tree.root_id)
    assert (child["kind"], child["execution"], child["output"]) == ("subagent", "sync", "did part: outline")


def test_background_spawn_announces_once_and_wakes_the_yielding_parent(c: Cluster) -> None:
    tree = start_watched(c, "coordinator", "spawn-background: collect")
    fail_on(settle_watched(c, [tree]))
    root = run_row(c, tree.root_id)
    assert root["status"] == "completed", root["error"]
    assert root["output"] == "after yield: All background subagents have finished."
    (child,) = children_of(c, tree.root_id)
    assert child["execution"] == "background" and child["status"] == "completed"
    announces = [
        text for role, text in transcript(c, tree.root_id) if text.startswith("[Subagent completion]")
    ]
    assert len(announces) == 1, announces
    assert f"session_key: subagent-{child['id']}\ntask: changelog\nstatus: completed\n" in announces[0]
    assert "background bg: changelog finished" in announces[0]


def test_bounded_delegate_answers_with_the_target_header(c: Cluster) -> None:
    tree = start_watched(c, "coordinator", "delegate-bounded: check")
    fail_on(settle_watched(c, [tree]))
    root = run_row(c, tree.root_id)
    assert (
        root["output"] == "reviewed: [Agent 'reviewer' (scripted/review-1)]\nlooks fine: review the outline"
    )
    (child,) = children_of(c, tree.root_id)
    assert (child["kind"], child["mode"], child["tracker_key"]) == ("delegate", "bounded", "coordinator")


def test_independent_delegate_runs_under_its_own_agent(c: Cluster) -> None:
    tree = start_watched(c, "coordinator", "delegate-independent: go")
    fail_on(settle_watched(c, [tree]))
    root = run_row(c, tree.root_id)
    assert root["output"] == (
        "independent: [Agent 'indie' (scripted/indie-1, agentic)]\nindie did work alone on its own"
    ), root["error"]
    (child,) = children_of(c, tree.root_id)
    assert (child["mode"], child["tracker_key"]) == ("independent", "indie")


def race_rounds(
    c: Cluster,
    prompt: str,
    check: Callable[[Watched], str | None],
    rounds: int = ROUNDS,
    trees_per_round: int = TREES_PER_ROUND,
) -> list[str]:
    """Several trees at once, a few rounds: problems of the first round that has any."""
    for r in range(rounds):
        trees = [start_watched(c, "coordinator", f"{prompt} {r}.{i}") for i in range(trees_per_round)]
        problems = settle_watched(c, trees, timeout=30)
        problems += [p for p in (check(t) for t in trees) if p]
        if problems:
            return [f"round {r + 1} of {rounds}:", *problems]
    return []


def test_parallel_delegates_settle_their_call_once_when_they_end_together(c: Cluster) -> None:
    """Four targets end at the same moment on two workers, in several trees at once: the
    parent's tool call must be completed exactly once, whichever child commits last."""
    expected = "[Parallel delegation: 4 agents]\n\n" + "\n\n".join(
        f"--- {n} (success=true) ---\n[Agent '{n}' (scripted/par-1)]\n{n} did go"
        for n in ("pa", "pb", "pc", "pd")
    )

    def check(tree: Watched) -> str | None:
        root = run_row(c, tree.root_id)
        if root["output"] != expected:
            return f"tree {tree.root_id}: {root['status']} {root['output'][:200]!r} {root['error']!r}"
        return None

    fail_on(race_rounds(c, "delegate-parallel:", check))


def test_a_yield_ends_when_two_background_children_end_together(c: Cluster) -> None:
    """Two background subagents end at the same moment: the parent's sessions_yield must be
    completed whichever announce commits last."""

    def check(tree: Watched) -> str | None:
        root = run_row(c, tree.root_id)
        announces = [t for _, t in transcript(c, tree.root_id) if t.startswith("[Subagent completion]")]
        if root["output"] != "both done" or len(announces) != 2:
            return f"tree {tree.root_id}: {root['status']} {root['output']!r}, {len(announces)} announces"
        return None

    fail_on(race_rounds(c, "spawn-background-pair:", check))


def test_every_event_of_a_busy_tree_reaches_the_websocket_in_order(c: Cluster) -> None:
    """Four agentic delegates of one tree take quick turns on two workers at once: their events
    commit in an order that is not their id order, and the websocket must still carry each
    event once, in increasing id order, none skipped."""

    def check(tree: Watched) -> str | None:
        root = run_row(c, tree.root_id)
        ok = root["output"] == "storm over"
        return None if ok else f"tree {tree.root_id}: {root['status']} {root['error']!r}"

    fail_on(race_rounds(c, "event-storm:", check, rounds=2, trees_per_round=4))


def test_a_websocket_on_a_quiet_tree_stays_open(c: Cluster) -> None:
    """Nothing happens on a finished tree: its websocket must stay open (and quiet), not be
    closed by the server when the channel layer's blocking read times out."""
    tree = start_watched(c, "coordinator", "spawn-sync: then nothing")
    fail_on(settle_watched(c, [tree]))
    ws = c.websocket(tree.root_id, after=0, index=1)
    ws.wait(lambda w: w.closed, timeout=12)
    closed, code = ws.closed, ws.close_code
    ws.close()
    assert not closed, f"the server closed an idle websocket after less than 12 s (close code {code})"


def test_background_delegate_result_is_awaited_through_rest(c: Cluster) -> None:
    tree = start_watched(c, "coordinator", "delegate-background: go")
    wait_terminal(c, [tree.root_id], 30)
    (child,) = children_of(c, tree.root_id)
    task_id = str(child["id"])
    with c.api(1) as api:
        answer = api.post("/results/await/", json={"task_ids": [task_id], "timeout_ms": 20000})
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert body["success"] is True, body
        assert json.loads(body["output"])["status"] == "complete"
        detail = api.get(f"/results/{task_id}/").json()
    assert json.loads(detail["output"])["output"] == "[Agent 'pa' (scripted/par-1)]\npa did slow job"
    fail_on(settle_watched(c, [tree]))
    root = run_row(c, tree.root_id)
    assert root["output"].startswith("started: Background task started for agent 'pa'.\ntask_id: ")
    mirror = Path(root["workspace"]) / "delegate_results" / f"{task_id}.json"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and json.loads(mirror.read_text() or "{}").get("status") != "completed":
        time.sleep(0.1)
    assert json.loads(mirror.read_text())["status"] == "completed"


def _pending_approvals(c: Cluster, root_ids: set[str]) -> list[dict[str, object]]:
    with c.api(0) as api:
        answer = api.get("/approvals/", params={"status": "pending"})
    assert answer.status_code == 200, answer.text
    return [a for a in answer.json() if a["root_id"] in root_ids]


def _decide_all(c: Cluster, trees: list[Watched], expected: int, *, approve: bool) -> None:
    """Decide every approval of these trees (through daphne 1) until `expected` were decided."""
    roots = {t.root_id for t in trees}
    decided: set[object] = set()
    deadline = time.monotonic() + 30
    while len(decided) < expected:
        assert time.monotonic() < deadline, f"only {len(decided)} of {expected} approvals were requested"
        for approval in _pending_approvals(c, roots):
            with c.api(1) as api:
                if approve:
                    answer = api.post(f"/approvals/{approval['id']}/approve/")
                else:
                    answer = api.post(f"/approvals/{approval['id']}/deny/", json={"reason": "not today"})
            assert answer.status_code == 200, answer.text
            decided.add(approval["id"])
        time.sleep(0.2)


def test_approvals_decided_through_one_daphne_resume_runs_on_the_workers(c: Cluster) -> None:
    top = start_watched(c, "ops", "disk: check")
    nested = start_watched(c, "ops", "with-child: check")
    _decide_all(c, [top, nested], expected=2, approve=True)
    fail_on(settle_watched(c, [top, nested]))
    assert run_row(c, top.root_id)["output"] == "ops report: disk ok"
    (child,) = children_of(c, nested.root_id)
    assert child["output"] == "child report: child ran"
    assert run_row(c, nested.root_id)["output"] == "parent got: child report: child ran"


def test_a_denied_approval_gives_the_model_the_operator_reason(c: Cluster) -> None:
    tree = start_watched(c, "ops", "disk: check")
    _decide_all(c, [tree], expected=1, approve=False)
    fail_on(settle_watched(c, [tree]))
    assert run_row(c, tree.root_id)["output"] == "ops report: Error: Tool call denied by operator: not today"
