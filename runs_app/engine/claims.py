"""Claiming a queued run for this worker: the only way a run becomes `running`.

A step's first act: one conditional UPDATE from `queued`, so a duplicated task message claims
nothing. [delegate].max_concurrent_runs is checked in the same UPDATE (fewer running runs than
the limit): a run beyond it stays queued, marked `deferred`, and is dispatched again when a
running run stops (`settle`)."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection, transaction
from django.db.models import Count, IntegerField, Subquery, Value
from django.db.models.functions import Coalesce
from django.db.models.lookups import LessThan
from django.utils import timezone

from policies_app.models import DelegateSettings
from runs_app.engine import heartbeat, transitions
from runs_app.models import Run

CLAIM_LOCK_KEY = 4242_0001  # the advisory lock that serialises claims (PostgreSQL)

_limit_cache: tuple[float, int] = (0.0, 8)


def max_concurrent_runs() -> int:
    """[delegate].max_concurrent_runs, read again at most once a second."""
    global _limit_cache
    now = time.monotonic()
    if now - _limit_cache[0] > 1.0:
        row = DelegateSettings.objects.filter(pk=1).only("max_concurrent_runs").first()
        _limit_cache = (now, row.max_concurrent_runs if row else DelegateSettings().max_concurrent_runs)
    return _limit_cache[1]


def _claim_lock() -> None:
    """PostgreSQL: serialise claims for the rest of the transaction, so that the count of
    running runs is exact. Raw SQL: the ORM has no advisory locks. Taken first thing, holding
    nothing else (the lock is global; see events.lock_tree for the order of locks). SQLite's
    IMMEDIATE transactions serialise writers already."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CLAIM_LOCK_KEY])


def _running() -> Coalesce:
    """The number of running runs, as a subquery of the claim's UPDATE (grouped by status, so
    no running run gives no row: 0)."""
    running = Run.objects.filter(status=Run.Status.RUNNING).order_by().values("status")
    count = Subquery(running.annotate(n=Count("pk")).values("n")[:1], output_field=IntegerField())
    return Coalesce(count, Value(0))


def claim(run_id: Any) -> Run | None:
    """Take a queued run for this worker: the run, or None (not queued, or no room)."""
    limit = max_concurrent_runs()
    with transaction.atomic():
        _claim_lock()
        run = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).one()
        if run is None:
            return None
        now = timezone.now()
        if not transitions.move(
            run, [Run.Status.QUEUED], Run.Status.RUNNING, event="run.started",
            data={"owner": heartbeat.WORKER_ID}, where=LessThan(_running(), Value(limit)),
            owner=heartbeat.WORKER_ID, heartbeat_at=now, started_at=Coalesce("started_at", now),
            deferred=False,
        ):  # fmt: skip
            # Still queued (the claim lock, or SQLite's write lock, keeps it so): no room.
            Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(deferred=True)
            return None
    run.owner, run.heartbeat_at, run.deferred = heartbeat.WORKER_ID, now, False
    run.started_at = run.started_at or now
    return run
