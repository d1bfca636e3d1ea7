"""Settling: what happens, in one transaction, when a run reaches a terminal state, and when a
tool call a run waits on is done.

- The run is marked terminal (`transitions.move`: terminal states are never left).
- The parent's tool call that waits on it is completed once every child of that call has
  ended, and a parent with nothing left to wait for is queued again and dispatched.
- A background subagent announces to its parent at most once (a unique row), and
  sessions_yield / await_sessions calls that it satisfies are completed.
- A background delegate task is mirrored to `delegate_results/<task_id>.json`."""

from __future__ import annotations

import contextlib
import copy
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from runs_app import events
from runs_app.engine import dispatch, outcomes, transitions
from runs_app.engine import messages as msg
from runs_app.models import ACTIVE_STATUSES, TERMINAL_STATUSES, Announce, Approval, Run, ToolCall

log = logging.getLogger(__name__)


def run_finish(
    run: Run | Any,
    *,
    status: str,
    output: str = "",
    error: str = "",
    owner: str | None = None,
    frm: Iterable[str] = ACTIVE_STATUSES,
    recorded: Callable[[], None] | None = None,
    **fields: Any,
) -> bool:
    """Move a run (a Run, or its id) to a terminal state and settle what depends on it.
    False when it was terminal already (or, with `owner`, no longer this worker's).
    `fields` are written by the same UPDATE (a finishing model turn's usage), and `recorded`
    is called once it matched, before the terminal event (that turn's message and events)."""
    assert status in TERMINAL_STATUSES
    if not isinstance(run, Run):
        found = Run.objects.filter(pk=run).select_related("parent_call").one()
        if found is None:
            return False
        run = found
    with events.tree_tx(run.root_id or run.pk):
        now = timezone.now()
        ended = copy.copy(run)
        ended.status, ended.output, ended.error, ended.finished_at = status, output, error, now
        tool_result = outcomes.child_result(ended, run.result_chars)
        if run.kind == Run.Kind.DELEGATE and run.execution == Run.Execution.BACKGROUND:
            # Registered before the terminal event's publication (commit hooks run in order):
            # whoever that event wakes (results/await, a REST wait) finds the file final.
            mirror_later(run.pk)
        fields.update(output=output, error=error, finished_at=now, owner="", tool_result=tool_result)
        if not stop(run, frm, status, if_owner=owner, **fields):
            return False
        if recorded is not None:
            recorded()
        data = {"status": status, "output": output[:2000], "error": error, "tool_result": tool_result}
        events.emit(run, f"run.{status}", data)
        run.output, run.error, run.finished_at, run.owner, run.tool_result = (
            output,
            error,
            now,
            "",
            tool_result,
        )
        # A run that ended no longer waits for anyone: its open tool calls close with its end
        # (no waterfall bar outlives the run) and its open questions leave the inbox.
        # (Its own worker ends it from `running`, where nothing is pending.)
        if owner is None:
            ToolCall.objects.filter(run_id=run.pk, status=ToolCall.Status.PENDING).update(
                status=ToolCall.Status.CANCELLED, finished_at=now
            )
            Approval.objects.filter(run_id=run.pk, status=Approval.Status.PENDING).update(
                status=Approval.Status.CANCELLED, decided_at=now, reason=f"run {status} before a decision"
            )
        if run.parent_call_id:
            _settle_parent_call(run)
        elif run.execution == Run.Execution.BACKGROUND and run.parent_id:
            _background_done(run)
    return True


def stop(run: Run, frm: Iterable[str], to: str, **how: Any) -> bool:
    """`transitions.move` for a move that may take a run out of `running`: when runs are held
    back by [delegate].max_concurrent_runs, they try again once this commits. Whether any is
    held back is a condition of the same UPDATE (the database decides, for every process), so
    a stop reads nothing more unless some run is deferred."""
    frm = list(frm)
    quiet = ~Q(status=Run.Status.RUNNING) | ~Exists(
        Run.objects.filter(status=Run.Status.QUEUED, deferred=True)
    )
    if transitions.move(run, frm, to, where=quiet, **how):
        return True
    if not transitions.move(run, frm, to, **how):
        return False
    dispatch_deferred()
    return True


def _settle_parent_call(child: Run) -> None:
    """Complete the parent's tool call that waits on `child` if every child of it has ended.
    The call's fields read here never change once it waits (the child's step read them with
    its row); whether it is still pending is the condition of its UPDATE."""
    call = child.parent_call
    if call is None:
        return
    parent = Run(pk=call.run_id, root_id=child.root_id or child.pk)  # a tree shares its root
    if call.wait_kind == "parallel":
        if Run.objects.filter(parent_call_id=call.pk).exclude(status__in=TERMINAL_STATUSES).exists():
            return  # a sibling still runs; the last one to end hands the result over
        siblings = list(Run.objects.filter(parent_call_id=call.pk))
        order = {rid: i for i, rid in enumerate((call.result or {}).get("order", []))}
        siblings.sort(key=lambda s: order.get(str(s.pk), 0))
        result = outcomes.parallel_result(siblings, child.result_chars)
    else:
        result = child.tool_result or outcomes.child_result(child, child.result_chars)
    complete_call(call, result, run=parent)


def complete_call(call: ToolCall, result: dict[str, Any], *, run: Run) -> bool:
    """Mark a pending tool call of `run` done (at most once) and wake the run if nothing else
    is pending. Inside the caller's transaction."""
    events.within(run.root_id or run.pk)
    now = timezone.now()
    if not ToolCall.objects.filter(pk=call.pk, status=ToolCall.Status.PENDING).update(
        status=ToolCall.Status.DONE, result=result, finished_at=now
    ):
        return False
    call.status, call.result, call.finished_at = ToolCall.Status.DONE, result, now
    events.emit(run, "tool.result", {"call_id": call.call_id, "name": call.name, **result})
    wake_if_ready(run)
    return True


def wake_if_ready(run: Run) -> bool:
    """Queue a waiting run again, and dispatch it, once nothing blocks it: one UPDATE, whose
    condition is that no call blocks the run. Inside the caller's transaction."""
    if not transitions.move(
        run, transitions.WAITING_STATUSES, Run.Status.QUEUED, event="run.queued", data={"resumed": True},
        where=~Exists(transitions.blocking_calls(OuterRef("pk"))),
    ):  # fmt: skip
        return False
    dispatch.runnable(run.pk)
    return True


def _background_done(child: Run) -> None:
    parent = child.parent
    if parent is None:
        return
    if child.kind == Run.Kind.SUBAGENT and not child.via_api and parent.status not in TERMINAL_STATUSES:
        silent = child.status == Run.Status.COMPLETED and child.output.strip().lower() in msg.SILENT_REPLIES
        if not silent:
            _, created = Announce.objects.get_or_create(
                child=child, defaults={"parent": parent, "text": outcomes.announce_text(child)}
            )
            if created:
                Run.objects.filter(pk=parent.pk).update(has_inbox=True)
                events.emit(
                    parent, "run.announce", {"child_id": str(child.pk), "session_key": child.session_key}
                )
    wake_waiters(parent)


def wake_waiters(parent: Run) -> None:
    """sessions_yield and await_sessions calls that may now be satisfied: the parent's, and
    await_sessions calls anywhere in its tree (any run of a tree may await its tasks)."""
    calls = ToolCall.objects.filter(status=ToolCall.Status.PENDING).filter(
        Q(run=parent, wait_kind="yield") | Q(run__root_id=parent.root_id or parent.pk, wait_kind="await")
    )
    for call in calls.select_for_update(of=("self",)).select_related("run").order_by("pk"):
        if call.wait_kind == "yield":
            active = Run.objects.filter(
                parent=parent, execution=Run.Execution.BACKGROUND, kind=Run.Kind.SUBAGENT, via_api=False
            ).exclude(status__in=TERMINAL_STATUSES)
            if not active.exists():
                done = {"success": True, "output": "All background subagents have finished.", "error": None}
                complete_call(call, done, run=call.run)
        else:
            outcome = outcomes.await_outcome(call.arguments.get("task_ids", []), caller=call.run, final=False)
            if outcome is not None:
                complete_call(call, outcome.as_dict(), run=call.run)


def dispatch_deferred() -> None:
    """A run left `running`: runs held back by [delegate].max_concurrent_runs try again."""

    def send() -> None:
        held = Run.objects.filter(status=Run.Status.QUEUED, deferred=True).order_by("created_at")
        for run_id in held.values_list("pk", flat=True)[:4]:
            dispatch.dispatcher().send(dispatch.ADVANCE_TASK, [str(run_id)])

    transaction.on_commit(send, robust=True)


def mirror_later(run_id: Any) -> None:
    """Write the task's mirror file once the current transaction commits."""
    transaction.on_commit(lambda: mirror_result_file(run_id), robust=True)


def mirror_result_file(run_id: Any) -> None:
    """Write `<caller workspace>/delegate_results/<task_id>.json` atomically (temp file + rename).

    Writers of one folder take turns (an exclusive flock on the folder, which holds across
    processes) and read the run only once they hold it. Without that, the start writer (in the
    request that queued the task) could read "running", be overtaken by a worker that finished
    the task and wrote "completed", and then rename its stale copy over the final one."""
    found = Run.objects.filter(pk=run_id).values_list("results_dir", flat=True).first()
    if not found:
        return
    folder = Path(found)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with results_folder_lock(folder):
            run = Run.objects.filter(pk=run_id).first()
            if run is None:
                return
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{run.pk}.", suffix=".tmp")
            with os.fdopen(fd, "w") as fh:
                json.dump(outcomes.result_view(run), fh, indent=2)
            os.replace(tmp, folder / f"{run.pk}.json")
    except OSError:
        log.exception("could not mirror task %s", run_id)


@contextlib.contextmanager
def results_folder_lock(folder: Path) -> Iterator[None]:
    """Hold the exclusive lock of a results folder (released when the descriptor closes)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
