"""Run status changes, in one place: every move of a run from some statuses to another goes
through `move`, which is a conditional UPDATE and the event that says it, in one transaction.

The condition is what makes the engine safe without locks held across steps: a claim only
wins over `queued`, a terminal status is never left (terminal runs match no `frm` list), and a
worker only changes a run it still owns. A move that matches no row writes nothing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import Q, QuerySet
from django.db.models.expressions import Combinable

from runs_app import events
from runs_app.models import Approval, Run, ToolCall

WAITING_STATUSES = (Run.Status.WAITING, Run.Status.AWAITING_APPROVAL)


def move(
    run: Run,
    frm: Iterable[str],
    to: str,
    *,
    event: str | None = None,
    data: dict[str, Any] | None = None,
    if_owner: str | None = None,
    where: Q | Combinable | None = None,
    **fields: Any | Combinable,
) -> bool:
    """Move `run` from one of the statuses `frm` to `to`, setting `fields` (values or
    expressions), and emit `event` with `data`. `if_owner`: only if that worker owns the run;
    `where`: only if that condition holds too, checked in the same UPDATE. True when the run
    moved; the caller's copy gets the new status. Inside the caller's transaction."""
    events.within(run.root_id or run.pk)
    rows = Run.objects.filter(pk=run.pk, status__in=list(frm))
    if if_owner is not None:
        rows = rows.filter(owner=if_owner)
    if where is not None:
        rows = rows.filter(where)
    if not rows.update(status=to, **fields):
        return False
    run.status = to
    if event is not None:
        events.emit(run, event, data)
    return True


def lock_run(run_id: Any) -> None:
    """Serialise the "does this run still wait?" decisions on its row (PostgreSQL; SQLite's
    IMMEDIATE transactions serialise writers already), so that a run going to wait and a
    settle or an approval waking it never miss each other."""
    if connection.vendor == "postgresql":
        list(Run.objects.select_for_update().filter(pk=run_id).values_list("pk", flat=True))


def blocking_calls(run_id: Any) -> QuerySet[ToolCall]:
    """The pending tool calls that keep a run waiting (`run_id`: a value or an outer
    reference). An approved call stays pending until the run executes it, but it blocks
    nothing: the run runs it when it resumes."""
    pending = ToolCall.objects.filter(run_id=run_id, status=ToolCall.Status.PENDING)
    return pending.exclude(wait_kind="approval", approval__status=Approval.Status.APPROVED)


def blocking(run_id: Any) -> tuple[int, int]:
    """How many pending tool calls a run still waits on, and how many of those are approvals
    not yet given. An approved call stays pending until the run executes it, but it blocks
    nothing: the run runs it when it resumes. Counted here from the few pending rows (one
    plain SELECT) rather than by an aggregate over an exclude, which costs more to build."""
    pending = ToolCall.objects.filter(run_id=run_id, status=ToolCall.Status.PENDING).values_list(
        "wait_kind", "approval__status"
    )
    asks = n = 0
    for wait_kind, approval in pending:
        if wait_kind == "approval":
            if approval == Approval.Status.APPROVED:
                continue
            asks += 1
        n += 1
    return n, asks
