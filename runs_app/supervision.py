"""The reaper (SPEC §4 Supervision, ENGINE.md): periodic, and once at start-up.

A run whose worker vanished ends `lost`, and its parent's tool call is settled with that
failure, with one exception: a run whose model call was in flight (`Run.model_call_at`) is
queued again, and the call is made again. Nothing had happened yet that the call's answer
would have caused, so making it again repeats nothing but the call (docs/runs.md). It also
heals two gaps: a queued run whose task message was lost, and a waiting run whose wake-up
was lost."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from runs_app import events
from runs_app.engine import dispatch, heartbeat, timers, transitions
from runs_app.engine import messages as msg
from runs_app.engine.cancel import end_with_descendants
from runs_app.engine.settle import wake_if_ready
from runs_app.models import Run, ToolCall

log = logging.getLogger(__name__)


def _seconds(name: str, default: float) -> timedelta:
    return timedelta(seconds=float(getattr(settings, name, default)))


def reap_once(
    *, now: Any = None, startup: bool = False, stale_after: timedelta | None = None
) -> dict[str, int]:
    now = now or timezone.now()
    stale_after = stale_after or _seconds("CLAWBOARD_STALE_SECS", 30)
    requeue_after = _seconds("CLAWBOARD_REQUEUE_SECS", 60)
    counts = {"lost": 0, "timed_out": 0, "requeued": 0, "woken": 0, "await_expired": 0, "recalled": 0}

    stale = Q(status=Run.Status.RUNNING) & (
        Q(heartbeat_at__lt=now - stale_after) | Q(heartbeat_at__isnull=True)
    )
    if startup:
        # Embedded mode: this process is the only worker, so a run owned by anyone else
        # (an earlier boot) cannot be alive.
        stale |= Q(status=Run.Status.RUNNING) & ~Q(owner=heartbeat.WORKER_ID)
    # A run this very worker holds on a live thread is not lost, even if its heartbeat lags;
    # a run owned under another worker id (another process, an earlier boot) has no such excuse.
    for run in Run.objects.filter(stale).exclude(pk__in=heartbeat.held_ids(), owner=heartbeat.WORKER_ID):
        if run.model_call_at is not None:
            with events.tree_tx(run.root_id or run.pk):
                # Only as this reaper read it: still stale, under the same owner. Another
                # reaper may have queued it again meanwhile, and a worker claimed it.
                if transitions.move(
                    run, [Run.Status.RUNNING], Run.Status.QUEUED, event="run.queued",
                    data={"reason": msg.MODEL_CALL_AGAIN}, if_owner=run.owner, where=stale,
                    owner="", model_call_at=None,
                ):  # fmt: skip
                    dispatch.runnable(run.pk)
                    counts["recalled"] += 1
            continue
        # Its descendants are cancelled with it: nothing would ever read what they hand back.
        if end_with_descendants(run, status=Run.Status.LOST, error=msg.RUN_LOST):
            counts["lost"] += 1

    for run in Run.objects.filter(
        status__in=[Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.WAITING, Run.Status.AWAITING_APPROVAL],
        deadline__lt=now,
    ):
        if end_with_descendants(
            run, status=Run.Status.TIMED_OUT, error=f"timed out after {run.timeout_secs}s"
        ):
            counts["timed_out"] += 1

    for call_id in ToolCall.objects.filter(status=ToolCall.Status.PENDING, deadline__lt=now).values_list(
        "pk", flat=True
    ):
        if timers.expire_call(call_id):
            counts["await_expired"] += 1

    for run_id in Run.objects.filter(
        status=Run.Status.QUEUED, created_at__lt=now - requeue_after
    ).values_list("pk", flat=True):
        dispatch.dispatcher().send(dispatch.ADVANCE_TASK, [str(run_id)])
        counts["requeued"] += 1

    # A wake-up lost between settling and enqueueing: nothing blocks the run any more.
    unblocked = Run.objects.filter(status=Run.Status.WAITING).exclude(
        tool_calls__status=ToolCall.Status.PENDING
    ) | Run.objects.filter(status=Run.Status.AWAITING_APPROVAL).exclude(approvals__status="pending")
    for run in unblocked.distinct():
        with events.tree_tx(run.root_id or run.pk):
            if wake_if_ready(run):
                counts["woken"] += 1
    return counts
