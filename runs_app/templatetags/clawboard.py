"""Template filters of the dashboard: one format for JSON, money, durations and token counts.

Every page shows numbers through these filters, so a cost reads the same on the run page, in
the runs list and on the home page (docs/decisions.md, "One format for numbers").
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import ROUND_FLOOR, ROUND_HALF_UP, Decimal, InvalidOperation
from typing import Any

from django import template
from django.utils.dateparse import parse_datetime

register = template.Library()

_CENT = Decimal("0.01")
_HUNDREDTH_OF_CENT = Decimal("0.0001")


@register.filter
def as_json(value: Any) -> str:
    """Tool arguments as the model wrote them (JSON), not as Python prints a dict."""
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


@register.filter
def pretty_json(value: Any) -> str:
    """JSON indented for reading (approvals, tool arguments)."""
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=False)


def _decimal(value: Any) -> Decimal | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = Decimal(str(value))
    except (InvalidOperation, ValueError):
        return None
    return number if number.is_finite() else None


@register.filter
def money(cents: Any) -> str:
    """Cents as dollars: `$1.25`; four decimals only under a cent (`$0.0042`); `$0.00` for zero."""
    number = _decimal(cents)
    if number is None or number == 0:
        return "$0.00"
    dollars = number / 100
    sign = "-" if dollars < 0 else ""
    dollars = abs(dollars)
    step = _HUNDREDTH_OF_CENT if abs(number) < 1 else _CENT
    return f"{sign}${dollars.quantize(step, rounding=ROUND_HALF_UP):,}"


@register.filter
def duration(seconds: Any) -> str:
    """`42 ms` under a second, `1.23 s` under a minute, then `1m 01s` and `1h 02m`; `—` when unknown.
    Floored, never rounded up: a span no longer than another is never written as longer (a
    child under its parent on the run page)."""
    if isinstance(seconds, timedelta):
        seconds = seconds.total_seconds()
    number = _decimal(seconds)
    if number is None or number < 0:
        return "—"
    secs = float(number)
    if secs < 1:
        return f"{int(secs * 1000)} ms"
    if secs < 60:
        return f"{Decimal(str(secs)).quantize(_CENT, rounding=ROUND_FLOOR)} s"
    whole = int(secs)
    hours, rest = divmod(whole, 3600)
    minutes, secs_left = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs_left:02d}s"


@register.filter
def when(value: Any) -> str:
    """A moment (a datetime or its ISO text) as `2026-12-02 04:17:51` UTC; `` when unknown."""
    moment = parse_datetime(value) if isinstance(value, str) else value
    if not isinstance(moment, datetime):
        return ""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


@register.filter
def tokens(count: Any) -> str:
    """A token count with thousands separators: `1,234,567`."""
    number = _decimal(count)
    if number is None:
        return "0"
    return f"{int(number):,}"
