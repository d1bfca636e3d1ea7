"""The budget race on PostgreSQL (SPEC §3.1): 50 concurrent children against a budget of 20
admit exactly 20, whether the children are asked for by models on two worker processes or by
scripts through two daphne processes."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.distributed.conftest import Cluster, agent, load_config, provider, start_run, wait_terminal

BUDGET = 20
CHILDREN = 50
REFUSAL = "Rate limit exceeded: action budget exhausted"

CONFIG = (
    provider(
        "race",
        [
            {"match": "^child:", "turns": [{"say": "child did {{prompt}}"}]},
            {
                "match": "^racer",
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "spawn_subagent", "arguments": {"prompt": "child: {{prompt}}"}}
                        ]
                    },
                    {"say": "{{tool_results}}"},
                ],
            },
            {"turns": [{"say": "{{agent}}: {{prompt}}"}]},
        ],
    )
    + f"""
[runtime_profiles.tight]
agentic = true
max_actions_per_hour = {BUDGET}
max_children_per_run = 20
"""
    + agent("racer", "scripted.race", runtime="tight")
    + agent("scripter", "scripted.race", runtime="tight")
    + agent("target", "scripted.race", runtime="oneshot")
)


def actions_recorded(c: Cluster, key: str) -> int:
    sql = (
        "SELECT count(*) FROM policies_app_trackeraction a JOIN policies_app_tracker t ON t.id = a.tracker_id "
        "WHERE t.key = %s"
    )
    return int(c.scalar(sql, (key,)))


def test_fifty_model_spawns_on_two_workers_admit_exactly_the_budget(cluster: Cluster) -> None:
    c = cluster
    load_config(c, CONFIG)
    with ThreadPoolExecutor(max_workers=10) as pool:
        roots = list(pool.map(lambda i: start_run(c, "racer", f"racer {i}", index=i % 2), range(CHILDREN)))
    wait_terminal(c, roots, timeout=120)
    children = c.scalar("SELECT count(*) FROM runs_app_run WHERE parent_id = ANY(%s::uuid[])", (roots,))
    outputs = [str(r[0]) for r in c.q("SELECT output FROM runs_app_run WHERE id = ANY(%s::uuid[])", (roots,))]
    assert children == BUDGET
    assert sum(o.startswith("child did child: racer") for o in outputs) == BUDGET, outputs
    assert sum(o == f"Error: {REFUSAL}" for o in outputs) == CHILDREN - BUDGET, outputs
    assert actions_recorded(c, "racer") == BUDGET


def test_fifty_concurrent_rest_delegations_through_two_daphnes_admit_exactly_the_budget(
    cluster: Cluster,
) -> None:
    c = cluster
    load_config(c, CONFIG)
    parent = start_run(c, "scripter", "hold the budget")
    wait_terminal(c, [parent], timeout=30)

    def delegate(i: int) -> tuple[int, dict[str, object]]:
        with c.api(i % 2) as api:
            answer = api.post(
                f"/runs/{parent}/delegate/",
                json={"agent": "target", "prompt": f"job {i}", "background": True, "wait": 0},
            )
        return answer.status_code, answer.json()

    with ThreadPoolExecutor(max_workers=CHILDREN) as pool:
        answers = list(pool.map(delegate, range(CHILDREN)))
    accepted = [body for code, body in answers if code == 202]
    refused = [body for code, body in answers if code == 429]
    assert len(accepted) == BUDGET, answers
    assert len(refused) == CHILDREN - BUDGET, answers
    assert all(body["error"] == REFUSAL for body in refused)
    started = "Background task started for agent 'target'."
    assert all(str(body["output"]).startswith(started) for body in accepted)
    children = [str(r[0]) for r in c.q("SELECT id FROM runs_app_run WHERE parent_id = %s", (parent,))]
    assert sorted(children) == sorted(str(body["run_id"]) for body in accepted)
    assert actions_recorded(c, "scripter") == BUDGET
    wait_terminal(c, [parent], timeout=60)
    done = c.scalar(
        "SELECT count(*) FROM runs_app_run WHERE parent_id = %s AND status = 'completed'", (parent,)
    )
    assert done == BUDGET
