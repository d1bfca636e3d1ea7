"""Throughput of two REST calls at increasing concurrency, over loopback, in the embedded and
the scale-out mode:

  POST /runs/{id}/spawn/   `{prompt, wait: 30}`: spawn_subagent on behalf of a finished run and
                           wait for the child (a scripted "ok"); every client has its own
                           parent run, so max_children_per_run never refuses
  GET  /runs/{id}/         one run

A closed loop of C clients (httpx, one asyncio process, C connections): each sends its next
request when the previous one answered, for --seconds per level. An error is a transport
error, an unexpected HTTP status, or a spawn whose tool result is not a success (e.g. a child
not finished within `wait`, answered 202). The client shares the machine's 2 cores with the
server, so the highest levels also measure the client.

Usage: python bench/api_throughput.py [--modes embedded,scale-out] [--concurrency 1,4,16,64] [--seconds 5]
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

SPAWN_WAIT = 30


def parent_doc() -> dict[str, Any]:
    script = [{"match": "^child:", "turns": [{"say": "ok"}]}, {"turns": [{"say": "ready"}]}]
    return document([scripted_agent("parent", script)])


async def levels(
    server: Server, parents: list[str], concurrency: list[int], seconds: float
) -> list[list[Any]]:
    rows: list[list[Any]] = []
    async with server.async_api(max(concurrency)) as api:

        async def spawn(client: int, serial: int) -> str | None:
            answer = await api.post(
                f"/runs/{parents[client]}/spawn/", json={"prompt": f"child: {serial}", "wait": SPAWN_WAIT}
            )
            if answer.status_code != 200:
                return f"HTTP {answer.status_code}: {answer.text[:120]}"
            body = answer.json()
            return None if body.get("success") else f"tool result: {str(body.get('error'))[:120]}"

        async def get(client: int, serial: int) -> str | None:
            answer = await api.get(f"/runs/{parents[client]}/")
            return None if answer.status_code == 200 else f"HTTP {answer.status_code}"

        for name, request in (("POST /runs/{id}/spawn/ wait", spawn), ("GET /runs/{id}/", get)):
            for c in concurrency:
                result = await closed_loop(c, seconds, request)
                rows.append(result.row(name))
                print(
                    f"{server.mode:9s} {name:28s} c={c:3d}: {result.rps:7.1f} req/s, "
                    f"p50 {rows[-1][4]} ms, p99 {rows[-1][6]} ms, errors {result.errors}",
                    flush=True,
                )
                for sample in result.error_samples:
                    print(f"    error: {sample}")
    return rows


def measure(server: Server, concurrency: list[int], seconds: float) -> list[list[Any]]:
    server.configure(parent_doc())
    parents = [server.run("parent", f"parent {i}")["id"] for i in range(max(concurrency))]
    return [[server.mode, *row] for row in asyncio.run(levels(server, parents, concurrency, seconds))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default="embedded,scale-out")
    parser.add_argument("--concurrency", default="1,4,16,64")
    parser.add_argument("--seconds", type=float, default=5.0, help="duration of each level")
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
                rows += measure(server, concurrency, args.seconds)
            except Exception:
                print(server.logs(), file=sys.stderr)
                raise
    print()
    print(table(["mode", *LOAD_HEADERS], rows))
    print(f"machine after: {load_note()}")


if __name__ == "__main__":
    main()
