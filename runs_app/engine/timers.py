"""Deadlines that come due: a run's timeout, and an await_sessions call's `timeout_ms`. Sent as
delayed tasks when they are set (`dispatch.later`); the reaper's sweep is the backstop."""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from runs_app import events
from runs_app.engine import dispatch
from runs_app.engine.cancel import end_with_descendants
from runs_app.engine.outcomes import await_outcome
from runs_app.engine.settle import complete_call
from runs_app.models import ACTIVE_STATUSES, Run, ToolCall


def expire_call(call_id: int) -> bool:
    call = ToolCall.objects.select_related("run").filter(pk=call_id, status=ToolCall.Status.PENDING).first()
    if call is None:
        return False
    outcome = await_outcome(call.arguments.get("task_ids", []), caller=call.run, final=True)
    if outcome is None:
        return False
    with events.tree_tx(call.run.root_id or call.run_id, durable=True):
        return complete_call(call, outcome.as_dict(), run=call.run)


def expire_run(run_id: Any) -> bool:
    run = Run.objects.filter(pk=run_id, status__in=ACTIVE_STATUSES).one()
    if run is None or run.deadline is None:
        return False
    left = (run.deadline - timezone.now()).total_seconds()
    if left > 0:
        # Sent early (a clock ahead of this one, a countdown rounded down): come back then.
        dispatch.dispatcher().send(dispatch.EXPIRE_RUN_TASK, [str(run.pk)], countdown=left)
        return False
    return end_with_descendants(
        run, status=Run.Status.TIMED_OUT, error=f"timed out after {run.timeout_secs}s"
    )
