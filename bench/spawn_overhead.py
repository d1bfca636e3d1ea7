"""Cost per subagent, end to end through the real engine (runs, events and transcripts
persisted; events published), embedded mode (SQLite + in-process worker).

Workloads, for N = 10, 100, 1000 (median of 5 after a warm-up):
  sequential  a scripted coordinator calls spawn_subagent N times, one call per model turn
  one-turn    the coordinator issues its calls in ONE model turn; spawn_subagent allows at
              most max_children_per_run (≤ 20) active children, so N children come in
              ceil(N/20) turns of 20 calls each
  nested      the coordinator spawns N/10 subagents, each of which spawns 10 (max_spawn_depth=2)

A workload and N is repeated --repeat times, or fewer once its runs took --budget seconds (so
the default run stays within 5 minutes); the table says how many runs each median is of.

Usage: python bench/spawn_overhead.py [--sizes 10,100,1000] [--repeat 5] [--budget 25] [--peers]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import configure_doc, median, peak_rss_mb, setup_django, table, team_doc, wait_terminal  # noqa: E402


def coordinator_doc(kind: str, n: int) -> dict:
    spawn = {"name": "spawn_subagent", "arguments": {"prompt": "child: work"}}
    child_rule = {"match": "^child:", "turns": [{"say": "ok"}]}
    depth = 1
    if kind == "sequential":
        rules = [child_rule, {"turns": [{"tool_calls": [spawn]} for _ in range(n)] + [{"say": "done"}]}]
    elif kind == "one-turn":
        turns = [{"tool_calls": [spawn] * min(20, n - i)} for i in range(0, n, 20)]
        rules = [child_rule, {"turns": turns + [{"say": "done"}]}]
    else:  # nested: N/10 middle subagents, each spawning 10 leaves
        leaf = {"name": "spawn_subagent", "arguments": {"prompt": "leaf: work"}}
        mid = {"name": "spawn_subagent", "arguments": {"prompt": "mid: work"}}
        rules = [
            {"match": "^leaf:", "turns": [{"say": "ok"}]},
            {"match": "^mid:", "turns": [{"tool_calls": [leaf] * 10}, {"say": "mid done"}]},
            {"turns": [{"tool_calls": [mid]} for _ in range(max(1, n // 10))] + [{"say": "done"}]},
        ]
        depth = 2
    doc = team_doc(depth=depth)
    doc["providers"] = {"models": {"scripted": {"coord": {"model": "coord-1", "script": rules}}}}
    doc["agents"] = {
        "coordinator": {
            "model_provider": "scripted.coord",
            "risk_profile": "bench",
            "runtime_profile": "bench",
        }
    }
    return doc


def one_run(kind: str, n: int) -> tuple[float, int]:
    from runs_app.models import Run
    from runs_app.services import run_start

    start = time.perf_counter()
    run = run_start(agent="coordinator", prompt="coordinate")
    run = wait_terminal(run.pk)
    elapsed = time.perf_counter() - start
    if run.status != "completed":
        raise RuntimeError(f"{kind} N={n}: {run.status}: {run.error}")
    children = Run.objects.filter(root_id=run.pk).count() - 1
    return elapsed, children


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--kinds", default="sequential,one-turn,nested")
    parser.add_argument(
        "--budget",
        type=float,
        default=25.0,
        help="seconds of runs per workload and N after which it is not repeated (default 25)",
    )
    parser.add_argument(
        "--peers", action="store_true", help="also run openai-agents / langgraph if installed"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    worker = setup_django()
    rows = []
    results: dict[tuple[str, int], float] = {}
    for kind in args.kinds.split(","):
        for n in sizes:
            configure_doc(coordinator_doc(kind, n))
            one_run(kind, min(n, 10))  # warm-up
            times: list[float] = []
            children = 0
            for _ in range(args.repeat):
                elapsed, children = one_run(kind, n)
                times.append(elapsed)
                if sum(times) > args.budget:  # a big N is not repeated past the time budget
                    break
            per_child = median(times) / max(1, children) * 1000
            results[(kind, n)] = per_child
            rows.append(
                [
                    kind,
                    n,
                    children,
                    len(times),
                    f"{median(times):.3f}",
                    f"{per_child:.2f}",
                    f"{peak_rss_mb():.0f}",
                ]
            )
            print(f"{kind:10s} N={n:5d}: {per_child:.2f} ms per child", flush=True)
    print()
    print("load average (1, 5, 15 min) at the end: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    print(table(["workload", "N", "children", "runs", "median s", "ms/child", "peak RSS MB"], rows))
    for kind in args.kinds.split(","):
        if (kind, sizes[0]) in results and (kind, sizes[-1]) in results:
            ratio = results[(kind, sizes[-1])] / results[(kind, sizes[0])]
            print(f"{kind}: ms/child at N={sizes[-1]} is {ratio:.2f}x the figure at N={sizes[0]}")
    if args.peers:
        from peers import run_peers

        run_peers(sizes, args.repeat, results)
    if worker is not None:
        worker.stop()


if __name__ == "__main__":
    main()
