"""Spending a tracker's budget (SPEC §3.1) from the engine: one action per acting call, and no
action (nor model call) once the tracker's daily cost budget is spent."""

from __future__ import annotations

from typing import Any

from django.db.models import Sum

from policies_app.specs import RuntimeProfileSpec
from policies_app.tracker import tracker_record_action
from runs_app.engine import messages as msg
from runs_app.models import Run


def spend_action(*, key: str, runtime: RuntimeProfileSpec, record: bool = True) -> None:
    """Record one action on the tracker, or raise `BudgetExhausted` recording nothing.
    `record=False`: only raise it if the budget would refuse the action."""
    tracker_record_action(
        key=key,
        max_actions_per_hour=runtime.max_actions_per_hour,
        max_cost_per_day_cents=runtime.max_cost_per_day_cents,
        record=record,
    )


def subtree_output_tokens(run_id: Any) -> int:
    """Output tokens of a run and all its descendants."""
    total = Run.objects.filter(pk=run_id).aggregate(s=Sum("output_tokens"))["s"] or 0
    frontier = [run_id]
    while frontier:
        rows = list(Run.objects.filter(parent_id__in=frontier).values_list("pk", "output_tokens"))
        total += sum(tokens for _, tokens in rows)
        frontier = [pk for pk, _ in rows]
    return int(total)


def output_budget_refusal(run: Run) -> str | None:
    """The refusal when this run's or an ancestor's `max_output_tokens` budget is spent: each
    budget covers the run that holds it and all its descendants (SPEC §2.3)."""
    holders = (run.policy or {}).get("budget_holders")
    if holders is not None:
        for holder_id in holders:
            holder = (
                run
                if str(holder_id) == str(run.pk)
                else Run.objects.filter(pk=holder_id).only("policy").first()
            )
            budget = int(
                ((holder.policy or {}) if holder else {}).get("runtime", {}).get("max_output_tokens") or 0
            )
            if budget:
                used = subtree_output_tokens(holder_id)
                if used >= budget:
                    return msg.output_budget(used, budget)
        return None
    node: Run | None = run  # runs created before budget_holders existed
    while node is not None:
        budget = int((node.policy or {}).get("runtime", {}).get("max_output_tokens") or 0)
        if budget:
            used = subtree_output_tokens(node.pk)
            if used >= budget:
                return msg.output_budget(used, budget)
        node = (
            Run.objects.filter(pk=node.parent_id).only("pk", "parent_id", "policy").first()
            if node.parent_id
            else None
        )
    return None
