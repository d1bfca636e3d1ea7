"""Background delegate tasks (SPEC §6.3): check_result, list_results, cancel_task, await_sessions.

The tool (through the engine) and REST (`/results/…`) share these functions."""

from __future__ import annotations

import json
import uuid
from typing import Any

from runs_app.engine.settle import result_view
from runs_app.engine.tools.base import ToolResult
from runs_app.models import TERMINAL_STATUSES, Run

MAX_AWAIT_IDS = 128
MAX_TIMEOUT_MS = 120_000
DEFAULT_TIMEOUT_MS = 30_000
FAILED_STATES = frozenset({"failed", "cancelled", "lost", "timed_out"})


def _tasks(caller: Run | None) -> Any:
    qs = Run.objects.filter(kind=Run.Kind.DELEGATE, execution=Run.Execution.BACKGROUND)
    return qs.filter(root_id=caller.root_id) if caller is not None else qs


def parse_task_id(raw: Any, action: str) -> uuid.UUID | ToolResult:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return ToolResult.fail(f"Missing 'task_id' parameter for {action}")
    try:
        return uuid.UUID(str(raw).strip())
    except ValueError:
        return ToolResult.fail(f"Invalid task_id '{raw}': must be a valid UUID")


def _view_result(run: Run) -> ToolResult:
    view = result_view(run)
    text = json.dumps(view)
    if run.status == Run.Status.COMPLETED:
        return ToolResult.ok(text)
    if run.status in TERMINAL_STATUSES:
        error = view["error"] or f"background task is {run.status} and will not complete"
        return ToolResult.fail(error, output=text)
    return ToolResult.fail("background task is still running", output=text)


def check_result(raw_task_id: Any, caller: Run | None) -> ToolResult:
    task_id = parse_task_id(raw_task_id, "check_result")
    if isinstance(task_id, ToolResult):
        return task_id
    run = _tasks(caller).filter(pk=task_id).first()
    if run is None:
        return ToolResult.fail(f"No result found for task_id '{task_id}'")
    return _view_result(run)


def list_results(caller: Run | None) -> ToolResult:
    qs = _tasks(caller)
    if caller is not None:
        qs = qs.filter(parent=caller)
    rows = [
        {
            k: v
            for k, v in result_view(r).items()
            if k in ("task_id", "agent", "status", "started_at", "finished_at")
        }
        for r in qs.order_by("created_at")
    ]
    if not rows:
        return ToolResult.ok("No background delegate results found.")
    return ToolResult.ok(json.dumps(rows))


def cancel_task(raw_task_id: Any, caller: Run | None, user: Any = None) -> ToolResult:
    from runs_app.services import run_cancel

    task_id = parse_task_id(raw_task_id, "cancel_task")
    if isinstance(task_id, ToolResult):
        return task_id
    run = _tasks(caller).filter(pk=task_id).first()
    if run is None:
        return ToolResult.fail(f"No task found for task_id '{task_id}'")
    if run.status in TERMINAL_STATUSES:
        return ToolResult.fail(f"Task '{task_id}' is not running (status: {run.status})")
    run_cancel(run=run, user=user, check_owner=user is not None)
    return ToolResult.ok(f"Task '{task_id}' cancelled: the running task was aborted.")


def validate_await(args: dict[str, Any]) -> tuple[list[str], int] | ToolResult:
    raw = args.get("task_ids")
    if raw is None:
        return ToolResult.fail("Missing 'task_ids' parameter for await_sessions")
    if not isinstance(raw, list):
        return ToolResult.fail("'task_ids' must be an array of task ids")
    if not raw:
        return ToolResult.fail("'task_ids' must contain at least one task id")
    if len(raw) > MAX_AWAIT_IDS:
        return ToolResult.fail(f"'task_ids' must contain no more than {MAX_AWAIT_IDS} task ids")
    ids: list[str] = []
    for item in raw:
        try:
            value = str(uuid.UUID(str(item).strip()))
        except ValueError:
            return ToolResult.fail(f"Invalid task_id '{item}': must be a valid UUID")
        if value in ids:
            return ToolResult.fail(f"Duplicate task_id '{item}' in task_ids")
        ids.append(value)
    timeout = args.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if timeout is None:
        timeout = DEFAULT_TIMEOUT_MS
    if not isinstance(timeout, int) or isinstance(timeout, bool):
        return ToolResult.fail("'timeout_ms' must be an integer")
    if timeout > MAX_TIMEOUT_MS:
        return ToolResult.fail(f"'timeout_ms' must be no more than {MAX_TIMEOUT_MS}")
    if timeout < 0:
        return ToolResult.fail("'timeout_ms' must be no less than 0")
    return ids, timeout


def await_outcome(task_ids: list[str], *, caller: Run | None, final: bool) -> dict[str, Any] | None:
    """The await_sessions result, or None while tasks are pending and `final` is False."""
    found = {str(r.pk): r for r in _tasks(caller).filter(pk__in=task_ids)}
    missing = [t for t in task_ids if t not in found]
    pending = [t for t in task_ids if t in found and found[t].status not in TERMINAL_STATUSES]
    if pending and not final:
        return None
    failed = [t for t in task_ids if t in found and found[t].status in FAILED_STATES]
    done = [found[t] for t in task_ids if t in found and found[t].status in TERMINAL_STATUSES]
    body = {
        "status": "timeout" if pending else "complete",
        "completed": sum(1 for r in done if r.status == Run.Status.COMPLETED),
        "pending": pending,
        "missing": missing,
        "failed": failed,
        "results": [result_view(r) for r in done],
    }
    output = json.dumps(body)
    if pending or missing:
        return ToolResult.fail("one or more background tasks are still pending or missing", output).as_dict()
    if failed:
        return ToolResult.fail("one or more background tasks failed or were cancelled", output).as_dict()
    return ToolResult.ok(output).as_dict()


def pending_tasks(task_ids: list[str], *, caller: Run | None) -> list[str]:
    """The tasks among these ids that are not terminal yet (what REST await_sessions waits on,
    see runs_app/api/views.py)."""
    going = _tasks(caller).filter(pk__in=task_ids).exclude(status__in=TERMINAL_STATUSES)
    return [str(pk) for pk in going.values_list("pk", flat=True)]


def await_result(task_ids: list[str], *, caller: Run | None) -> ToolResult:
    """The await_sessions result as the tasks are now (pending ones count as a timeout)."""
    final = await_outcome(task_ids, caller=caller, final=True)
    assert final is not None
    return ToolResult(final["success"], final["output"], final["error"])
