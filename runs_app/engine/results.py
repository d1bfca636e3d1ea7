"""Background delegate tasks (SPEC §6.3): check_result, list_results, cancel_task, await_sessions.

The tool (through the engine) and REST (`/results/…`) share these functions."""

from __future__ import annotations

import json
import uuid
from typing import Any

from runs_app.engine.cancel import cancel_tree
from runs_app.engine.outcomes import await_outcome, background_tasks, result_view
from runs_app.engine.tools.base import ToolResult
from runs_app.models import TERMINAL_STATUSES, Run

MAX_AWAIT_IDS = 128
MAX_TIMEOUT_MS = 120_000
DEFAULT_TIMEOUT_MS = 30_000


def parse_task_id(raw: Any, action: str) -> uuid.UUID | ToolResult:
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return ToolResult.fail(f"Missing 'task_id' parameter for {action}", code="invalid")
    try:
        return uuid.UUID(str(raw).strip())
    except ValueError:
        return ToolResult.fail(f"Invalid task_id '{raw}': must be a valid UUID", code="invalid")


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
    run = background_tasks(caller).filter(pk=task_id).first()
    if run is None:
        return ToolResult.fail(f"No result found for task_id '{task_id}'", code="not_found")
    return _view_result(run)


def list_results(caller: Run | None) -> ToolResult:
    qs = background_tasks(caller)
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


def cancel_task(raw_task_id: Any, caller: Run | None) -> ToolResult:
    """cancel_task. REST checks who may cancel before it calls this."""
    task_id = parse_task_id(raw_task_id, "cancel_task")
    if isinstance(task_id, ToolResult):
        return task_id
    run = background_tasks(caller).filter(pk=task_id).first()
    if run is None:
        return ToolResult.fail(f"No task found for task_id '{task_id}'", code="not_found")
    if run.status in TERMINAL_STATUSES:
        return ToolResult.fail(f"Task '{task_id}' is not running (status: {run.status})")
    cancel_tree(run)
    return ToolResult.ok(f"Task '{task_id}' cancelled: the running task was aborted.")


def validate_await(args: dict[str, Any]) -> tuple[list[str], int] | ToolResult:
    raw = args.get("task_ids")
    if raw is None:
        return ToolResult.fail("Missing 'task_ids' parameter for await_sessions", code="invalid")
    if not isinstance(raw, list):
        return ToolResult.fail("'task_ids' must be an array of task ids", code="invalid")
    if not raw:
        return ToolResult.fail("'task_ids' must contain at least one task id", code="invalid")
    if len(raw) > MAX_AWAIT_IDS:
        return ToolResult.fail(
            f"'task_ids' must contain no more than {MAX_AWAIT_IDS} task ids", code="invalid"
        )
    ids: list[str] = []
    for item in raw:
        try:
            value = str(uuid.UUID(str(item).strip()))
        except ValueError:
            return ToolResult.fail(f"Invalid task_id '{item}': must be a valid UUID", code="invalid")
        if value in ids:
            return ToolResult.fail(f"Duplicate task_id '{item}' in task_ids", code="invalid")
        ids.append(value)
    timeout = args.get("timeout_ms", DEFAULT_TIMEOUT_MS)
    if timeout is None:
        timeout = DEFAULT_TIMEOUT_MS
    if not isinstance(timeout, int) or isinstance(timeout, bool):
        return ToolResult.fail("'timeout_ms' must be an integer", code="invalid")
    if timeout > MAX_TIMEOUT_MS:
        return ToolResult.fail(f"'timeout_ms' must be no more than {MAX_TIMEOUT_MS}", code="invalid")
    if timeout < 0:
        return ToolResult.fail("'timeout_ms' must be no less than 0", code="invalid")
    return ids, timeout


def pending_tasks(task_ids: list[str], *, caller: Run | None) -> list[str]:
    """The tasks among these ids that are not terminal yet (what REST await_sessions waits on,
    see runs_app/api/views.py)."""
    going = background_tasks(caller).filter(pk__in=task_ids).exclude(status__in=TERMINAL_STATUSES)
    return [str(pk) for pk in going.values_list("pk", flat=True)]


def await_result(task_ids: list[str], *, caller: Run | None) -> ToolResult:
    """The await_sessions result as the tasks are now (pending ones count as a timeout)."""
    final = await_outcome(task_ids, caller=caller, final=True)
    assert final is not None
    return final
