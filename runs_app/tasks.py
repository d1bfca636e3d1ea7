"""Celery tasks: thin, they take ids and call the engine or a service."""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections


@shared_task(name="runs.advance_run", acks_late=True, ignore_result=True)
def advance_run(run_id: str, drain: bool = False) -> None:
    """Advance a run. `drain`: this message is one of the embedded worker's wake-ups, which
    then advances the runs queued for this process until none is left (`engine/ready.py`)."""
    from runs_app.engine import ready
    from runs_app.engine.loop import advance_run as advance

    close_old_connections()
    try:
        if drain:
            ready.drain(advance, run_id)
        else:
            advance(run_id)
    finally:
        close_old_connections()


@shared_task(name="runs.reap", ignore_result=True)
def reap() -> None:
    from runs_app.supervision import reap_once

    close_old_connections()
    reap_once()


@shared_task(name="runs.fire_schedules", ignore_result=True)
def fire_schedules() -> None:
    from runs_app.services import schedules_fire_due

    close_old_connections()
    schedules_fire_due()


@shared_task(name="runs.expire_call", ignore_result=True)
def expire_call(call_id: int) -> None:
    """Promptly settle an await_sessions call whose deadline has come (the reaper is the backstop)."""
    from runs_app.engine.results import await_outcome
    from runs_app.engine.settle import complete_call
    from runs_app.models import ToolCall

    close_old_connections()
    call = ToolCall.objects.select_related("run").filter(pk=call_id, status="pending").first()
    if call is None:
        return
    outcome = await_outcome(call.arguments.get("task_ids", []), caller=call.run, final=True)
    if outcome is not None:
        complete_call(call, outcome)


@shared_task(name="runs.expire_run", ignore_result=True)
def expire_run(run_id: str) -> None:
    """End a run whose deadline has come, promptly (the reaper's sweep is the backstop)."""
    from django.utils import timezone

    from runs_app.engine.settle import run_finish
    from runs_app.models import ACTIVE_STATUSES, Run
    from runs_app.services import cancel_descendants

    close_old_connections()
    run = Run.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES).first()
    if run is None or run.deadline is None:
        return
    if run.deadline > timezone.now():
        expire_run.apply_async((run_id,), countdown=(run.deadline - timezone.now()).total_seconds())
        return
    if run_finish(run.pk, status=Run.Status.TIMED_OUT, error=f"timed out after {run.timeout_secs}s"):
        cancel_descendants(run)
