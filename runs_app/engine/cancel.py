"""Ending a run and, in cascade, every descendant not yet terminal (SPEC §4 Cancellation):
an operator's cancel, a timeout, a loss."""

from __future__ import annotations

from runs_app import events
from runs_app.engine import messages as msg
from runs_app.engine.settle import run_finish
from runs_app.models import TERMINAL_STATUSES, Run


def descendants(run: Run) -> list[Run]:
    found: list[Run] = []
    frontier = [run.pk]
    while frontier:
        level = list(Run.objects.filter(parent_id__in=frontier))
        found.extend(level)
        frontier = [r.pk for r in level]
    return found


def cancel_descendants(run: Run) -> int:
    """A run ended (cancelled, timed out, lost): its live descendants end with it, each
    handing its parent `Cancelled by parent session`. How many changed."""
    changed = 0
    for child in descendants(run):
        if child.status not in TERMINAL_STATUSES and run_finish(
            child, status=Run.Status.CANCELLED, error=msg.CANCELLED_CASCADE
        ):
            changed += 1
    return changed


def cancel_tree(run: Run) -> int:
    """Cancel `run` (`Cancelled by user request`) and its descendants, in one transaction."""
    with events.tree_tx(run.root_id or run.pk):
        changed = int(run_finish(run, status=Run.Status.CANCELLED, error=msg.CANCELLED_DIRECT))
        return changed + cancel_descendants(run)


def end_with_descendants(run: Run, *, status: str, error: str) -> bool:
    """End `run` as `status` (timed out, lost), then cancel what it started."""
    if not run_finish(run, status=status, error=error):
        return False
    cancel_descendants(run)
    return True
