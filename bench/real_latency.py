"""Keeping pace with a real model's latency: Clawboard's OpenAI-compatible provider over real
HTTP against a local OpenAI-compatible server that answers every call after a fixed delay
(`bench/_model_server.py`, asyncio, keep-alive), beside two peers on the same server.

Workloads (ideal = model turns on the critical path x delay):
  fanout20        one run spawns 20 children in one turn              ideal 3 x delay
  top200          200 top-level runs started at once                  ideal 1 x delay
  top200-200ms    the same, the model at 200 ms                       ideal 0.2 s
  chain10-200ms   10 children one per turn, the model at 200 ms       ideal 21 x 0.2 s
  top1000         1,000 top-level runs started at once                ideal 1 x delay

Systems:
  clawboard-embedded   in-process, like spawn_overhead.py: SQLite and the embedded worker with
                       its default threads (CLAWBOARD_WORKERS, 4); runs started with run_start
  clawboard-scale-out  2 `celery worker -P threads -c 4` processes, PostgreSQL and Redis on
                       127.0.0.1, one daphne (bench/_servers.py); runs started over REST
  openai-agents        (--peers) `OpenAIChatCompletionsModel` on an `AsyncOpenAI`; the child is
                       a function tool that runs a child Agent; runs gathered on one loop
  langgraph            (--peers) `create_react_agent` on langchain-openai's `ChatOpenAI`; the
                       child is an async tool that runs a child graph

Clawboard's configuration is the benchmark's profiles (bench/_servers.py: actions, cost and
iterations never get in the way) with `[delegate].max_concurrent_runs` raised to 1,000 and
`max_children_per_run` to 20; the provider is `[providers.models.openai.bench]` with its `uri`
on the server. Every other setting is the default.

Each (system, workload) runs in a child process of its own, so the peak RSS is that system's;
the model server runs in this process, so it never competes with the system for the GIL. A
workload runs --repeat times (median), fewer once its runs took --budget seconds. Printed per
system and workload: wall time, ideal time, wall/ideal, the server's maximum of chat requests
in flight at once, the child's peak RSS (scale-out: the larger worker's), and the 1-minute load
average when it ended. Nothing is asserted.

Usage: python bench/real_latency.py [--delay-ms 1000] [--workloads fanout20,top200,...]
       [--modes embedded,scale-out] [--repeat 3] [--budget 120] [--peers]
Needs the `bench` extra for --peers: pip install -e ".[bench]"
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import table  # noqa: E402
from _model_server import ModelServer  # noqa: E402
from _servers import bench_profiles, load_note, scale_out_problem  # noqa: E402

MAX_CONCURRENT_RUNS = 1000
MODEL = "bench-model"
RUN_TIMEOUT = 1800.0


@dataclass(frozen=True)
class Workload:
    name: str
    title: str
    roots: int
    prompt: str
    turns: int  # model turns on the critical path
    children: int  # per root
    delay_ms: float | None = None  # None: --delay-ms

    def delay(self, default_ms: float) -> float:
        return self.delay_ms if self.delay_ms is not None else default_ms


WORKLOADS = {
    w.name: w
    for w in (
        Workload("fanout20", "one run spawns 20 children in one turn", 1, "fanout:20 coordinate", 3, 20),
        Workload("top200", "200 top-level runs started at once", 200, "answer", 1, 0),
        Workload("top200-200ms", "200 top-level runs, model at 200 ms", 200, "answer", 1, 0, 200),
        Workload(
            "chain10-200ms",
            "10 children one per turn, model at 200 ms",
            1,
            "chain:10 coordinate",
            21,
            10,
            200,
        ),
        Workload("top1000", "1,000 top-level runs started at once", 1000, "answer", 1, 0),
    )
}
PEERS = {"openai-agents": ("agents", "openai"), "langgraph": ("langgraph", "langchain_openai")}
INSTALL_HINT = 'pip install -e ".[bench]"'


# -- the model server's control endpoints ---------------------------------------------------------


def reset(url: str, delay_ms: float) -> None:
    httpx.post(f"{url}/bench/reset", json={"delay_ms": delay_ms}, timeout=10).raise_for_status()


def max_in_flight(url: str) -> int:
    return int(httpx.get(f"{url}/bench/stats", timeout=10).json()["max_in_flight"])


def measure(url: str, delay_ms: float, repeat: int, budget: float, once: Any) -> dict[str, Any]:
    """Warm up once with no delay, then `once()` up to `repeat` times; times and peaks."""
    reset(url, 0)
    once()
    times: list[float] = []
    peaks: list[int] = []
    while len(times) < repeat and sum(times) < budget:
        reset(url, delay_ms)
        start = time.perf_counter()
        once()
        times.append(time.perf_counter() - start)
        peaks.append(max_in_flight(url))
    return {"times": times, "peaks": peaks}


def own_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- Clawboard --------------------------------------------------------------------------------------


def clawboard_doc(url: str) -> dict[str, Any]:
    doc = bench_profiles(max_children=20, max_concurrent_runs=MAX_CONCURRENT_RUNS)
    doc["providers"] = {"models": {"openai": {"bench": {"model": MODEL, "uri": f"{url}/v1"}}}}
    doc["agents"] = {
        "bench": {"model_provider": "openai.bench", "risk_profile": "bench", "runtime_profile": "bench"}
    }
    return doc


def check_clawboard(workload: Workload, statuses: list[str], children: int) -> None:
    bad = [s for s in statuses if s != "completed"]
    if bad:
        raise RuntimeError(f"{workload.name}: {len(bad)} root run(s) ended {sorted(set(bad))}")
    if children != workload.children * workload.roots:
        raise RuntimeError(
            f"{workload.name}: {children} children, expected {workload.children * workload.roots}"
        )


def clawboard_embedded(
    workload: Workload, url: str, delay_ms: float, repeat: int, budget: float
) -> dict[str, Any]:
    from _harness import configure_doc, setup_django

    worker = setup_django(workers=int(os.environ.get("CLAWBOARD_WORKERS", "4")))
    from asgiref.sync import async_to_sync

    from runs_app import live
    from runs_app.models import Run
    from runs_app.services import run_start

    configure_doc(clawboard_doc(url))
    first = [True]

    def once() -> None:
        roots = 1 if first[0] else workload.roots  # the warm-up is one run
        ids = [run_start(agent="bench", prompt=workload.prompt).pk for _ in range(roots)]
        async_to_sync(live.wait_terminal)(ids, RUN_TIMEOUT)
        if not first[0]:
            statuses = list(Run.objects.filter(pk__in=ids).values_list("status", flat=True))
            children = Run.objects.filter(root_id__in=ids).exclude(pk__in=ids).count()
            check_clawboard(workload, statuses, children)
        first[0] = False

    result = measure(url, delay_ms, repeat, budget, once)
    result["rss_mb"] = own_rss_mb()
    if worker is not None:
        worker.stop()
    return result


def _vm_hwm_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def clawboard_scale_out(
    workload: Workload, url: str, delay_ms: float, repeat: int, budget: float
) -> dict[str, Any]:
    from _servers import Server

    server = Server("scale-out", workers=2)
    with server:
        server.configure(clawboard_doc(url))
        first = [True]

        def count(api: httpx.Client, **filters: str) -> int:
            return int(api.get("/runs/", params={**filters, "limit": 1}).json()["count"])

        async def start_all(roots: int) -> None:
            # wait=0 over a few connections: daphne drops a burst of hundreds of connections.
            async with server.async_api(connections=32, timeout=120) as api:

                async def one() -> None:
                    answer = await api.post(
                        "/runs/", json={"agent": "bench", "prompt": workload.prompt, "wait": 0}
                    )
                    if answer.status_code != 201:
                        raise RuntimeError(f"POST /runs/ -> {answer.status_code}: {answer.text[:500]}")

                await asyncio.gather(*(one() for _ in range(roots)))

        def once() -> None:
            roots = 1 if first[0] else workload.roots
            with server.api(timeout=60) as api:
                children_before = count(api, kind="subagent")
                asyncio.run(start_all(roots))
                deadline = time.monotonic() + RUN_TIMEOUT
                # One cheap request per poll: how many runs of this fresh database are not over.
                while count(api, status="queued,running,waiting,awaiting_approval"):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"{workload.name}: runs still going after {RUN_TIMEOUT}s")
                    time.sleep(0.05)
                bad = count(api, status="failed,cancelled,timed_out,lost")
                children = count(api, kind="subagent") - children_before
            if not first[0]:
                check_clawboard(workload, ["completed"] * roots + ["failed"] * bad, children)
            first[0] = False

        try:
            result = measure(url, delay_ms, repeat, budget, once)
        except Exception:
            print(server.logs(), file=sys.stderr)
            raise
        result["rss_mb"] = max(
            _vm_hwm_mb(p.popen.pid) for p in server.procs if p.name.startswith("worker") and p.popen
        )
    return result


# -- peers ------------------------------------------------------------------------------------------


def openai_agents(
    workload: Workload, url: str, delay_ms: float, repeat: int, budget: float
) -> dict[str, Any]:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        RunConfig,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    config = RunConfig(tracing_disabled=True)
    first = [True]

    async def workload_once(roots: int) -> None:
        # A client per event loop: its connections belong to the loop that opened them.
        client = AsyncOpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0, timeout=RUN_TIMEOUT)
        model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
        child = Agent(name="child", instructions="Do the work.", model=model)

        @function_tool
        async def spawn_subagent(prompt: str) -> str:
            """Run a subagent on a task and return its final answer."""
            result = await Runner.run(child, prompt, run_config=config)
            return str(result.final_output)

        coordinator = Agent(
            name="coordinator", instructions="Coordinate.", model=model, tools=[spawn_subagent]
        )

        async def one() -> None:
            result = await Runner.run(coordinator, workload.prompt, max_turns=50, run_config=config)
            expected = "done" if workload.children else "ok"
            if result.final_output != expected:
                raise RuntimeError(f"openai-agents: final output {result.final_output!r}")

        await asyncio.gather(*(one() for _ in range(roots)))
        await client.close()

    loop = asyncio.new_event_loop()  # one loop for every repetition: clients are kept per loop

    def once() -> None:
        loop.run_until_complete(workload_once(1 if first[0] else workload.roots))
        first[0] = False

    result = measure(url, delay_ms, repeat, budget, once)
    result["rss_mb"] = own_rss_mb()
    return result


def langgraph(workload: Workload, url: str, delay_ms: float, repeat: int, budget: float) -> dict[str, Any]:
    import warnings

    from langchain_core.messages import HumanMessage
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent's deprecation notice
        from langgraph.prebuilt import create_react_agent
    first = [True]

    async def workload_once(roots: int) -> None:
        model = ChatOpenAI(
            model=MODEL, base_url=f"{url}/v1", api_key=SecretStr("none"), max_retries=0, timeout=RUN_TIMEOUT
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            child_graph = create_react_agent(model, tools=[])

        @tool
        async def spawn_subagent(prompt: str) -> str:
            """Run a subagent on a task and return its final answer."""
            result = await child_graph.ainvoke({"messages": [HumanMessage(prompt)]})
            return str(result["messages"][-1].content)

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = create_react_agent(model, tools=[spawn_subagent])

        async def one() -> None:
            result = await graph.ainvoke(
                {"messages": [HumanMessage(workload.prompt)]}, {"recursion_limit": 100}
            )
            final = result["messages"][-1].content
            expected = "done" if workload.children else "ok"
            if final != expected:
                raise RuntimeError(f"langgraph: final output {final!r}")

        await asyncio.gather(*(one() for _ in range(roots)))

    loop = asyncio.new_event_loop()  # one loop for every repetition: clients are kept per loop

    def once() -> None:
        loop.run_until_complete(workload_once(1 if first[0] else workload.roots))
        first[0] = False

    result = measure(url, delay_ms, repeat, budget, once)
    result["rss_mb"] = own_rss_mb()
    return result


SYSTEMS = {
    "clawboard-embedded": clawboard_embedded,
    "clawboard-scale-out": clawboard_scale_out,
    "openai-agents": openai_agents,
    "langgraph": langgraph,
}


# -- the parent: the server, one child process per system and workload, the table ---------------------


def run_child(
    system: str, workload: Workload, url: str, delay_ms: float, args: argparse.Namespace
) -> dict[str, Any]:
    argv = [
        sys.executable, __file__, "--child", system, "--workloads", workload.name, "--server", url,
        "--delay-ms", str(delay_ms), "--repeat", str(args.repeat), "--budget", str(args.budget),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT * 2)
    for line in (done.stdout + "\n" + done.stderr).splitlines():
        if "RESULT {" in line:  # other output may precede it on its line
            return dict(json.loads(line[line.index("RESULT {") + len("RESULT ") :]))
    tail = "\n".join((done.stdout + done.stderr).splitlines()[-25:])
    return {"error": f"exit {done.returncode}: {tail}"}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--delay-ms", type=float, default=1000, help="the model's delay (workloads without their own)"
    )
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    parser.add_argument(
        "--modes", default="embedded", help="embedded (default), scale-out, or both: embedded,scale-out"
    )
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--budget", type=float, default=120, help="seconds of runs after which a workload is not repeated"
    )
    parser.add_argument("--peers", action="store_true", help="also run openai-agents and langgraph")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    args = parser.parse_args()
    workloads = [WORKLOADS[name.strip()] for name in args.workloads.split(",") if name.strip()]

    if args.child:  # one system, one workload, against the parent's server
        [workload] = workloads
        result = SYSTEMS[args.child](workload, args.server, args.delay_ms, args.repeat, args.budget)
        # sys.__stdout__: the embedded Celery worker redirects sys.stdout to its logger.
        print("RESULT " + json.dumps(result), file=sys.__stdout__, flush=True)
        return

    systems: list[str] = []
    for mode in (m.strip() for m in args.modes.split(",") if m.strip()):
        if mode == "scale-out" and (problem := scale_out_problem()):
            print(f"scale-out: skipped: {problem}")
            continue
        systems.append(f"clawboard-{mode}")
    if args.peers:
        for name, modules in PEERS.items():
            missing = [m for m in modules if importlib.util.find_spec(m) is None]
            if missing:
                print(f"{name}: skipped, {', '.join(missing)} not installed: {INSTALL_HINT}")
            else:
                systems.append(name)

    server = ModelServer()
    url = server.start()
    print(f"model server {url}/v1; machine: {load_note()}", flush=True)
    rows: list[list[Any]] = []
    for workload in workloads:
        delay_ms = workload.delay(args.delay_ms)
        ideal = workload.turns * delay_ms / 1000
        for system in systems:
            result = run_child(system, workload, url, delay_ms, args)
            load = f"{os.getloadavg()[0]:.2f}"
            if "error" in result:
                print(f"{system} {workload.name}: FAILED: {result['error']}", flush=True)
                rows.append(
                    [system, workload.name, f"{delay_ms:g}", 0, "-", f"{ideal:.2f}", "-", "-", "-", load]
                )
                continue
            wall = statistics.median(result["times"])
            row = [
                system, workload.name, f"{delay_ms:g}", len(result["times"]), f"{wall:.2f}", f"{ideal:.2f}",
                f"{wall / ideal:.2f}", max(result["peaks"]), f"{result['rss_mb']:.0f}", load,
            ]  # fmt: skip
            rows.append(row)
            print(
                f"{system:20s} {workload.name:14s} wall {wall:7.2f} s  ideal {ideal:5.2f} s  "
                f"x{wall / ideal:5.2f}  max in flight {max(result['peaks'])}",
                flush=True,
            )
    server.stop()
    print()
    print(
        table(
            [
                "system",
                "workload",
                "delay ms",
                "runs",
                "wall s",
                "ideal s",
                "wall/ideal",
                "max in flight",
                "peak RSS MB",
                "load 1m",
            ],
            rows,
        )
    )
    print(f"machine after: {load_note()}")


if __name__ == "__main__":
    main()
