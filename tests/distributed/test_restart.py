"""Restart: stop every process of the cluster in the middle of a tree, start them again.

The tree completes, or ends `lost` where a worker died holding a run (never stuck), and a
websocket that reconnects with the last event id it saw gets exactly the events it missed."""

from __future__ import annotations

import time

import pytest

from tests.distributed.conftest import (
    Cluster,
    WsClient,
    agent,
    audit_trees,
    check_stream,
    db_events,
    fail_on,
    load_config,
    provider,
    run_row,
    start_run,
    wait_terminal,
)

CONFIG = (
    provider(
        "boss",
        [
            {
                "turns": [
                    {
                        "tool_calls": [
                            {
                                "name": "delegate",
                                "arguments": {"parallel": ["left", "right"], "prompt": "dig"},
                            }
                        ]
                    },
                    {"say": "{{tool_results}}"},
                ]
            }
        ],
    )
    + provider(
        "digger",
        [
            {"match": "^deep:", "turns": [{"sleep_ms": 2500}, {"say": "{{agent}} dug {{prompt}}"}]},
            {
                "turns": [
                    {"tool_calls": [{"name": "spawn_subagent", "arguments": {"prompt": "deep: {{prompt}}"}}]},
                    {"sleep_ms": 300},
                    {"say": "{{agent}} found: {{tool_results}}"},
                ]
            },
        ],
    )
    + agent("boss", "scripted.boss")
    + agent("left", "scripted.digger")
    + agent("right", "scripted.digger")
)


def wait_for(c: Cluster, sql: str, params: tuple[object, ...], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not c.q(sql, params)[0][0]:
        assert time.monotonic() < deadline, f"not reached after {timeout}s: {sql}"
        time.sleep(0.05)


@pytest.mark.parametrize("hard", [False, True], ids=["graceful-sigterm", "hard-sigkill"])
def test_stopping_everything_mid_tree_then_starting_again_finishes_the_tree(
    cluster: Cluster, hard: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    c = cluster
    load_config(c, CONFIG)
    root = start_run(c, "boss", "restart", index=0)
    ws = c.websocket(root, after=0, index=1)
    # Mid-tree: both delegates wait on their subagents, which are in their model call.
    wait_for(
        c,
        "SELECT count(*) >= 2 FROM runs_app_run WHERE root_id = %s AND kind = 'subagent' AND status = 'running'",
        (root,),
        timeout=30,
    )
    c.stop_all(hard=hard)
    ws.wait(lambda w: w.closed, timeout=10)
    ws.close()
    before = ws.events()
    last = max((int(e["id"]) for e in before), default=0)

    c.start_all()
    again: WsClient = c.websocket(root, after=last, index=1)
    statuses = wait_terminal(c, [root], timeout=90)
    expected = db_events(c, root)
    again.wait_for_ids({e[0] for e in expected} - {int(e["id"]) for e in before}, timeout=10)
    again.close()

    problems = audit_trees(c, [root])
    problems += check_stream(before + again.events(), expected, "websocket across the restart")
    root_row = run_row(c, root)
    counts = {s: list(statuses.values()).count(s) for s in sorted(set(statuses.values()))}
    with capsys.disabled():
        print(f"\nrestart ({'SIGKILL' if hard else 'SIGTERM'}): root {root_row['status']}, runs {counts}, "
              f"websocket: {len(before)} events before, {len(again.events())} after reconnecting")  # fmt: skip
    if hard:
        # The subagents died with their worker: `lost`; the delegates and the root go on.
        assert set(statuses.values()) <= {"completed", "lost"}, statuses
        assert root_row["status"] in ("completed", "lost"), root_row["error"]
    else:
        # A warm shutdown lets running steps finish; nothing is lost.
        assert set(statuses.values()) == {"completed"}, statuses
        assert root_row["output"] == (
            "[Parallel delegation: 2 agents]\n\n"
            "--- left (success=true) ---\n[Agent 'left' (scripted/digger-1, agentic)]\nleft found: left dug deep: dig\n\n"
            "--- right (success=true) ---\n[Agent 'right' (scripted/digger-1, agentic)]\nright found: right dug deep: dig"
        ), root_row["output"]
    fail_on(problems)
