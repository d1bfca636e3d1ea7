"""Claiming a queued run for this worker: the only way a run becomes `running`.

A step's first act: one conditional UPDATE from `queued`, so a duplicated task message claims
nothing. [delegate].max_concurrent_runs is checked first, in the same transaction, under the
claim lock (fewer running runs than the limit): a run beyond it stays queued, marked
`deferred`, and is dispatched again when a running run stops (`settle`)."""

from __future__ import annotations

import time
from typing import Any

from django.db import connection, transaction
from django.db.models.functions import Coalesce
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone

from policies_app.models import DelegateSettings
from runs_app.engine import heartbeat, transitions
from runs_app.models import Run

CLAIM_LOCK_KEY = 4242_0001  # the advisory lock that serialises claims (PostgreSQL)

_limit_cache: tuple[float, int] = (0.0, 8)


def max_concurrent_runs() -> int:
    """[delegate].max_concurrent_runs, read again at most once a second, and at once after this
    process saved a new value (`_limit_saved`)."""
    global _limit_cache
    now = time.monotonic()
    if now - _limit_cache[0] > 1.0:
        row = DelegateSettings.objects.filter(pk=1).only("max_concurrent_runs").first()
        _limit_cache = (now, row.max_concurrent_runs if row else DelegateSettings().max_concurrent_runs)
    return _limit_cache[1]


def forget_limit() -> None:
    global _limit_cache
    _limit_cache = (float("-inf"), _limit_cache[1])


@receiver(post_save, sender=DelegateSettings)
def _limit_saved(**kwargs: Any) -> None:
    """A run started after a save of the limit in this process is claimed under the new one;
    other processes read it again within a second."""
    transaction.on_commit(forget_limit)


def _claim_lock() -> None:
    """PostgreSQL: serialise claims for the rest of the transaction, so that the count of
    running runs is exact. Raw SQL: the ORM has no advisory locks. Taken first thing, holding
    nothing else (the lock is global; see events.lock_tree for the order of locks). SQLite's
    IMMEDIATE transactions serialise writers already."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CLAIM_LOCK_KEY])


def claim(run_id: Any) -> Run | None:
    """Take a queued run for this worker: the run, or None (not queued, or no room)."""
    limit = max_concurrent_runs()
    with transaction.atomic():
        _claim_lock()
        run = Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).one()
        if run is None:
            return None
        # Exact: only a claim makes a run `running`, and claims are serialised (above); a run
        # that stops running meanwhile only leaves more room.
        if Run.objects.filter(status=Run.Status.RUNNING).count() >= limit:
            Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(deferred=True)
            return None
        now = timezone.now()
        if not transitions.move(
            run, [Run.Status.QUEUED], Run.Status.RUNNING, event="run.started",
            data={"owner": heartbeat.WORKER_ID}, owner=heartbeat.WORKER_ID, heartbeat_at=now,
            started_at=Coalesce("started_at", now), deferred=False,
        ):  # fmt: skip
            return None  # no longer queued (cancelled meanwhile)
    run.owner, run.heartbeat_at, run.deferred = heartbeat.WORKER_ID, now, False
    run.started_at = run.started_at or now
    return run
