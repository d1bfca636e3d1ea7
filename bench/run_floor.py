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
  child minimal
              the fewest writes one sequentially spawned child needs (spawn_overhead.py's
              `sequential` workload): the parent's turn with its spawn_subagent call, the child
              run and its first message; the child's claim; its answer, its end, the call's
              result and the parent queued again; the parent's claim (15 statements in four
              transactions, no read at all), beside `engine child`, the real engine's process
              CPU per child for that workload (100 children, a scripted model)
  child raw SQL
              the same 15 writes in the same transactions, as SQL written by hand on a plain
              cursor: how much of the child's floor is the ORM's own work (issue 14 asks for the
              ORM wherever it can say the statement, so this is a figure, not an option taken)

The table also prints the SQL statements each part executed per unit, counted on every
connection through `connection.execute_wrapper` (each transaction's BEGIN included, so more than
the figures above).

The sum is a lower bound for any engine built from the ORM, Celery and the openai client in one
process: N runs started at once cannot finish before N × floor of CPU has run under the GIL,
plus the model's latency. The last table prints that bound beside the wall times of the peers
passed in with --peer (seconds, from `bench/real_latency.py --peers` in the same hour), for the
workloads of top-level runs (top200, top200-200ms, top1000), and issue 18's target for each
(1.05 × the better peer; 2 × for top1000).

Usage: python bench/run_floor.py [--runs 300] [--peer top200=2.21 --peer top1000=8.28 ...]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import configure_doc, median, setup_django, table  # noqa: E402
from real_latency import WORKLOADS, clawboard_doc  # noqa: E402
from spawn_overhead import coordinator_doc, one_run  # noqa: E402

SERVER_PORT = 18997
# Issue 18's targets: within 1.05× of the better peer, and 1,000 runs within 2× of it.
TARGET_RATIO = {"top1000": 2.0}


class Statements:
    """The SQL statements every database connection of this process executes (`BEGIN` counted,
    `COMMIT` not: Django commits through the driver), counted through Django's instrumentation
    hook, `connection.execute_wrapper`, installed on each connection as it is made."""

    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()
        self.hooks = contextlib.ExitStack()  # the wrappers stay installed until the process ends
        self.installed: weakref.WeakSet[Any] = weakref.WeakSet()

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        with self.lock:
            self.n += 1
        return execute(sql, params, many, context)

    def install(self, connection: Any, **kwargs: Any) -> None:
        """Once per connection object: it outlives the database connections it makes (a worker
        thread's is closed and made again around tasks), and each would add a wrapper."""
        if connection not in self.installed:
            self.installed.add(connection)
            self.hooks.enter_context(connection.execute_wrapper(self))


STATEMENTS = Statements()


def setup(workers: int) -> Any:
    """Django on a fresh SQLite database and the embedded worker, with a no-op task registered
    and the statements counted on every connection made from then on."""
    done = Done()

    def register() -> None:
        from django.db import DEFAULT_DB_ALIAS, connections
        from django.db.backends.signals import connection_created

        from zeroclaw_site.celery import app

        STATEMENTS.install(connections[DEFAULT_DB_ALIAS])  # this thread's, made by the migrations
        connection_created.connect(STATEMENTS.install, weak=False)

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
    from django.db.models import F
    from django.utils import timezone

    from policies_app.models import TrackerCost
    from runs_app.models import Message, Run, RunEvent

    with transaction.atomic():  # run_start
        run = Run.objects.create(agent="bench", prompt="hello")
        Message.objects.create(run=run, seq=0, role="user", content="hello")
        RunEvent.objects.create(run=run, root_id=run.pk, type="run.queued", at=timezone.now(), data={})
    with transaction.atomic():  # the claim: the run, the room under the limit, the move
        run = Run.objects.get(pk=run.pk, status="queued")
        if Run.objects.filter(status="running").count() < 8:
            Run.objects.filter(pk=run.pk, status__in=["queued"]).update(
                status="running", owner="w", heartbeat_at=timezone.now(), deferred=False
            )
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


class Parent:
    """The coordinator `child_once` spawns from, one child per model turn."""

    def __init__(self) -> None:
        from runs_app.models import Run

        self.run = Run.objects.create(agent="bench", prompt="coordinate", status="running", owner="w")
        self.seq = 0
        self.turn = 0

    def close(self) -> None:
        """Ended, so that it takes no room under max_concurrent_runs from the engine's runs."""
        from runs_app.models import Run

        Run.objects.filter(pk=self.run.pk).update(status="completed", owner="")


def child_once(parent: Parent) -> None:
    """The fewest writes one sequentially spawned child needs (issue 14's `sequential` workload,
    a scripted model): no read at all, so a strict lower bound. Four transactions: the
    parent's turn calls spawn_subagent and waits; the child is claimed; the child answers, ends,
    completes the parent's call and queues the parent; the parent is claimed again."""
    from django.db import transaction
    from django.utils import timezone

    from runs_app.models import Message, Run, RunEvent, ToolCall

    run, root = parent.run, parent.run.pk

    def events(*items: tuple[Any, str]) -> None:
        at = timezone.now()
        RunEvent.objects.bulk_create(
            [RunEvent(run_id=rid, root_id=root, type=t, at=at, data={}) for rid, t in items]
        )

    with transaction.atomic():  # the parent's turn: the tool result before it, its call
        call_id = f"call_{parent.turn}"
        Message.objects.bulk_create(
            [
                Message(
                    run=run, seq=parent.seq, role="tool", content="ok", tool_call_id=f"call_{parent.turn - 1}"
                ),
                Message(run=run, seq=parent.seq + 1, role="assistant", tool_calls=[{"id": call_id}]),
            ]
        )
        parent.seq += 2
        call = ToolCall.objects.create(
            run=run, turn=parent.turn, call_id=call_id, name="spawn_subagent", wait_kind="children"
        )
        child = Run.objects.create(
            agent="bench", prompt="child: work", kind="subagent", parent=run, root=run, parent_call=call
        )
        Message.objects.create(run=child, seq=0, role="user", content="child: work")
        Run.objects.filter(pk=run.pk, status="running").update(status="waiting")
        events((run.pk, "tool.call"), (child.pk, "run.queued"), (run.pk, "run.waiting"))
        parent.turn += 1
    with transaction.atomic():  # the child is claimed
        Run.objects.filter(pk=child.pk, status="queued").update(status="running", owner="w")
        events((child.pk, "run.started"))
    with transaction.atomic():  # the child answers and ends; the parent's call completes
        Message.objects.create(run=child, seq=1, role="assistant", content="ok")
        Run.objects.filter(pk=child.pk, status="running").update(status="completed", output="ok", owner="")
        ToolCall.objects.filter(pk=call.pk, status="pending").update(status="done", result={"output": "ok"})
        Run.objects.filter(pk=run.pk, status="waiting").update(status="queued")
        events((child.pk, "run.completed"), (run.pk, "tool.result"), (run.pk, "run.queued"))
    with transaction.atomic():  # the parent is claimed again
        Run.objects.filter(pk=run.pk, status="queued").update(status="running", owner="w")
        events((run.pk, "run.started"))


class RawInsert:
    """For `child_raw`: one model's INSERT as SQL written once, every column in it, the
    model's defaults prepared once, the given values prepared per row (Field.get_db_prep_save)."""

    def __init__(self, model: Any) -> None:
        from django.db import connection
        from django.utils import timezone

        quote = connection.ops.quote_name
        self.fields = [
            f
            for f in model._meta.concrete_fields
            if f.get_internal_type() not in ("AutoField", "BigAutoField")
        ]
        self.sql = "INSERT INTO {} ({}) VALUES ({})".format(
            quote(model._meta.db_table),
            ", ".join(quote(f.column) for f in self.fields),
            ", ".join(["%s"] * len(self.fields)),
        )
        now = timezone.now()
        self.defaults = {
            f.attname: f.get_db_prep_save(
                now if getattr(f, "auto_now_add", False) else f.get_default(), connection
            )
            for f in self.fields
        }

    def row(self, **values: Any) -> list[Any]:
        from django.db import connection

        given = {
            f.attname: f.get_db_prep_save(values[f.attname], connection)
            for f in self.fields
            if f.attname in values
        }
        return [given.get(f.attname, self.defaults[f.attname]) for f in self.fields]


def raw_inserts() -> dict[str, RawInsert]:
    from runs_app.models import Message, Run, RunEvent, ToolCall

    return {
        "message": RawInsert(Message),
        "call": RawInsert(ToolCall),
        "run": RawInsert(Run),
        "event": RawInsert(RunEvent),
    }


def child_raw(parent: Parent, inserts: dict[str, RawInsert]) -> None:
    """`child_once`'s 15 writes in the same four transactions, as SQL written by hand and run on
    a plain cursor: what the ORM's own work costs in that floor (issue 14 rules this out)."""
    import uuid

    from django.db import connection, transaction
    from django.utils import timezone

    from runs_app.models import Run

    pk = Run._meta.pk
    assert pk is not None
    run = pk.get_db_prep_save(parent.run.pk, connection)
    child_id = uuid.uuid4()
    child = pk.get_db_prep_save(child_id, connection)
    message, call, runs, event = inserts["message"], inserts["call"], inserts["run"], inserts["event"]
    set_status = "UPDATE runs_app_run SET status = %s WHERE id = %s AND status = %s"
    claim = "UPDATE runs_app_run SET status = %s, owner = %s WHERE id = %s AND status = %s"

    def move(cursor: Any, sql: str, params: list[Any]) -> None:
        cursor.execute(sql, params)
        if cursor.rowcount != 1:
            raise RuntimeError(f"{sql}: {cursor.rowcount} rows")

    def events(cursor: Any, *items: tuple[Any, str]) -> None:
        at = timezone.now()
        rows = [event.row(run_id=rid, root_id=run, type=t, at=at, data={}) for rid, t in items]
        cursor.executemany(event.sql, rows)

    with transaction.atomic(), connection.cursor() as cursor:  # the parent's turn
        call_id = f"call_{parent.turn}"
        cursor.executemany(
            message.sql,
            [
                message.row(
                    run_id=run,
                    seq=parent.seq,
                    role="tool",
                    content="ok",
                    tool_call_id=f"call_{parent.turn - 1}",
                ),
                message.row(run_id=run, seq=parent.seq + 1, role="assistant", tool_calls=[{"id": call_id}]),
            ],
        )
        parent.seq += 2
        cursor.execute(
            call.sql,
            call.row(
                run_id=run, turn=parent.turn, call_id=call_id, name="spawn_subagent", wait_kind="children"
            ),
        )
        call_pk = cursor.lastrowid
        cursor.execute(
            runs.sql,
            runs.row(
                id=child_id,
                agent="bench",
                prompt="child: work",
                kind="subagent",
                parent_id=run,
                root_id=run,
                parent_call_id=call_pk,
            ),  # fmt: skip
        )
        cursor.execute(message.sql, message.row(run_id=child, seq=0, role="user", content="child: work"))
        move(cursor, set_status, ["waiting", run, "running"])
        events(cursor, (run, "tool.call"), (child, "run.queued"), (run, "run.waiting"))
        parent.turn += 1
    with transaction.atomic(), connection.cursor() as cursor:  # the child is claimed
        move(cursor, claim, ["running", "w", child, "queued"])
        events(cursor, (child, "run.started"))
    with transaction.atomic(), connection.cursor() as cursor:  # the child ends, the call completes
        cursor.execute(message.sql, message.row(run_id=child, seq=1, role="assistant", content="ok"))
        move(
            cursor,
            "UPDATE runs_app_run SET status = %s, output = %s, owner = %s WHERE id = %s AND status = %s",
            ["completed", "ok", "", child, "running"],
        )
        move(
            cursor,
            "UPDATE runs_app_toolcall SET status = %s, result = %s WHERE id = %s AND status = %s",
            ["done", '{"output": "ok"}', call_pk, "pending"],
        )
        move(cursor, set_status, ["queued", run, "waiting"])
        events(cursor, (child, "run.completed"), (run, "tool.result"), (run, "run.queued"))
    with transaction.atomic(), connection.cursor() as cursor:  # the parent is claimed again
        move(cursor, claim, ["running", "w", run, "queued"])
        events(cursor, (run, "run.started"))


def cpu_per(name: str, fn: Any, n: int) -> float:
    """CPU ms per call of `fn` in this thread, after a warm-up (its statements in COUNTED[name])."""
    for _ in range(20):
        fn()
    start, first = time.thread_time(), STATEMENTS.n
    for _ in range(n):
        fn()
    COUNTED[name] = (STATEMENTS.n - first) / n
    return (time.thread_time() - start) / n * 1000


COUNTED: dict[str, float] = {}  # SQL statements per unit, by part


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
    start, first = time.process_time(), STATEMENTS.n
    runs(n)
    COUNTED["engine"] = (STATEMENTS.n - first) / n
    return (time.process_time() - start) / n * 1000


def engine_child_cpu(n: int) -> float:
    """Process CPU ms per child through the real engine: spawn_overhead.py's `sequential`
    coordinator (one spawn_subagent per scripted model turn) with `n` children."""
    configure_doc(coordinator_doc("sequential", n))
    one_run("sequential", n)  # warm-up
    start, first = time.process_time(), STATEMENTS.n
    _, children = one_run("sequential", n)
    spent = time.process_time() - start
    COUNTED["engine child"] = (STATEMENTS.n - first) / n
    if children != n:
        raise RuntimeError(f"sequential coordinator: {children} children, expected {n}")
    return spent / n * 1000


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
            "engine": [], "statements": [], "minimal": [], "task": [], "model call": [],
            "engine child": [], "child minimal": [], "child raw SQL": [],
        }  # fmt: skip
        for _ in range(args.repeat):
            figures["engine"].append(engine_cpu(url, args.runs))
            figures["statements"].append(cpu_per("statements", statements_once, args.runs))
            figures["minimal"].append(cpu_per("minimal", minimal_once, args.runs))
            figures["task"].append(task_cpu(done, args.runs))
            figures["model call"].append(model_call_cpu(url, args.runs))
            figures["engine child"].append(engine_child_cpu(min(args.runs, 100)))
            parent = Parent()
            figures["child minimal"].append(
                cpu_per("child minimal", lambda p=parent: child_once(p), args.runs)
            )
            parent.close()
            parent, inserts = Parent(), raw_inserts()
            figures["child raw SQL"].append(
                cpu_per("child raw SQL", lambda p=parent, i=inserts: child_raw(p, i), args.runs)
            )
            parent.close()
    finally:
        worker.stop()
        server.terminate()

    med = {name: median(values) for name, values in figures.items()}
    rows = [
        [
            name,
            f"{med[name]:.2f}",
            " / ".join(f"{v:.2f}" for v in values),
            f"{COUNTED[name]:.1f}" if name in COUNTED else "",
        ]
        for name, values in figures.items()
    ]
    print(
        f"CPU ms per unit, median of {args.repeat} × {args.runs} ({time.strftime('%H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.2f}):"
    )
    print(table(["part", "median", "each", "SQL statements"], rows))
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
    child, raw = (med[part] + 2 * med["task"] for part in ("child minimal", "child raw SQL"))
    print()
    print(
        f"a sequential child: the engine {med['engine child']:.2f} ms; the fewest writes and its "
        f"2 tasks {child:.2f} ms through the ORM, {raw:.2f} ms as SQL by hand (issue 14's limit: "
        "5 ms per child)"
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
            ratio = TARGET_RATIO.get(name, 1.05)
            rows.append([name, f"{peer:.2f}", f"{peer * ratio:.2f} ({ratio}×)", *(f"{b:.2f}" for b in bound)])
        print(table(["workload", "better peer s", "target s", "bound, today's", "bound, minimal"], rows))


if __name__ == "__main__":
    main()
