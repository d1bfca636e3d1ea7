"""Delay of live events (SPEC §9): from an event's commit to its arrival at a websocket client
subscribed to the run tree (`/ws/runs/<root>/`), at about 10, 100 and 500 events per second,
in the embedded and the scale-out mode.

The producer is one scripted run: each model turn makes K `memory_recall` calls (a cheap
local tool), i.e. 2 + 2K events (model.request, model.response, K tool.call, K tool.result),
paced by a `sleep_ms` before each turn. A calibration run first measures the engine's own
time per turn and per call on this machine, so the sleep makes up the rest of each turn's
period; the rate actually achieved is printed beside the target.

Delay = arrival time at the client - the event's `at` (set at insert, just before commit;
the clock is shared on loopback), so it includes the rest of the writer's transaction, the
publish after commit, the channel layer and daphne. Only events written after the socket was
open count for the delay (the run sleeps 2 s first; earlier ones are replayed from the
database). At the end the tree's stored event log is compared with what arrived: lost =
stored but never received, doubled = received more than once, out of order = arrived after
a higher id.

Usage: python bench/live_latency.py [--modes embedded,scale-out] [--rates 10,100,500] [--seconds 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import table  # noqa: E402
from _servers import Server, document, load_note, ms, parse_at, parse_modes, pct, scripted_agent, servers  # noqa: E402

HEADERS = [
    "mode", "target ev/s", "achieved ev/s", "K calls/turn", "sleep ms", "events", "p50 ms", "p95 ms",
    "p99 ms", "max ms", "lost", "doubled", "out of order",
]  # fmt: skip
START_SLEEP_MS = 2000
TURN_PERIOD = 0.2  # seconds per turn aimed at, when the rate allows it
CALIBRATION_K = (1, 40)
CALIBRATION_TURNS = 6


def calls(k: int) -> dict[str, Any]:
    return {"tool_calls": [{"name": "memory_recall", "arguments": {"query": f"q{i}"}} for i in range(k)]}


def pacer_doc(turns: list[dict[str, Any]]) -> dict[str, Any]:
    return document([scripted_agent("pacer", [{"turns": turns}])])


def turn_times(events: list[dict[str, Any]]) -> list[float]:
    """Seconds between successive model.request events of a run."""
    starts = [parse_at(e["at"]) for e in events if e["type"] == "model.request"]
    return [b - a for a, b in zip(starts, starts[1:], strict=False)]


def calibrate(server: Server) -> tuple[float, float]:
    """(seconds per turn besides its calls, seconds per call), from a run without sleeps
    watched by a subscriber (so publishing is part of the cost, as in the measured runs)."""
    k1, k2 = CALIBRATION_K
    turns = [calls(k1)] * CALIBRATION_TURNS + [calls(k2)] * CALIBRATION_TURNS + [{"say": "done"}]
    _, stored, _ = produce(server, [{"sleep_ms": START_SLEEP_MS}, *turns], "calibrate", timeout=120)
    times = turn_times(stored)
    # times[i] is the duration of turn i (0-based; turn 0 holds the start sleep); skip each
    # group's first turn.
    t1 = statistics.median(times[1:CALIBRATION_TURNS])
    t2 = statistics.median(times[CALIBRATION_TURNS + 1 : 2 * CALIBRATION_TURNS])
    per_call = max(0.0, (t2 - t1) / (k2 - k1))
    return max(0.0, t1 - k1 * per_call), per_call


def plan(rate: float, seconds: float, base: float, per_call: float) -> tuple[int, int, int]:
    """(calls per turn, sleep ms per turn, turns) for a target rate."""
    k = max(1, round((rate * TURN_PERIOD - 2) / 2))
    period = (2 + 2 * k) / rate
    sleep_ms = max(0, round((period - base - k * per_call) * 1000))
    turns = max(3, math.ceil(rate * seconds / (2 + 2 * k)))
    return k, sleep_ms, turns


async def subscribe_and_collect(
    server: Server, run_id: str, timeout: float
) -> tuple[list[tuple[float, dict[str, Any]]], float]:
    """Every message of the tree's socket with its arrival time, until the root's terminal
    event has arrived (plus a short grace period for stragglers); and when the socket opened."""
    ws = await server.websocket(run_id, after=0)
    opened = time.time()
    received: list[tuple[float, dict[str, Any]]] = []
    terminal = {"run.completed", "run.failed", "run.cancelled", "run.timed_out", "run.lost"}
    deadline = time.monotonic() + timeout
    grace_until: float | None = None
    try:
        while True:
            now = time.monotonic()
            limit = grace_until if grace_until is not None else deadline
            if now >= limit:
                break
            try:
                text = await asyncio.wait_for(ws.recv(), limit - now)
            except TimeoutError:
                break
            arrived = time.time()
            if text is None:
                break
            event = json.loads(text)
            received.append((arrived, event))
            if event.get("run_id") == run_id and event.get("type") in terminal and grace_until is None:
                grace_until = time.monotonic() + 1.0
    finally:
        await ws.close()
    return received, opened


def produce(
    server: Server, script: list[dict[str, Any]], prompt: str, timeout: float
) -> tuple[list[tuple[float, dict[str, Any]]], list[dict[str, Any]], float]:
    """Run the pacer on this script with a subscriber on its tree: (messages received with
    their arrival time, the stored event log, when the socket opened)."""
    server.configure(pacer_doc(script))
    server.session_cookie()  # logged in before the run starts
    with server.api() as api:
        answer = api.post("/runs/", json={"agent": "pacer", "prompt": prompt, "wait": 0})
        if answer.status_code != 201:
            raise RuntimeError(f"POST /runs/ -> {answer.status_code}: {answer.text[:500]}")
        run_id = answer.json()["id"]
    received, opened = asyncio.run(subscribe_and_collect(server, run_id, timeout=timeout))
    stored = server.events(run_id)
    with server.api() as api:
        run = api.get(f"/runs/{run_id}/").json()
    if run["status"] != "completed":
        raise RuntimeError(f"pacer run {run['status']}: {run['error']}")
    return received, stored, opened


def attempt(server: Server, rate: float, k: int, sleep_ms: int, turns: int, seconds: float) -> dict[str, Any]:
    script: list[dict[str, Any]] = [{"sleep_ms": START_SLEEP_MS}]
    for i in range(turns):
        if i:
            script.append({"sleep_ms": sleep_ms})
        script.append(calls(k))
    script.append({"say": "done"})
    received, stored, opened = produce(server, script, f"rate {rate}", timeout=seconds * 4 + 60)
    counts = Counter(int(e["id"]) for _, e in received)
    out_of_order = 0
    highest = 0
    for _, event in received:
        if int(event["id"]) < highest:
            out_of_order += 1
        highest = max(highest, int(event["id"]))
    live = [(arrived, event) for arrived, event in received if parse_at(event["at"]) >= opened]
    stamps = sorted(parse_at(e["at"]) for _, e in live)
    span = stamps[-1] - stamps[0] if len(stamps) > 1 else 0.0
    return {
        "sleep_ms": sleep_ms,
        "delays": [arrived - parse_at(event["at"]) for arrived, event in live],
        "achieved": (len(stamps) - 1) / span if span > 0 else math.nan,
        "lost": len({int(e["id"]) for e in stored} - set(counts)),
        "doubled": sum(1 for n in counts.values() if n > 1),
        "out_of_order": out_of_order,
        # engine time per turn = the turn's period less its sleep (turn 0 holds the start sleep)
        "engine": statistics.median(turn_times(stored)[1:]) - sleep_ms / 1000,
    }


def one_rate(
    server: Server, mode: str, rate: float, seconds: float, base: float, per_call: float
) -> list[Any]:
    """One paced run at the planned sleep; when the rate achieved is more than 10 % off the
    target, once more with the sleep corrected by the engine time that run showed."""
    k, sleep_ms, turns = plan(rate, seconds, base, per_call)
    result = attempt(server, rate, k, sleep_ms, turns, seconds)
    achieved = result["achieved"]
    period = (2 + 2 * k) / rate
    corrected = max(0, round((period - result["engine"]) * 1000))
    if (
        abs(achieved - rate) > 0.1 * rate
        and corrected != sleep_ms
        and not (achieved < rate and sleep_ms == 0)
    ):
        print(
            f"{mode:9s} target {rate:g}/s: achieved {achieved:.0f}/s with {sleep_ms} ms sleeps; again with {corrected} ms",
            flush=True,
        )
        result = attempt(server, rate, k, corrected, turns, seconds)
    delays = result["delays"]
    row = [
        mode, f"{rate:g}", f"{result['achieved']:.0f}", k, result["sleep_ms"], len(delays), ms(pct(delays, 50)),
        ms(pct(delays, 95)), ms(pct(delays, 99)), ms(max(delays) if delays else math.nan), result["lost"],
        result["doubled"], result["out_of_order"],
    ]  # fmt: skip
    print(
        f"{mode:9s} target {rate:g}/s: achieved {result['achieved']:.0f}/s, p50 {row[6]} ms, p99 {row[8]} ms, "
        f"lost {result['lost']}, doubled {result['doubled']}",
        flush=True,
    )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--modes", default="embedded,scale-out")
    parser.add_argument("--rates", default="10,100,500", help="target events per second")
    parser.add_argument("--seconds", type=float, default=8.0, help="duration of each rate")
    args = parser.parse_args()
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    print(f"machine: {load_note()}")
    rows: list[list[Any]] = []
    notes: list[str] = []
    for mode, server, why in servers(parse_modes(args.modes)):
        if server is None:
            print(f"{mode}: skipped: {why}")
            continue
        started = time.perf_counter()
        with server:
            print(f"{mode}: {server.label}, up in {time.perf_counter() - started:.1f} s", flush=True)
            try:
                base, per_call = calibrate(server)
                note = f"{mode}: engine time per turn {base * 1000:.1f} ms + {per_call * 1000:.2f} ms per memory_recall call"
                print(note, flush=True)
                notes.append(note)
                rows += [one_rate(server, mode, rate, args.seconds, base, per_call) for rate in rates]
            except Exception:
                print(server.logs(), file=sys.stderr)
                raise
    print()
    print(table(HEADERS, rows))
    for note in notes:
        print(note)
    print(f"machine after: {load_note()}")


if __name__ == "__main__":
    main()
