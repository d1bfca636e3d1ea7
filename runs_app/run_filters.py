"""The runs list's query string, read once: every bad value refused with a message, all at
once, so a typo never silently shows every run (docs/operator-guide.md, "Runs")."""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime, time, timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from runs_app.models import Run
from runs_app.selectors import OUTCOMES, RUN_SORTS

ALIAS_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
AGE_RE = re.compile(r"(\d{1,9})([mhd])")
AGE_UNITS = {"m": "minutes", "h": "hours", "d": "days"}
AGE_HINT = "use a date (2026-11-30), a date and time (2026-11-30T08:00) or an age (90m, 24h, 7d)"
SCOPES = ("roots", "all")


def _moment(name: str, raw: str, *, end_of_day: bool) -> tuple[datetime | None, str | None]:
    """A point in time from a date, a date and time, or an age back from now."""
    refused = f"Invalid {name} '{raw}': {AGE_HINT}"
    try:
        if age := AGE_RE.fullmatch(raw):
            return timezone.now() - timedelta(**{AGE_UNITS[age[2]]: int(age[1])}), None
        if (moment := parse_datetime(raw)) is not None:
            return (timezone.make_aware(moment) if timezone.is_naive(moment) else moment), None
        if (day := parse_date(raw)) is not None:
            if end_of_day:  # `until` a day includes that day
                day += timedelta(days=1)
            return timezone.make_aware(datetime.combine(day, time.min)), None
    except (ValueError, OverflowError):
        pass
    return None, refused


def run_filters_parse(params: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The filters of `selectors.run_list` from a query string, and every refusal (in the
    order of the form's fields). Roots only unless `scope=all` or a search is asked."""
    errors: list[str] = []
    filters: dict[str, Any] = {}
    status = params.get("status", "").strip()
    if status:
        statuses = [s.strip() for s in status.split(",") if s.strip()]
        unknown = [s for s in statuses if s not in Run.Status.values]
        if unknown:
            errors.append(f"Unknown status '{unknown[0]}'. Use one of: {', '.join(Run.Status.values)}")
        filters["status"] = statuses
    outcome = params.get("outcome", "").strip()
    if outcome:
        outcomes = [o.strip() for o in outcome.split(",") if o.strip()]
        unknown = [o for o in outcomes if o not in OUTCOMES]
        if unknown:
            errors.append(f"Unknown outcome '{unknown[0]}'. Use one of: {', '.join(OUTCOMES)}")
        filters["outcome"] = [o for o in outcomes if o in OUTCOMES]
    kind = params.get("kind", "").strip()
    if kind:
        if kind not in Run.Kind.values:
            errors.append(f"Unknown kind '{kind}'. Use one of: {', '.join(Run.Kind.values)}")
        filters["kind"] = kind
    agent = params.get("agent", "").strip()
    if agent:
        if not ALIAS_RE.fullmatch(agent):
            errors.append(f"Invalid agent '{agent}': an alias is [a-z0-9][a-z0-9_-]{{0,63}}")
        filters["agent"] = agent
    user = params.get("user", "").strip()
    if user:
        if not get_user_model().objects.filter(username=user).exists():
            errors.append(f"Unknown user '{user}'")
        filters["user"] = user
    for name in ("since", "until"):
        raw = params.get(name, "").strip()
        if raw:
            moment, error = _moment(name, raw, end_of_day=name == "until")
            if error:
                errors.append(error)
            filters[name] = moment
    if filters.get("since") and filters.get("until") and filters["since"] >= filters["until"]:
        errors.append("since must be before until")
    sort = params.get("sort", "").strip()
    if sort:
        if sort not in RUN_SORTS:
            errors.append(f"Unknown sort '{sort}'. Use one of: {', '.join(RUN_SORTS)}")
        filters["sort"] = sort
    query = params.get("q", "").strip()
    if query:
        filters["q"] = query
    scope = params.get("scope", "").strip()
    if scope and scope not in SCOPES:
        errors.append(f"Unknown scope '{scope}'. Use one of: {', '.join(SCOPES)}")
    filters["roots"] = (scope or ("all" if query else "roots")) == "roots"
    return filters, errors
