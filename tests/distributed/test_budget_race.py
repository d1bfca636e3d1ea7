"""The budget race on PostgreSQL (SPEC §3.1): 50 concurrent children against a budget of 20
admit exactly 20, whether the children are asked for by models on two worker processes or by
scripts through two daphne processes."""

from __future__ import annotations

import json
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


# -- the daily cost budget: model calls in flight reserve their worst case ---------------------

TRIALS = 20
RUNS = 50
COST_BUDGET = 100  # cents a day; each call costs exactly its worst case, 10 cents
COST_CONFIG = (
    """
[providers.models.scripted.dear]
model = "dear-1"
max_tokens = 1000
script = [ { turns = [ { sleep_ms = 150 }, { say = "paid", usage = { input = 50, output = 1000 } } ] } ]
[providers.models.scripted.dear.pricing]
input_per_mtok_cents = 0
output_per_mtok_cents = 10000

[runtime_profiles.dear]
"""
    + f"max_cost_per_day_cents = {COST_BUDGET}\n"
    + "".join(agent(f"payer{t}", "scripted.dear", runtime="dear") for t in range(TRIALS))
)

# One trial per agent (each has a tracker, and so a day's budget, of its own): 50 runs queued at
# once, then every one waited for. Run inside the cluster, through the services (REST would
# throttle a user's 1,000 starts).
TRIALS_SCRIPT = """
import json, time
from runs_app.models import Run
from runs_app.services import run_start

TERMINAL = {{"completed", "failed", "cancelled", "timed_out", "lost"}}
for t in range({trials}):
    ids = [run_start(agent=f"payer{{t}}", prompt=f"call {{i}}").pk for i in range({runs})]
    deadline = time.monotonic() + 120
    while Run.objects.filter(pk__in=ids).exclude(status__in=TERMINAL).exists():
        assert time.monotonic() < deadline, f"trial {{t}} did not finish"
        time.sleep(0.1)
    rows = list(Run.objects.filter(pk__in=ids).values_list("status", "error", "turns"))
    print(json.dumps({{"trial": t, "runs": rows}}))
"""


def test_fifty_concurrent_model_calls_never_overshoot_the_daily_cost_budget(cluster: Cluster) -> None:
    c = cluster
    load_config(c, COST_CONFIG)
    out = c.manage(
        "shell", "--no-imports", "-c", TRIALS_SCRIPT.format(trials=TRIALS, runs=RUNS), timeout=1200
    )
    trials = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(trials) == TRIALS, out[-2000:]
    refusal = "Rate limit exceeded: daily cost budget exhausted"
    for trial in trials:
        runs = [tuple(r) for r in trial["runs"]]
        called = [r for r in runs if r[2] == 1]
        assert len(called) == COST_BUDGET // 10, trial  # exactly 10 model calls
        assert all(r[0] == "completed" for r in called), trial
        assert sorted(set(runs) - set(called)) == [("failed", refusal, 0)], trial
    spent = c.q(
        "SELECT t.key, SUM(c.cents), SUM(c.reserved_cents) FROM policies_app_trackercost c"
        " JOIN policies_app_tracker t ON t.id = c.tracker_id WHERE t.key LIKE 'payer%%' GROUP BY t.key"
    )
    assert sorted((str(k), float(s), float(r)) for k, s, r in spent) == sorted(
        (f"payer{t}", float(COST_BUDGET), 0.0) for t in range(TRIALS)
    )
