"""Budget trackers (SPEC §3.1): a sliding one-hour window of actions and a per-day cost sum.

Policies that share a tracker key consume the same budget. Check-and-record is atomic:
on SQLite `transaction.atomic()` begins IMMEDIATE (write lock first); on PostgreSQL the
`select_for_update` of the tracker row serialises concurrent recorders.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import TypedDict

from django.db import transaction
from django.db.models import F, Value
from django.db.models.functions import Greatest
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
        tracker = _locked_tracker(key)
        # Read the clock only once the lock is held, so no concurrent insert can be newer than `now`.
        at = now or timezone.now()
        window_start = at - WINDOW
        # Counted up to the limit only: whether the window is full costs the same however many
        # actions it holds (a shared tracker may record thousands an hour).
        recent = TrackerAction.objects.filter(tracker=tracker, at__gt=window_start)
        if recent[:max_actions_per_hour].count() >= max_actions_per_hour:
            refusal = RATE_LIMIT_ACTIONS
        elif max_cost_per_day_cents is not None and _cost_on(key, _today(at)) >= max_cost_per_day_cents:
            refusal = RATE_LIMIT_COST
        elif record:
            TrackerAction.objects.create(tracker=tracker, at=at)
            if at.second == 0:  # prune the expired window now and then, not on every record
                TrackerAction.objects.filter(tracker=tracker, at__lte=window_start).delete()
    if refusal is not None:
        raise BudgetExhausted(refusal)


def _cost_on(key: str, day: date) -> float:
    # One row per tracker and day (the tracker_cost_per_day constraint): read, not summed.
    cents = TrackerCost.objects.filter(tracker__key=key, day=day).values_list("cents", flat=True)
    return float(next(iter(cents), 0.0))


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
