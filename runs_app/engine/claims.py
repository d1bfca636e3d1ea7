"""Claiming a queued run for this worker: the only way a run becomes `running`.

Two ways in. `claim` is a task's first step: its own transaction, a conditional UPDATE from
`queued`, so a duplicated task message claims nothing. `claim_inline` is taken inside the
transaction that makes a run runnable (a sync child created, a parent woken by its last
child) when this worker will run it next anyway (`inline`): the run goes from `queued` to
`running` in that same commit, which saves the task a transaction of its own. Both check
[delegate].max_concurrent_runs the same way and emit the same `run.started`."""

from __future__ import annotations

import logging
import time
from datetime import datetime
from typing import Any

from django.db import connection, transaction
from django.utils import timezone

from policies_app.models import DelegateSettings
from runs_app import events
from runs_app.engine import heartbeat, inline, settle, sql, store
from runs_app.models import Run

log = logging.getLogger(__name__)

CLAIM_LOCK_KEY = 4242_0001  # the advisory lock that serialises claims (PostgreSQL)

_limit_cache: tuple[float, int] = (0.0, 8)


def max_concurrent_runs() -> int:
    """[delegate].max_concurrent_runs, re-read at most once a second."""
    global _limit_cache
    now = time.monotonic()
    if now - _limit_cache[0] > 1.0:
        row = DelegateSettings.objects.filter(pk=1).only("max_concurrent_runs").first()
        _limit_cache = (now, row.max_concurrent_runs if row else DelegateSettings().max_concurrent_runs)
    return _limit_cache[1]


def _claim_lock(*, wait: bool) -> bool:
    """PostgreSQL: take the advisory lock that serialises claims, so that `_room`'s count is
    exact (SQLite's IMMEDIATE transactions already serialise writers). It is held to the end
    of the transaction.

    The lock is global, so no transaction may WAIT for it while holding anything else: a
    holder of the claim lock goes on with its transaction and may need a row or tree lock
    that such a waiter holds (a budget tracker's row, say), and the two would deadlock. So
    `claim` waits for it first thing, holding nothing; `claim_inline`, in the middle of a
    transaction, only tries (wait=False), and when it is taken the run goes to a worker."""
    if connection.vendor != "postgresql":
        return True
    if wait:
        sql.execute("SELECT pg_advisory_xact_lock(%s)", [CLAIM_LOCK_KEY])
        return True
    got = sql.fetchone("SELECT pg_try_advisory_xact_lock(%s)", [CLAIM_LOCK_KEY])
    return bool(got and got[0])


def _room(limit: int) -> bool:
    """Under the claim lock: is there room for one more running run?"""
    running = sql.fetchone(f"SELECT COUNT(*) FROM {sql.table(Run)} WHERE status = %s", ["running"])
    return not (running and running[0] >= limit)


def _take(run_id: Any) -> datetime | None:
    """queued → running, owned by this worker: the time of the claim, or None when the run
    was not queued."""
    now = timezone.now()
    at = sql.when(now)
    taken = sql.execute(
        f"UPDATE {sql.table(Run)} SET status = %s, owner = %s, heartbeat_at = %s,"
        " started_at = COALESCE(started_at, %s), deferred = %s WHERE id = %s AND status = %s",
        ["running", heartbeat.WORKER_ID, at, at, False, sql.uid(run_id), "queued"],
    )
    return now if taken else None


def claim(run_id: Any) -> Run | None:
    """Take a queued run in a transaction of its own; the run, or None."""
    limit = max_concurrent_runs()
    with transaction.atomic():
        _claim_lock(wait=True)  # before the tree's lock: see _claim_lock
        if connection.vendor == "postgresql":
            root = sql.fetchone(f"SELECT root_id FROM {sql.table(Run)} WHERE id = %s", [sql.uid(run_id)])
            events.lock_tree((root and root[0]) or run_id)
        if not _room(limit):
            if Run.objects.filter(pk=run_id, status=Run.Status.QUEUED).update(deferred=True):
                settle.deferrals_seen = True
            return None
        if _take(run_id) is None:
            return None
        run = sql.run_get(run_id)
        assert run is not None
        events.emit(run, "run.started", {"owner": heartbeat.WORKER_ID})
    return run


def claim_inline(run_id: Any, root_id: Any, run: Run | None = None) -> bool:
    """Inside the transaction that just queued `run_id` (its tree's lock held): claim it for
    this thread's next hop, if the thread's slot is free and there is room. True when claimed;
    False leaves the run queued, to be sent to a worker on commit as usual.

    `run`: the caller's up-to-date copy of the run, if it has one: it is brought to what the
    claim wrote and kept for the hop, which then need not load the run again.

    If the transaction rolls back, so does the claim: the next hop finds the run not running
    (`take_claimed`) and claims it the usual way, or finds nothing to do."""
    if not inline.free() or not transaction.get_connection().in_atomic_block:
        return False
    if not _claim_lock(wait=False) or not _room(max_concurrent_runs()):
        return False
    at = _take(run_id)
    if at is None:
        return False
    events.emit_for(run_id, root_id, "run.started", {"owner": heartbeat.WORKER_ID})
    if run is not None:
        run.status, run.owner, run.heartbeat_at, run.deferred = (
            Run.Status.RUNNING,
            heartbeat.WORKER_ID,
            at,
            False,
        )
        run.started_at = run.started_at or at
        run._state.fields_cache = {}  # related objects are read afresh, as from a loaded run
    inline.take(run_id, claimed=True, run=run)
    # Beating from now on: the current step may go on for a while before its hop takes the
    # run (a background child, then more turns of its parent), and a claimed run whose
    # heartbeat went stale would be reaped as lost.
    heartbeat.hold(run_id)
    return True


def claim_next_ready(root_id: Any) -> None:
    """At the end of a step's last transaction (its run just ended), if this thread's slot is
    still free: claim, in this same commit, the next run listed for this process's worker
    threads (`ready`), and keep it for this thread's next hop. The thread would have taken it
    from the list next anyway; this saves the claim a transaction of its own, and the run
    becomes `running` just as late as before, when a thread is free for it.

    On PostgreSQL only a run of the same tree (claiming takes its tree's lock, and a second
    tree's lock here could deadlock); SQLite serialises every writer anyway. A run that cannot
    be claimed now (no room, no longer queued, its tree unknown) goes back to the head of the
    list."""
    from runs_app.engine import ready

    if not inline.free() or not transaction.get_connection().in_atomic_block:
        return
    same_tree = connection.vendor == "postgresql"
    entry = ready.take_head(str(root_id) if same_tree else None)
    if entry is None:
        return
    rid, root, run = entry
    if root is None or not claim_inline(rid, root, run):
        ready.put_back(entry)


def take_claimed(run_id: Any, run: Run | None = None) -> Run | None:
    """The next hop's run, claimed by `claim_inline` in a transaction that committed.

    With the claimer's copy (`run`), only what others may have changed since is read again
    (status, owner, inbox flag): the claim's transaction may have rolled back, the run may
    have been cancelled or steered meanwhile. Its other columns change only under its owner."""
    row = sql.fetchone(
        f"SELECT status, owner, has_inbox, turns FROM {sql.table(Run)} WHERE id = %s", [sql.uid(run_id)]
    )
    if row is not None and row[0] == Run.Status.RUNNING and row[1] == heartbeat.WORKER_ID:
        if run is None:
            # A parent woken by the settle of its last child: the copy it kept when it went to
            # wait, if it waited in this process in the embedded mode (`store.Transcript.run`).
            run = store.kept_run(run_id)
            if run is None:
                return sql.run_get(run_id)
            run.status, run.owner, run.deferred = Run.Status.RUNNING, heartbeat.WORKER_ID, False
        if run.turns != row[3]:  # advanced by another process meanwhile: the copy is stale
            return sql.run_get(run_id)
        run.has_inbox = bool(row[2])
        return run
    heartbeat.release(run_id)  # rolled back, or cancelled meanwhile
    if row is not None and row[0] == Run.Status.QUEUED:
        return claim(run_id)
    return None


def give_back(run_id: Any) -> None:
    """Undo `claim_inline` for a hop that will not happen (its step failed): the run is queued
    again and sent to a worker. If even this fails, the run's heartbeat has stopped, and the
    reaper deals with it as with any run whose worker died."""
    heartbeat.release(run_id)
    from runs_app.tasks import advance_run

    try:
        with transaction.atomic():
            if sql.execute(
                f"UPDATE {sql.table(Run)} SET status = %s, owner = %s WHERE id = %s AND status = %s AND owner = %s",
                ["queued", "", sql.uid(run_id), "running", heartbeat.WORKER_ID],
            ):
                rid = str(run_id)
                transaction.on_commit(lambda: advance_run.delay(rid), robust=True)
    except Exception:
        log.exception("could not give back run %s", run_id)
