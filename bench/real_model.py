"""Figures of the real-model suite (tests/realmodel): latency per model call and calls per run.

Runs the suite in its own pytest process against SmolLM2-135M-Instruct (installed by
`make model-server`), with the suite writing what it saw (every model call's latency from its
request to its recorded answer, its tokens, and the model calls of every run) to a JSON file,
then prints the figures.

    .venv/bin/python bench/real_model.py [-k EXPR] [--figures PATH]

`--figures PATH` reads a file of an earlier run instead of running the suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_suite(path: Path, keyword: str) -> float:
    env = dict(os.environ, CLAWBOARD_REALMODEL_FIGURES=str(path))
    command = [sys.executable, "-m", "pytest", "tests/realmodel", "-p", "no:cacheprovider", "-q"]
    if keyword:
        command += ["-k", keyword]
    started = time.monotonic()
    subprocess.run(command, cwd=ROOT, env=env, check=False)
    return time.monotonic() - started


def report(figures: dict[str, Any]) -> None:
    calls: list[dict[str, Any]] = figures["calls"]
    runs: list[dict[str, Any]] = figures["runs"]
    if not calls:
        print("no model call was recorded")
        return
    seconds = [c["seconds"] for c in calls]
    print(f"model calls: {len(calls)}")
    print(
        "latency per call, s: "
        f"median {statistics.median(seconds):.2f}  p90 {percentile(seconds, 0.9):.2f}  "
        f"max {max(seconds):.2f}  mean {statistics.mean(seconds):.2f}"
    )
    with_tools = [c for c in calls if c["tool_calls"]]
    print(f"calls that called a tool: {len(with_tools)} of {len(calls)}")
    for label, subset in (
        ("that called a tool", with_tools),
        ("that answered in text", [c for c in calls if not c["tool_calls"]]),
    ):
        if subset:
            print(
                f"  {label}: median {statistics.median(c['seconds'] for c in subset):.2f} s, "
                f"input {statistics.median(c['input_tokens'] for c in subset):.0f} tokens, "
                f"output {statistics.median(c['output_tokens'] for c in subset):.0f} tokens (medians)"
            )
    print(f"runs: {len(runs)}")
    by_kind: dict[str, list[int]] = {}
    for run in runs:
        by_kind.setdefault(run["kind"], []).append(run["turns"])
    for kind, turns in sorted(by_kind.items()):
        print(
            f"  {kind}: {len(turns)} runs, calls per run: mean {statistics.mean(turns):.2f}, "
            f"median {statistics.median(turns):.0f}, max {max(turns)}"
        )
    statuses: dict[str, int] = {}
    for run in runs:
        statuses[run["status"]] = statuses.get(run["status"], 0) + 1
    print("run statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(statuses.items())))
    tests: dict[str, list[float]] = {}
    for call in calls:
        tests.setdefault(call["test"], []).append(call["seconds"])
    print("per test: calls, sum of call latencies")
    for test, values in tests.items():
        print(f"  {test}: {len(values)} calls, {sum(values):.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", default="", help="pytest -k expression: run only some tests")
    parser.add_argument("--figures", type=Path, help="print the figures of an earlier run's file")
    args = parser.parse_args()
    if args.figures:
        report(json.loads(args.figures.read_text()))
        return
    path = Path(tempfile.mkdtemp(prefix="clawboard-realmodel-")) / "figures.json"
    wall = run_suite(path, args.k)
    print(f"suite wall time: {wall:.1f} s")
    if not path.exists():
        print("the suite wrote no figures (did it run?)")
        return
    report(json.loads(path.read_text()))


if __name__ == "__main__":
    main()
