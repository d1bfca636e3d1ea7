"""Cron expressions of schedules: the five-field form only, and one that can fire.

croniter accepts six and seven fields (seconds, years) and `@daily`, and accepts expressions
that never come due (`0 0 31 2 *`); a schedule saved with one would silently never run."""

from __future__ import annotations

import calendar
from datetime import UTC, datetime

from croniter import croniter

FIELDS = "minute hour day-of-month month day-of-week"
# February counts 29 days: a leap year comes.
_MONTH_DAYS = {m: 29 if m == 2 else calendar.monthrange(2001, m)[1] for m in range(1, 13)}


def _quoted(expr: str) -> str:
    return '"' + expr.replace('"', '\\"') + '"'


def cron_error(expr: str) -> str | None:
    """Why `expr` is refused, or None when it is a five-field expression that fires."""
    fields = expr.split()
    if len(fields) != 5:
        return f"cron expression {_quoted(expr)} must have five fields ({FIELDS}); got {len(fields)}"
    if not croniter.is_valid(expr):
        return f"cron expression {_quoted(expr)} is not valid"
    try:
        expanded, _ = croniter.expand(expr)
    except Exception:  # croniter raises several types for what is_valid let through
        return f"cron expression {_quoted(expr)} is not valid"
    days, months, weekdays = expanded[2], expanded[3], expanded[4]
    # With a day of the week named, cron fires on either field; otherwise the day must exist.
    if weekdays != ["*"] or "*" in days or any(not isinstance(d, int) for d in days):
        return None
    month_list = list(range(1, 13)) if months == ["*"] else [int(m) for m in months]
    if any(d <= _MONTH_DAYS[m] for d in days for m in month_list):
        return None
    day_text = ",".join(str(d) for d in days)
    month_text = ", ".join(calendar.month_name[m] for m in month_list)
    return f"cron expression {_quoted(expr)} never fires: day {day_text} does not occur in {month_text}"


def cron_next(expr: str, *, start: datetime | None = None, count: int = 5) -> list[datetime]:
    """The next `count` times `expr` fires after `start` (now), in UTC; [] when it is refused."""
    if cron_error(expr) is not None:
        return []
    base = (start or datetime.now(UTC)).astimezone(UTC)
    it = croniter(expr, base)
    return [it.get_next(datetime).astimezone(UTC) for _ in range(count)]
