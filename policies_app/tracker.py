"""Budget trackers (SPEC §3.1): a sliding one-hour window of actions and a per-day cost sum.

Policies that share a tracker key consume the same budget. Check-and-record is atomic:
on SQLite `transaction.atomic()` begins IMMEDIATE (write lock first); on PostgreSQL the
`select_for_update` of the tracker row serialises concurrent recorders.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any, TypedDict

from django.db import transaction
from django.db.models import F, FloatField, Func, IntegerField, OuterRef, Subquery, Value
from django.db.models.functions import Coalesce, Greatest
from django.utils import timezone

from policies_app.models import Tracker, TrackerAction, TrackerCost
from policies_app.policy import RATE_LIMIT_ACTIONS, RATE_LIMIT_COST

WINDOW = timedelta(hours=1)


class BudgetExhausted(Exception):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class TrackerUsage(TypedDict):
    actions_last_hour: int
    cost_today_cents: float


def _locked_tracker(key: str) -> Tracker:
    """The tracker row, locked for the rest of the transaction on PostgreSQL (SQLite's
    IMMEDIATE transactions hold the database's write lock already)."""
    tracker, _ = Tracker.objects.select_for_update().get_or_create(key=key)
    return tracker


def _today(now: datetime | None) -> date:
    """The budget day: the date in the server's TIME_ZONE (never a zone activated for a request)."""
    return (now or timezone.now()).astimezone(timezone.get_default_timezone()).date()


def tracker_record_action(
    *,
    key: str,
    max_actions_per_hour: int,
    max_cost_per_day_cents: int | None = None,
    now: datetime | None = None,
    record: bool = True,
) -> None:
    """Record one action, or raise `BudgetExhausted` (recording nothing) when the window is
    full or, given `max_cost_per_day_cents`, when the day's cost budget is spent (the action
    limit is reported first). `record=False`: the checks only (a caller that will refuse for a
    later reason anyway, but must report a budget refusal first)."""
    if max_actions_per_hour <= 0:
        raise BudgetExhausted(RATE_LIMIT_ACTIONS)
    # No savepoint: nothing is written before the checks pass, so a refusal is raised only
    # once the block has ended and leaves a caller's transaction usable.
    refusal = None
    with transaction.atomic(savepoint=False):
        if transaction.get_connection().vendor == "postgresql":
            # The row lock first, so that the counts below are read after every concurrent
            # recorder of this tracker has committed (a statement's snapshot is taken at its start).
            _locked_tracker(key)
        # Read the clock only once the lock is held, so no concurrent insert can be newer than `now`.
        at = now or timezone.now()
        window_start = at - WINDOW
        found = _budget_state(key, at, max_actions_per_hour)
        if found is None:
            tracker = _locked_tracker(key)
            found = (tracker.pk, 0, _cost_on(key, _today(at)))
        tracker_id, recent, spent = found
        if recent >= max_actions_per_hour:
            refusal = RATE_LIMIT_ACTIONS
        elif max_cost_per_day_cents is not None and spent >= max_cost_per_day_cents:
            refusal = RATE_LIMIT_COST
        elif record:
            TrackerAction.objects.create(tracker_id=tracker_id, at=at)
            if at.second == 0:  # prune the expired window now and then, not on every record
                TrackerAction.objects.filter(tracker_id=tracker_id, at__lte=window_start).delete()
    if refusal is not None:
        raise BudgetExhausted(refusal)


def _budget_state(key: str, at: datetime, max_actions_per_hour: int) -> tuple[int, int, float] | None:
    """The tracker's id, its actions in the hour before `at` (counted up to the limit only:
    whether the window is full costs the same however many actions it holds) and its cost
    on `at`'s day, in one read; None when the tracker has no row yet."""
    window = (
        TrackerAction.objects.filter(tracker_id=OuterRef(OuterRef("pk")), at__gt=at - WINDOW)
        .order_by()
        .values("pk")[:max_actions_per_hour]
    )
    recent = (
        TrackerAction.objects.filter(pk__in=Subquery(window))
        .order_by()
        .annotate(n=Func(F("pk"), function="COUNT", output_field=IntegerField()))
        .values("n")
    )
    cents = TrackerCost.objects.filter(tracker_id=OuterRef("pk"), day=_today(at)).values("cents")[:1]
    row = (
        Tracker.objects.filter(key=key)
        .annotate(
            recent=Coalesce(Subquery(recent), Value(0)),
            spent=Coalesce(Subquery(cents), Value(0.0), output_field=FloatField()),
        )
        .values_list("pk", "recent", "spent")
        .first()
    )
    return None if row is None else (row[0], row[1], float(row[2]))


def _cost_on(key: str, day: date) -> float:
    # One row per tracker and day (the tracker_cost_per_day constraint): read, not summed.
    cents = TrackerCost.objects.filter(tracker__key=key, day=day).values_list("cents", flat=True)
    return float(next(iter(cents), 0.0))


def day_cost(key: Any) -> Coalesce:
    """Today's cost of the tracker `key` (a value or an outer reference), as an expression: a
    read that rides on another statement (the engine's run read)."""
    cents = TrackerCost.objects.filter(tracker__key=key, day=_today(None)).values("cents")[:1]
    return Coalesce(Subquery(cents), Value(0.0), output_field=FloatField())


def cost_refusal(cents: float, max_cost_per_day_cents: int) -> None:
    """Raise the day's cost refusal when `cents` spent today reach the budget."""
    if cents >= max_cost_per_day_cents:
        raise BudgetExhausted(RATE_LIMIT_COST)


def tracker_check_cost(*, key: str, max_cost_per_day_cents: int, now: datetime | None = None) -> None:
    if _cost_on(key, _today(now)) >= max_cost_per_day_cents:
        raise BudgetExhausted(RATE_LIMIT_COST)


def tracker_record_cost(*, key: str, cents: float, now: datetime | None = None) -> None:
    if cents < 0:
        raise ValueError("cost cents must not be negative")
    if cents == 0:
        return
    day = _today(now)
    with transaction.atomic():
        tracker = _locked_tracker(key)
        row, created = TrackerCost.objects.get_or_create(tracker=tracker, day=day, defaults={"cents": cents})
        if not created:
            TrackerCost.objects.filter(pk=row.pk).update(cents=F("cents") + cents)


def tracker_reserve_cost(
    *, key: str, cents: float, max_cost_per_day_cents: int, now: datetime | None = None
) -> date:
    """Before a model call: reserve its worst-case cost on today's budget, or raise
    `BudgetExhausted` (reserving nothing) when what is spent and reserved already, plus this
    call, would pass `max_cost_per_day_cents`. Returns the day the reservation is on (for
    `tracker_settle_cost`)."""
    day = _today(now)
    with transaction.atomic():
        tracker = _locked_tracker(key)
        row, _ = TrackerCost.objects.get_or_create(tracker=tracker, day=day)
        if (
            row.cents >= max_cost_per_day_cents
            or row.cents + row.reserved_cents + cents > max_cost_per_day_cents
        ):
            raise BudgetExhausted(RATE_LIMIT_COST)
        TrackerCost.objects.filter(pk=row.pk).update(reserved_cents=F("reserved_cents") + cents)
    return day


def tracker_settle_cost(*, key: str, day: date, reserved: float, cents: float) -> None:
    """After a model call: release its reservation and record what it really cost (0 when
    it failed before costing anything)."""
    if cents < 0:
        raise ValueError("cost cents must not be negative")
    with transaction.atomic():
        tracker = _locked_tracker(key)
        row, _ = TrackerCost.objects.get_or_create(tracker=tracker, day=day)
        TrackerCost.objects.filter(pk=row.pk).update(
            cents=F("cents") + cents, reserved_cents=Greatest(F("reserved_cents") - reserved, Value(0.0))
        )


def tracker_usage(*, key: str, now: datetime | None = None) -> TrackerUsage:
    at = now or timezone.now()
    actions = TrackerAction.objects.filter(tracker__key=key, at__gt=at - WINDOW).count()
    return {"actions_last_hour": actions, "cost_today_cents": _cost_on(key, _today(at))}
