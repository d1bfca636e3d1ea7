"""The floor under a top-level run: what one run costs in CPU on this machine, this hour, in the
parts the engine is built from, with no engine logic around them. Each part is measured alone:

  statements  the SQL a top-level run issues today (16 statements, listed in docs/performance.md),
              issued straight through the ORM in one thread, in the same transactions
  minimal     the fewest statements that still keep the contract's durability: the run, its
              first message and its `run.queued` event in one transaction; the claim (a
              conditional UPDATE) and `run.started`; the answer, the final status and their
              events in one transaction (8 statements)
  task        one Celery task message through the embedded worker (memory:// broker, threads
              pool): sent, consumed and run as a no-op; a top-level run sends two
  model call  one call through Clawboard's OpenAI-compatible provider (the openai async
              client's post, the 10 tools' schemas in the body, the reply parsed) against the
              bench's model server answering at once, 50 calls at a time
  engine      for comparison, one top-level run through the real engine: process CPU (all
              threads) per run, --runs runs started at once against the same server

The sum is a lower bound for any engine built from the ORM, Celery and the openai client in one
process: N runs started at once cannot finish before N × floor of CPU has run under the GIL,
plus the model's latency. The last table prints that bound beside the wall times of the peers
passed in with --peer (seconds, from `bench/real_latency.py --peers` in the same hour), for the
workloads of top-level runs (top200, top200-200ms, top1000).

Usage: python bench/run_floor.py [--runs 300] [--peer top200=2.21 --peer top1000=8.28 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import configure_doc, median, setup_django, table  # noqa: E402
from real_latency import WORKLOADS, clawboard_doc  # noqa: E402

SERVER_PORT = 18997


def setup(workers: int) -> Any:
    """Django on a fresh SQLite database and the embedded worker, with a no-op task registered
    before the worker starts."""
    done = Done()

    def register() -> None:
        from zeroclaw_site.celery import app

        @app.task(name="bench.noop", ignore_result=True)
        def noop() -> None:
            done.add()

    return setup_django(workers=workers, before_worker=register), done


class Done:
    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()
        self.event = threading.Event()
        self.target = 0

    def add(self) -> None:
        with self.lock:
            self.n += 1
            if self.n >= self.target:
                self.event.set()


def statements_once() -> None:
    """Today's statements of one top-level run (queued → completed, one model turn)."""
    from django.db import transaction
    from django.db.models import Count, F, IntegerField, Subquery, Value
    from django.db.models.functions import Coalesce
    from django.utils import timezone

    from policies_app.models import TrackerCost
    from runs_app.models import Message, Run, RunEvent

    with transaction.atomic():  # run_start
        run = Run.objects.create(agent="bench", prompt="hello")
        Message.objects.create(run=run, seq=0, role="user", content="hello")
        RunEvent.objects.create(run=run, root_id=run.pk, type="run.queued", at=timezone.now(), data={})
    with transaction.atomic():  # the claim
        run = Run.objects.get(pk=run.pk, status="queued")
        running = Run.objects.filter(status="running").order_by().values("status")
        count = Subquery(running.annotate(n=Count("pk")).values("n")[:1], output_field=IntegerField())
        Run.objects.filter(pk=run.pk, status__in=["queued"]).alias(n=Coalesce(count, Value(0))).filter(
            n__lt=8
        ).update(status="running", owner="w", heartbeat_at=timezone.now(), deferred=False)
        RunEvent.objects.create(run=run, root_id=run.pk, type="run.started", at=timezone.now(), data={})
    list(Message.objects.filter(run=run).order_by("seq"))  # the transcript
    list(TrackerCost.objects.filter(tracker__key="bench").values_list("cents", flat=True))
    Run.objects.filter(pk=run.pk, owner="w", status="running").update(model_call_at=timezone.now())
    run = Run.objects.get(pk=run.pk)  # the answer comes back
    list(Message.objects.filter(run=run).order_by("seq"))
    with transaction.atomic():
        Run.objects.filter(pk=run.pk, owner="w").update(
            model_call_at=None, turns=F("turns") + 1, input_tokens=F("input_tokens") + 10
        )
        Message.objects.create(run=run, seq=1, role="assistant", content="done")
        Run.objects.filter(pk=run.pk, status__in=["running"]).update(
            status="completed", output="done", finished_at=timezone.now(), owner=""
        )
        RunEvent.objects.bulk_create(
            [
                RunEvent(run=run, root_id=run.pk, type=t, at=timezone.now(), data={})
                for t in ("model.request", "model.response", "run.completed")
            ]
        )
    list(Run.objects.filter(deferred=True, status="queued").values_list("pk", flat=True)[:4])


def minimal_once() -> None:
    """The fewest statements that keep the contract's durability."""
    from django.db import transaction
    from django.utils import timezone

    from runs_app.models import Message, Run, RunEvent

    with transaction.atomic():
        run = Run.objects.create(agent="bench", prompt="hello")
        Message.objects.create(run=run, seq=0, role="user", content="hello")
        RunEvent.objects.create(run=run, root_id=run.pk, type="run.queued", at=timezone.now(), data={})
    with transaction.atomic():
        Run.objects.filter(pk=run.pk, status="queued").update(status="running", owner="w")
        RunEvent.objects.create(run=run, root_id=run.pk, type="run.started", at=timezone.now(), data={})
    with transaction.atomic():
        Message.objects.create(run=run, seq=1, role="assistant", content="done")
        Run.objects.filter(pk=run.pk, status="running").update(status="completed", output="done", owner="")
        RunEvent.objects.create(run=run, root_id=run.pk, type="run.completed", at=timezone.now(), data={})


def cpu_per(fn: Any, n: int) -> float:
    """CPU ms per call of `fn` in this thread, after a warm-up."""
    for _ in range(20):
        fn()
    start = time.thread_time()
    for _ in range(n):
        fn()
    return (time.thread_time() - start) / n * 1000


def task_cpu(done: Done, n: int) -> float:
    """Process CPU ms per no-op task sent, consumed and run by the embedded worker."""
    from celery import current_app

    def burst(count: int) -> float:
        with done.lock:
            done.n, done.target = 0, count
            done.event.clear()
        start = time.process_time()
        for _ in range(count):
            current_app.send_task("bench.noop")
        if not done.event.wait(120):
            raise RuntimeError(f"only {done.n} of {count} tasks ran")
        return (time.process_time() - start) / count * 1000

    burst(50)
    return burst(n)


def model_call_cpu(url: str, n: int) -> float:
    """Process CPU ms per model call through the OpenAI-compatible provider, 50 at a time."""
    from agents_app.snapshot import ProviderSpec
    from policies_app.policy import ALL_TOOLS
    from runs_app.engine.providers import ChatMessage, ChatRequest, OpenAICompatProvider
    from runs_app.engine.tools.registry import tool_specs

    provider = OpenAICompatProvider(
        ProviderSpec(type="openai", alias="bench", model="bench-1", uri=f"{url}/v1")
    )
    request = ChatRequest(messages=[ChatMessage("user", "hello")], tools=tool_specs(ALL_TOOLS), agent="bench")

    async def calls(count: int) -> None:
        for i in range(0, count, 50):
            await asyncio.gather(*(provider.acomplete(request) for _ in range(min(50, count - i))))

    async def measured() -> float:
        await calls(50)
        start = time.process_time()
        await calls(n)
        return (time.process_time() - start) / n * 1000

    return asyncio.run(measured())


def engine_cpu(url: str, n: int) -> float:
    """Process CPU ms per top-level run through the real engine, `n` started at once (the
    OpenAI-compatible provider against the model server, `real_latency.py`'s configuration)."""
    from asgiref.sync import async_to_sync

    from runs_app import live
    from runs_app.services import run_start

    configure_doc(clawboard_doc(url))

    def runs(count: int) -> None:
        ids = [run_start(agent="bench", prompt="answer").pk for _ in range(count)]
        async_to_sync(live.wait_terminal)(ids, 600)

    runs(20)
    start = time.process_time()
    runs(n)
    return (time.process_time() - start) / n * 1000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=300, help="runs (tasks, calls) per measurement")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--peer", action="append", default=[], help="WORKLOAD=SECONDS, the better peer's wall time"
    )
    args = parser.parse_args()

    server = subprocess.Popen(
        [
            sys.executable,
            str(Path(__file__).with_name("_model_server.py")),
            "--delay-ms",
            "0",
            "--port",
            str(SERVER_PORT),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker, done = setup(workers=4)
    time.sleep(1.0)  # the model server starts listening
    try:
        url = f"http://127.0.0.1:{SERVER_PORT}"
        figures: dict[str, list[float]] = {
            "engine": [], "statements": [], "minimal": [], "task": [], "model call": []
        }  # fmt: skip
        for _ in range(args.repeat):
            figures["engine"].append(engine_cpu(url, args.runs))
            figures["statements"].append(cpu_per(statements_once, args.runs))
            figures["minimal"].append(cpu_per(minimal_once, args.runs))
            figures["task"].append(task_cpu(done, args.runs))
            figures["model call"].append(model_call_cpu(url, args.runs))
    finally:
        worker.stop()
        server.terminate()

    med = {name: median(values) for name, values in figures.items()}
    rows = [
        [name, f"{med[name]:.2f}", " / ".join(f"{v:.2f}" for v in values)] for name, values in figures.items()
    ]
    print(
        f"CPU ms per unit, median of {args.repeat} × {args.runs} ({time.strftime('%H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f}):"
    )
    print(table(["part", "median", "each"], rows))
    floors = {
        "today's statements": med["statements"] + 2 * med["task"] + med["model call"],
        "minimal statements": med["minimal"] + 2 * med["task"] + med["model call"],
    }
    print()
    above = med["engine"] - floors["today's statements"]
    print(f"the engine: {med['engine']:.2f} ms per run, {above:.2f} above its parts (today's statements)")
    print()
    print(
        table(
            ["floor per run (statements + 2 tasks + 1 model call)", "CPU ms"],
            [[k, f"{v:.2f}"] for k, v in floors.items()],
        )
    )
    peers = dict(item.split("=", 1) for item in args.peer)
    if peers:
        print()
        rows = []
        for name, seconds in peers.items():
            workload = WORKLOADS[name]
            if workload.children:
                raise SystemExit(f"--peer {name}: only workloads of top-level runs have this bound")
            latency = workload.delay(1000) / 1000
            peer = float(seconds)
            bound = [workload.roots * f / 1000 + latency for f in floors.values()]
            rows.append([name, f"{peer:.2f}", f"{peer * 1.05:.2f}", *(f"{b:.2f}" for b in bound)])
        print(
            table(["workload", "better peer s", "target (1.05×)", "bound, today's", "bound, minimal"], rows)
        )


if __name__ == "__main__":
    main()
