"""Cost of fanning out with `delegate` (SPEC §6), end to end through a running server, in the
embedded mode (SQLite, daphne + in-process worker) and the scale-out mode (PostgreSQL, Redis,
2 celery workers x 4 threads, 1 daphne). Offline: every agent is scripted.

Workloads (each target answers "ok" in one model call: a non-agentic delegate):
  parallel-10    a coordinator's one `delegate` call with `parallel` over 10 agents, then "done"
  parallel-100   the same over 100 agents
  background-100 100 `delegate` calls with `background: true` through
                 `POST /runs/{id}/delegate/`, then one `await_sessions` over the 100 task ids
                 (a scripted model cannot copy task ids from one turn into the next, so a
                 client plays the coordinator here)

Reported per workload (median of --repeat after one warm-up): wall time seen by the client,
the same divided by the number of children (per-child cost), and the server's own span
(root created -> root finished for parallel; first child created -> last child finished for
background); for background, also the time the client spent on the 100 sequential admissions
(children start running while later ones are admitted). `[delegate] max_concurrent_runs` stays at its default, 8: children beyond it wait
`queued`, as in a real deployment.

Usage: python bench/delegate_fanout.py [--modes embedded,scale-out] [--sizes 10,100]
                                       [--background 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import table  # noqa: E402
from _servers import Server, document, load_note, parse_at, parse_modes, scripted_agent, servers  # noqa: E402

HEADERS = ["mode", "workload", "children", "admission s", "wall s", "ms/child", "server s", "server ms/child"]


def fanout_doc(sizes: list[int], agents: int) -> dict[str, Any]:
    names = [f"w{i:03d}" for i in range(agents)]
    rules: list[dict[str, Any]] = [
        {
            "match": f"^fan{n}$",
            "turns": [
                {
                    "tool_calls": [
                        {"name": "delegate", "arguments": {"parallel": names[:n], "prompt": "work"}}
                    ]
                },
                {"say": "done"},
            ],
        }
        for n in sizes
    ]
    rules.append({"turns": [{"say": "ready"}]})
    entries = [scripted_agent("coord", rules)]
    entries += [scripted_agent(name, [{"turns": [{"say": "ok"}]}], runtime="") for name in names]
    return document(entries)


def tree_children(server: Server, root_id: str) -> list[dict[str, Any]]:
    with server.api() as api:
        return list(api.get(f"/runs/{root_id}/tree/").json()["children"])


def parallel_once(server: Server, n: int) -> tuple[float, float, float, int]:
    start = time.perf_counter()
    run = server.run("coord", f"fan{n}")
    wall = time.perf_counter() - start
    if run["status"] != "completed":
        raise RuntimeError(f"parallel-{n}: {run['status']}: {run['error']}")
    children = tree_children(server, run["id"])
    bad = [c for c in children if c["status"] != "completed"]
    if len(children) != n or bad:
        raise RuntimeError(f"parallel-{n}: {len(children)} children, {len(bad)} not completed")
    return wall, parse_at(run["finished_at"]) - parse_at(run["created_at"]), 0.0, len(children)


def background_once(server: Server, caller_id: str, n: int) -> tuple[float, float, float, int]:
    ids: list[str] = []
    with server.api() as api:
        start = time.perf_counter()
        for i in range(n):
            answer = api.post(
                f"/runs/{caller_id}/delegate/",
                json={"agent": f"w{i:03d}", "prompt": "work", "background": True},
            )
            body = answer.json()
            if answer.status_code not in (200, 202) or not body.get("run_id"):
                raise RuntimeError(f"background delegate {i}: {answer.status_code} {body}")
            ids.append(body["run_id"])
        admission = time.perf_counter() - start
        answer = api.post(
            f"/runs/{caller_id}/delegate/",
            json={"action": "await_sessions", "task_ids": ids, "timeout_ms": 120000},
        )
        wall = time.perf_counter() - start
        body = answer.json()
        if answer.status_code != 200 or not body.get("success"):
            raise RuntimeError(f"await_sessions: {answer.status_code} {str(body)[:500]}")
        children = [api.get(f"/runs/{rid}/").json() for rid in ids]
    first = min(parse_at(c["created_at"]) for c in children)
    last = max(parse_at(c["finished_at"]) for c in children)
    return wall, last - first, admission, len(children)


def measure(server: Server, mode: str, sizes: list[int], background: int, repeat: int) -> list[list[Any]]:
    server.configure(fanout_doc(sizes, max(sizes + [background])))
    parallel_once(server, min(sizes))  # warm-up: imports, caches, connections
    caller = server.run("coord", "caller")["id"]
    rows: list[list[Any]] = []
    workloads: list[tuple[str, Any]] = [
        (f"parallel-{n}", lambda n=n: parallel_once(server, n)) for n in sizes
    ]
    if background:
        workloads.append((f"background-{background}", lambda: background_once(server, caller, background)))
    for name, once in workloads:
        walls: list[float] = []
        spans: list[float] = []
        admissions: list[float] = []
        children = 0
        for _ in range(repeat):
            wall, span, admission, children = once()
            walls.append(wall)
            spans.append(span)
            admissions.append(admission)
        wall, span, admission = (statistics.median(v) for v in (walls, spans, admissions))
        rows.append(
            [
                mode,
                name,
                children,
                f"{admission:.3f}" if admission else "-",
                f"{wall:.3f}",
                f"{wall / children * 1000:.1f}",
                f"{span:.3f}",
                f"{span / children * 1000:.1f}",
            ]
        )
        print(f"{mode:9s} {name:15s} {wall:.3f} s, {wall / children * 1000:.1f} ms per child", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default="embedded,scale-out")
    parser.add_argument("--sizes", default="10,100", help="parallel fan-out sizes")
    parser.add_argument("--background", type=int, default=100, help="background delegations (0 = skip)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    if args.background > 128:
        raise SystemExit("--background is at most 128 ([delegate] max_background and await_sessions' limit)")
    print(f"machine: {load_note()}")
    rows: list[list[Any]] = []
    for mode, server, why in servers(parse_modes(args.modes)):
        if server is None:
            print(f"{mode}: skipped: {why}")
            continue
        started = time.perf_counter()
        with server:
            print(f"{mode}: {server.label}, up in {time.perf_counter() - started:.1f} s", flush=True)
            try:
                rows += measure(server, mode, sizes, args.background, args.repeat)
            except Exception:
                print(server.logs(), file=sys.stderr)
                raise
    print()
    print(table(HEADERS, rows))
    print(f"machine after: {load_note()}")


if __name__ == "__main__":
    main()
