"""A run as its step reads it: the row, and in the same SELECT what the step would otherwise
ask other tables for, one statement each. Each value holds as of that read, and each user
says why that is enough (or checks again where it must be exact):

- `day_cost_cents`: what the run's tracker spent today (the cost check before a model turn,
  `step.limit_reached`; a priced call's reservation checks again, exactly);
- `active_subagents`: its subagent children not yet ended (spawn's max_children_per_run,
  counted again before a refusal);
- `last_seq`: the seq of its last stored message (the transcript is read only when this
  process does not hold every message up to it);
- `parent_call`: the tool call of its parent that waits on it (its immutable fields)."""

from __future__ import annotations

from django.db.models import F, Func, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce

from policies_app.tracker import day_cost
from runs_app.models import ACTIVE_STATUSES, Message, Run, RunQuerySet


def step_rows(runs: RunQuerySet) -> RunQuerySet:
    active = (
        Run.objects.filter(parent_id=OuterRef("pk"), kind=Run.Kind.SUBAGENT, status__in=ACTIVE_STATUSES)
        .order_by()
        .annotate(n=Func(F("pk"), function="COUNT", output_field=IntegerField()))
        .values("n")
    )
    last = Message.objects.filter(run_id=OuterRef("pk")).order_by("-seq").values("seq")[:1]
    return runs.select_related("parent_call").annotate(
        day_cost_cents=day_cost(OuterRef("tracker_key")),
        active_subagents=Coalesce(Subquery(active), 0),
        last_seq=Subquery(last, output_field=IntegerField()),
    )
