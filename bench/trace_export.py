"""What exporting run trees as OpenTelemetry traces costs (traces_app, docs/performance.md).

  overhead  bench/spawn_overhead.py's sequential workload (a coordinator that spawns N
            subagents, one per model turn), in two fresh processes: export off, and export on
            to a local OTLP/HTTP receiver (bench/_otlp_sink.py, in its own process). CPU time
            of the Clawboard process (every thread: the engine and the export tasks), per run,
            until every tree is taken by the receiver.
  backlog   100,000 spans waiting (ten ended trees of 10,000 tool calls each, written straight
            into the database), then the periodic sweep: how long until the receiver has them
            all, the longest single export task (a worker is held at most that long), and
            whether any span arrived twice.

Usage: python bench/trace_export.py [--part overhead,backlog] [--n 100] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import configure_doc, median, peak_rss_mb, setup_django, table  # noqa: E402

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sink(port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, str(HERE / "_otlp_sink.py"), str(port)])
    for _ in range(100):
        try:
            counted(port)
            return proc
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the OTLP sink did not start")


def counted(port: int) -> dict[str, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/count", timeout=5) as answer:
        return json.load(answer)


def cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def exported_all() -> bool:
    from runs_app.models import Run
    from traces_app.models import TraceExport

    roots = Run.objects.filter(parent__isnull=True).count()
    return TraceExport.objects.filter(complete=True).count() >= roots


def child_overhead(n: int, repeat: int) -> None:
    """In a fresh process (the export switch is read when the settings load)."""
    from spawn_overhead import coordinator_doc, one_run

    worker = setup_django()
    from django.conf import settings

    configure_doc(coordinator_doc("sequential", n))
    one_run("sequential", 10)  # warm-up
    times, cpus = [], []
    for _ in range(repeat):
        before_cpu, before = cpu(), time.perf_counter()
        one_run("sequential", n)
        if settings.CLAWBOARD_TRACES_EXPORT:
            deadline = time.monotonic() + 120
            while not exported_all():
                if time.monotonic() > deadline:
                    raise RuntimeError("the export did not finish in 120 s")
                time.sleep(0.01)
        cpus.append(cpu() - before_cpu)
        times.append(time.perf_counter() - before)
    print(json.dumps({"cpu": median(cpus), "wall": median(times), "rss": peak_rss_mb()}), flush=True)
    worker.stop()


def overhead(n: int, repeat: int) -> None:
    port = free_port()
    proc = sink(port)
    try:
        figures = {}
        for label, extra in (
            ("off", {}),
            ("on", {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}),
        ):
            env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | extra
            done = subprocess.run(
                [sys.executable, __file__, "--child-overhead", "--n", str(n), "--repeat", str(repeat)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            figures[label] = json.loads(done.stdout.strip().splitlines()[-1])
        got = counted(port)
    finally:
        proc.terminate()
    off, on = figures["off"], figures["on"]
    rows = [[label, f"{f['cpu']:.3f}", f"{f['wall']:.3f}", f"{f['rss']:.0f}"] for label, f in figures.items()]
    print(table(["export", "CPU s/run (median)", "wall s/run", "peak RSS MB"], rows))
    print(f"sequential N={n}: export on costs {100 * (on['cpu'] / off['cpu'] - 1):+.1f}% CPU")
    print(f"receiver: {got['spans']} spans received, {got['distinct']} distinct")


def backlog(trees: int, calls: int) -> None:
    port = free_port()
    proc = sink(port)
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{port}"
    try:
        worker = setup_django()
        from datetime import timedelta

        from django.utils import timezone

        from runs_app.models import Run, ToolCall
        from traces_app import services

        now = timezone.now()
        for t in range(trees):
            root = Run.objects.create(
                agent="bench", status="completed", started_at=now, finished_at=now + timedelta(seconds=calls),
                session_key=f"run-bench-{t}",
            )  # fmt: skip
            Run.objects.filter(pk=root.pk).update(root_id=root.pk)
            ToolCall.objects.bulk_create(
                [
                    ToolCall(run=root, turn=i, call_id=f"c{i}", name="memory_recall", status="done",
                             result={"success": True, "output": "x", "error": None},
                             finished_at=now + timedelta(seconds=i + 1))
                    for i in range(calls)
                ],
                batch_size=2000,
            )  # fmt: skip
        print(f"{trees} trees, {trees * (calls + 1)} spans waiting", flush=True)
        durations: list[float] = []
        original = services.export_tree

        def timed_export(**kwargs: object) -> int | None:
            start = time.perf_counter()
            try:
                return original(**kwargs)  # type: ignore[arg-type]
            finally:
                durations.append(time.perf_counter() - start)

        services.export_tree = timed_export  # type: ignore[assignment]
        start = time.perf_counter()
        services.sweep()
        deadline = time.monotonic() + 900
        while not exported_all():
            if time.monotonic() > deadline:
                raise RuntimeError("the backlog was not exported in 15 minutes")
            time.sleep(0.2)
        elapsed = time.perf_counter() - start
        got = counted(port)
        print(
            table(
                [
                    "spans",
                    "seconds",
                    "spans/s",
                    "export tasks",
                    "longest task s",
                    "received",
                    "distinct",
                    "peak RSS MB",
                ],
                [
                    [
                        trees * (calls + 1),
                        f"{elapsed:.1f}",
                        f"{trees * (calls + 1) / elapsed:.0f}",
                        len(durations),
                        f"{max(durations):.2f}",
                        got["spans"],
                        got["distinct"],
                        f"{peak_rss_mb():.0f}",
                    ]
                ],
            )  # fmt: skip
        )
        worker.stop()
    finally:
        proc.terminate()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--part", default="overhead,backlog")
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--calls", type=int, default=9_999)
    parser.add_argument("--child-overhead", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_overhead:
        child_overhead(args.n, args.repeat)
        return
    print("load average (1, 5, 15 min) at the start: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    if "overhead" in args.part:
        overhead(args.n, args.repeat)
    if "backlog" in args.part:
        backlog(args.trees, args.calls)


if __name__ == "__main__":
    main()
