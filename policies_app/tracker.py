"""Budget trackers (SPEC §3.1): a sliding one-hour window of actions and a per-day cost sum.

Policies that share a tracker key consume the same budget. Check-and-record is atomic:
on SQLite `transaction.atomic()` begins IMMEDIATE (write lock first); on PostgreSQL the
`select_for_update` of the tracker row serialises concurrent recorders.
"""

from __future__ import annotations

from contextlib import nullcontext
from datetime import date, datetime, timedelta
from typing import Any, TypedDict

from django.db import transaction
from django.db.models import F, Model
from django.utils import timezone

from policies_app.models import Tracker, TrackerAction, TrackerCost
from policies_app.policy import RATE_LIMIT_ACTIONS, RATE_LIMIT_COST
from zeroclaw_site import dbconn
from zeroclaw_site.txmemo import forget, once_per_transaction

WINDOW = timedelta(hours=1)


class BudgetExhausted(Exception):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


class TrackerUsage(TypedDict):
    actions_last_hour: int
    cost_today_cents: float


def _table(model: type[Model]) -> str:
    return dbconn.default().ops.quote_name(model._meta.db_table)


def _locked_tracker(key: str) -> int:
    """The tracker row's id, the row locked for this transaction on PostgreSQL (SQLite's
    IMMEDIATE transactions already hold the database's write lock). Plain SQL: this runs for
    every acting tool call and every spawn, where the ORM's query building costs more than the
    statements (runs_app/engine/sql.py)."""
    if dbconn.default().vendor == "postgresql":
        return _tracker_id(key, " FOR UPDATE")
    # SQLite: no row lock to take, and a row found stays for the transaction (the write lock is
    # held), so a transaction asks once. (PostgreSQL asks each time: a savepoint rolled back
    # would have released the row lock.)
    memo = ("tracker id", key)
    found = once_per_transaction(memo, lambda: _tracker_id(key, "", create=False))
    return found if found is not None else _tracker_id(key, "")


def _tracker_id(key: str, lock: str, *, create: bool = True) -> Any:
    select = f"SELECT id FROM {_table(Tracker)} WHERE key = %s{lock}"
    with dbconn.default().cursor() as cursor:
        cursor.execute(select, [key])
        row = cursor.fetchone()
        if row is None:
            if not create:
                return None
            Tracker.objects.get_or_create(key=key)
            cursor.execute(select, [key])
            row = cursor.fetchone()
    return int(row[0])


def _today(now: datetime | None) -> date:
    """The budget day: the date in the server's TIME_ZONE (never a zone activated for a
    request), looked up without asgiref's Local (`timezone.localdate` asks it each time)."""
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
    limit is reported first). Every check comes before the one INSERT, so a refusal has
    nothing to undo: inside a caller's transaction no savepoint is needed.

    `record=False`: the checks only (a caller that will refuse for a later reason anyway, but
    must report a budget refusal first)."""
    if max_actions_per_hour <= 0:
        raise BudgetExhausted(RATE_LIMIT_ACTIONS)
    actions = _table(TrackerAction)
    with nullcontext() if dbconn.default().in_atomic_block else transaction.atomic():
        tracker_id = _locked_tracker(key)
        # Read the clock only once the lock is held, so no concurrent insert can be newer than `now`.
        at = now or timezone.now()
        window_start = at - WINDOW
        with dbconn.default().cursor() as cursor:
            # Counted up to the limit only: whether the window is full costs the same however
            # many actions it holds (a shared tracker may record thousands an hour).
            cursor.execute(
                f"SELECT COUNT(*) FROM (SELECT 1 FROM {actions} WHERE tracker_id = %s AND at > %s LIMIT %s) w",
                [
                    tracker_id,
                    dbconn.when(window_start),
                    max_actions_per_hour,
                ],
            )
            if cursor.fetchone()[0] >= max_actions_per_hour:
                raise BudgetExhausted(RATE_LIMIT_ACTIONS)
            if max_cost_per_day_cents is not None:
                tracker_check_cost(key=key, max_cost_per_day_cents=max_cost_per_day_cents, now=at)
            if not record:
                return
            cursor.execute(
                f"INSERT INTO {actions} (tracker_id, at) VALUES (%s, %s)",
                [tracker_id, dbconn.when(at)],
            )
        if at.second == 0:  # prune the expired window now and then, not on every record
            TrackerAction.objects.filter(tracker_id=tracker_id, at__lte=window_start).delete()


def _cost_on(key: str, day: date) -> float:
    with dbconn.default().cursor() as cursor:
        cursor.execute(
            f"SELECT SUM(c.cents) FROM {_table(TrackerCost)} c"
            f" INNER JOIN {_table(Tracker)} t ON t.id = c.tracker_id WHERE t.key = %s AND c.day = %s",
            [key, dbconn.default().ops.adapt_datefield_value(day)],
        )
        total = cursor.fetchone()[0]
    return float(total or 0)


def tracker_check_cost(*, key: str, max_cost_per_day_cents: int, now: datetime | None = None) -> None:
    # Once per transaction: a turn of twenty spawns checks it for each (a cost recorded in the
    # same transaction asks again: tracker_record_cost).
    day = _today(now)
    if once_per_transaction(("tracker cost", key, day), lambda: _cost_on(key, day)) >= max_cost_per_day_cents:
        raise BudgetExhausted(RATE_LIMIT_COST)


def tracker_record_cost(*, key: str, cents: float, now: datetime | None = None) -> None:
    if cents < 0:
        raise ValueError("cost cents must not be negative")
    if cents == 0:
        return
    day = _today(now)
    forget(("tracker cost", key, day))
    with transaction.atomic():
        tracker_id = _locked_tracker(key)
        row, created = TrackerCost.objects.get_or_create(
            tracker_id=tracker_id, day=day, defaults={"cents": cents}
        )
        if not created:
            TrackerCost.objects.filter(pk=row.pk).update(cents=F("cents") + cents)


def tracker_usage(*, key: str, now: datetime | None = None) -> TrackerUsage:
    at = now or timezone.now()
    actions = TrackerAction.objects.filter(tracker__key=key, at__gt=at - WINDOW).count()
    return {"actions_last_hour": actions, "cost_today_cents": _cost_on(key, _today(at))}
