"""Claiming a queued run for this worker: the only way a run becomes `running`.

A step's first act: one conditional UPDATE from `queued`, so a duplicated task message claims
nothing. The same UPDATE carries [delegate].max_concurrent_runs as a condition (fewer running
runs than the limit, both read by the database in that statement), so the limit is exact and
never kept in a process: a run beyond it stays queued, marked `deferred`, and is dispatched
again when a running run stops (`settle`). The run is then read once, with what its step needs
to know from other tables (`step_rows`)."""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.db.models import F, Func, IntegerField, Subquery, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import LessThan
from django.utils import timezone

from policies_app.models import DelegateSettings
from runs_app import events
from runs_app.engine import heartbeat, rows, transitions
from runs_app.models import Run

CLAIM_LOCK_KEY = 4242_0001  # the advisory lock that serialises claims (PostgreSQL)


def _claim_lock() -> None:
    """PostgreSQL: serialise claims for the rest of the transaction, so that the count of
    running runs is exact. Raw SQL: the ORM has no advisory locks. Taken first thing, holding
    nothing else (the lock is global; see events.lock_tree for the order of locks). SQLite's
    IMMEDIATE transactions serialise writers already."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CLAIM_LOCK_KEY])


def room() -> LessThan:
    """The condition "fewer runs are running than [delegate].max_concurrent_runs", for the
    claim's UPDATE. Exact: only a claim makes a run `running`, and claims are serialised (the
    claim lock, or SQLite's single writer); a run that stops running meanwhile only leaves
    more room."""
    running = (
        Run.objects.filter(status=Run.Status.RUNNING)
        .order_by()
        .annotate(n=Func(F("pk"), function="COUNT", output_field=IntegerField()))
        .values("n")
    )
    limit = DelegateSettings.objects.filter(pk=1).values("max_concurrent_runs")
    default = DelegateSettings._meta.get_field("max_concurrent_runs").get_default()
    return LessThan(
        Coalesce(Subquery(running), Value(0)),
        Coalesce(Subquery(limit), Value(default), output_field=IntegerField()),
    )


def claim(run_id: Any) -> Run | None:
    """Take a queued run for this worker: the run, or None (not queued, or no room)."""
    with transaction.atomic(durable=True):
        _claim_lock()
        run = Run(pk=run_id)
        if connection.vendor == "postgresql":  # the tree's lock needs the root (SQLite has none)
            run.root_id = Run.objects.filter(pk=run_id).values_list("root_id", flat=True).first()
        with events.tree_tx(run.root_id or run_id):
            now = timezone.now()
            if not transitions.move(
                run, [Run.Status.QUEUED], Run.Status.RUNNING, where=room(),
                owner=heartbeat.WORKER_ID, heartbeat_at=now, started_at=Coalesce("started_at", now), deferred=False,
            ):  # fmt: skip
                # Not queued (a duplicate message, a cancel), or no room: then it waits for one.
                Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(deferred=True)
                return None
            run = rows.step_rows(Run.objects.filter(pk=run_id)).get()
            events.emit(run, "run.started", {"owner": heartbeat.WORKER_ID})
    return run
