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

Usage: python bench/trace_export.py [--part overhead,backlog] [--n 100] [--repeat 5] [--pairs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
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


def instrument() -> dict[str, float]:
    """Count the CPU time of the threads while they export a tree or take the written events
    (`time.thread_time`: this thread's own CPU, whatever the others do)."""
    from runs_app import events
    from traces_app import services, signals

    spent = {"export": 0.0, "exports": 0.0, "signal": 0.0}
    export_tree, events_written = services.export_tree, signals.events_written

    def timed_export(**kwargs: object) -> int | None:
        start = time.thread_time()
        try:
            return export_tree(**kwargs)  # type: ignore[arg-type]
        finally:
            spent["export"] += time.thread_time() - start
            spent["exports"] += 1

    def timed_signal(*args: object, **kwargs: object) -> None:
        start = time.thread_time()
        try:
            events_written(*args, **kwargs)
        finally:
            spent["signal"] += time.thread_time() - start

    services.export_tree = timed_export  # type: ignore[assignment]
    events.written.disconnect(dispatch_uid="traces_app.events_written")
    events.written.connect(timed_signal, dispatch_uid="bench.events_written", weak=False)
    return spent


def child_overhead(n: int, repeat: int, out: str) -> None:
    """In a fresh process (the export switch is read when the settings load)."""
    from spawn_overhead import coordinator_doc, one_run

    worker = setup_django()
    from django.conf import settings

    spent = instrument()
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
                time.sleep(0.05)
        cpus.append(cpu() - before_cpu)
        times.append(time.perf_counter() - before)
    # A file, not stdout: the embedded Celery worker takes the process's stdout over.
    Path(out).write_text(
        json.dumps(
            {
                "cpu": median(cpus),
                "wall": median(times),
                "rss": peak_rss_mb(),
                # the export's own CPU (its tasks and the receiver of written events), per run
                "export_cpu": spent["export"] / (repeat + 1),
                "exports": spent["exports"] / (repeat + 1),
                "signal_cpu": spent["signal"] / (repeat + 1),
            }
        )
    )
    worker.stop()


def overhead(n: int, repeat: int, pairs: int) -> None:
    port = free_port()
    proc = sink(port)
    try:
        runs: dict[str, list[dict[str, float]]] = {"off": [], "on": []}
        # Interleaved (off, on, off, on, …): the machine's speed drifts within minutes.
        for label, extra in [
            ("off", {}),
            ("on", {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}),
        ] * pairs:
            env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")} | extra
            out = Path(tempfile.mkdtemp(prefix="clawboard-bench-")) / "figures.json"
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--child-overhead",
                    str(out),
                    "--n",
                    str(n),
                    "--repeat",
                    str(repeat),
                ],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
            )
            runs[label].append(json.loads(out.read_text()))
        got = counted(port)
        figures = {
            label: {k: median([r[k] for r in found]) for k in found[0]} for label, found in runs.items()
        }
    finally:
        proc.terminate()
    off, on = figures["off"], figures["on"]
    rows = [
        [label, f"{f['cpu']:.3f}", f"{f['wall']:.3f}", f"{f['exports']:.1f}", f"{1000 * f['export_cpu']:.1f}",
         f"{1000 * f['signal_cpu']:.1f}", f"{f['rss']:.0f}"]
        for label, f in figures.items()
    ]  # fmt: skip
    print(
        table(
            [
                "export",
                "CPU s/run",
                "wall s/run",
                "exports/run",
                "export CPU ms/run",
                "receiver CPU ms/run",
                "peak RSS MB",
            ],
            rows,
        )
    )
    own = on["export_cpu"] + on["signal_cpu"] - off["signal_cpu"]
    print(
        f"sequential N={n}: the export's own CPU is {100 * own / off['cpu']:.1f}% of a run's CPU with export off"
    )
    print(
        f"process CPU, on against off (noisy on a shared machine): {100 * (on['cpu'] / off['cpu'] - 1):+.1f}%"
    )
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
    parser.add_argument("--pairs", type=int, default=2, help="off/on process pairs, interleaved (default 2)")
    parser.add_argument("--trees", type=int, default=10)
    parser.add_argument("--calls", type=int, default=9_999)
    parser.add_argument("--child-overhead", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_overhead:
        child_overhead(args.n, args.repeat, args.child_overhead)
        return
    print("load average (1, 5, 15 min) at the start: " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    if "overhead" in args.part:
        overhead(args.n, args.repeat, args.pairs)
    if "backlog" in args.part:
        backlog(args.trees, args.calls)


if __name__ == "__main__":
    main()
