"""A small load generator (asyncio + httpx) for the REST API on loopback, in the embedded and
the scale-out mode, at increasing concurrency:

  POST /runs/ wait=60   start a scripted run (one `memory_recall` call, then "done") and wait
                        for it: one request = one whole run, admitted, queued, run by a
                        worker, finished (`[delegate] max_concurrent_runs` at its default, 8)
  GET /runs/{id}/tree/  the tree of a finished run with --tree children (subtree sums)

A closed loop of C clients, each sending its next request when the previous one answered,
for --seconds per level. Printed: throughput, p50/p95/p99 latency, error rate (transport
errors, unexpected HTTP statuses, runs that did not complete within `wait`).

Usage: python bench/load.py [--modes embedded,scale-out] [--concurrency 1,4,16,64]
                            [--seconds 5] [--tree 50]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import table  # noqa: E402
from _servers import (  # noqa: E402
    LOAD_HEADERS,
    Server,
    closed_loop,
    document,
    load_note,
    parse_modes,
    scripted_agent,
    servers,
)

RUN_WAIT = 60


def load_doc(tree: int) -> dict[str, Any]:
    runner = [
        {"turns": [{"tool_calls": [{"name": "memory_recall", "arguments": {"query": "x"}}]}, {"say": "done"}]}
    ]
    spawn = {"name": "spawn_subagent", "arguments": {"prompt": "leaf: work"}}
    turns: list[dict[str, Any]] = [{"tool_calls": [spawn] * min(20, tree - i)} for i in range(0, tree, 20)]
    builder = [{"match": "^leaf:", "turns": [{"say": "ok"}]}, {"turns": [*turns, {"say": "built"}]}]
    return document([scripted_agent("runner", runner), scripted_agent("builder", builder)])


async def levels(server: Server, root: str, concurrency: list[int], seconds: float) -> list[list[Any]]:
    rows: list[list[Any]] = []
    async with server.async_api(max(concurrency)) as api:

        async def start_run(client: int, serial: int) -> str | None:
            answer = await api.post(
                "/runs/", json={"agent": "runner", "prompt": f"load {client}-{serial}", "wait": RUN_WAIT}
            )
            if answer.status_code != 201:
                return f"HTTP {answer.status_code}: {answer.text[:120]}"
            run = answer.json()
            return None if run["status"] == "completed" else f"run {run['status']}: {str(run['error'])[:100]}"

        async def get_tree(client: int, serial: int) -> str | None:
            answer = await api.get(f"/runs/{root}/tree/")
            return None if answer.status_code == 200 else f"HTTP {answer.status_code}"

        for name, request in (
            (f"POST /runs/ wait={RUN_WAIT}", start_run),
            ("GET /runs/{id}/tree/", get_tree),
        ):
            for c in concurrency:
                result = await closed_loop(c, seconds, request)
                rows.append(result.row(name))
                print(
                    f"{server.mode:9s} {name:22s} c={c:3d}: {result.rps:7.1f} req/s, "
                    f"p50 {rows[-1][4]} ms, p99 {rows[-1][6]} ms, errors {result.errors}",
                    flush=True,
                )
                for sample in result.error_samples:
                    print(f"    error: {sample}")
    return rows


def measure(server: Server, concurrency: list[int], seconds: float, tree: int) -> list[list[Any]]:
    server.configure(load_doc(tree))
    root = server.run("builder", "build")
    if root["status"] != "completed":
        raise RuntimeError(f"tree builder {root['status']}: {root['error']}")
    server.run("runner", "warm-up")
    return [[server.mode, *row] for row in asyncio.run(levels(server, root["id"], concurrency, seconds))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default="embedded,scale-out")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each level")
    parser.add_argument("--tree", type=int, default=50, help="children of the tree read by GET /tree/")
    args = parser.parse_args()
    concurrency = [int(c) for c in args.concurrency.split(",") if c.strip()]
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
                rows += measure(server, concurrency, args.seconds, args.tree)
            except Exception:
                print(server.logs(), file=sys.stderr)
                raise
    print()
    print(table(["mode", *LOAD_HEADERS], rows))
    print(f"machine after: {load_note()}")


if __name__ == "__main__":
    main()
