"""Spending a tracker's budget (SPEC §3.1) from the engine: one action per acting call, and no
action (nor model call) once the tracker's daily cost budget is spent; and the output-token
budget of a run tree (SPEC §2.3 max_output_tokens)."""

from __future__ import annotations

from typing import Any

from django.db.models import Sum

from policies_app.specs import RuntimeProfileSpec
from policies_app.tracker import tracker_record_action
from runs_app.engine import messages as msg
from runs_app.engine.frozen import FrozenPolicy, policy_of
from runs_app.engine.providers import ChatRequest, Usage, cost_cents
from runs_app.models import Run

# A model call whose provider sets no max_tokens is reserved as if it could answer this many.
DEFAULT_MAX_OUTPUT_TOKENS = 4096
# The prompt's tokens are not known before the call: counted high, one per 3 characters.
CHARS_PER_TOKEN = 3


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
    budget covers the run that holds it and all its descendants. The holders were listed when
    the run was admitted (`Run.budget_holders`)."""
    for holder_id in run.budget_holders:
        holder = run if str(holder_id) == str(run.pk) else Run.objects.filter(pk=holder_id).one()
        budget = policy_of(holder).runtime.max_output_tokens if holder is not None else 0
        if budget:
            used = subtree_output_tokens(holder_id)
            if used >= budget:
                return msg.output_budget(used, budget)
    return None


def worst_case_cents(policy: FrozenPolicy, request: ChatRequest) -> float:
    """The most a model call can cost, reserved on the tracker before it starts: the prompt's
    input and `max_tokens` of output, at the dearest candidate of the provider chain."""
    prompt_tokens = -(-sum(len(m.content) for m in request.messages) // CHARS_PER_TOKEN)
    worst = 0.0
    for spec in policy.chain.values():  # the provider itself and its fallbacks
        output = request.max_tokens or spec.max_tokens or DEFAULT_MAX_OUTPUT_TOKENS
        worst = max(worst, cost_cents(spec, Usage(prompt_tokens, output)))
    return worst
