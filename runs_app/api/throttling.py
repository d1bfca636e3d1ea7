"""Per-user rate limit on starting runs (SPEC §10 hardening).

One budget per user, shared by every way to start a run: `POST /runs/`, `/runs/{id}/spawn/`,
`/delegate/`, `/continue/`, `/resume/` and the dashboard's start, continue and resume forms.
The rate is `settings.CLAWBOARD_RUN_RATE` ("120/min" by default, None = no limit), read at
each request; the counters live in the default cache (see settings.CACHES)."""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from rest_framework.throttling import UserRateThrottle

SCOPE = "runs"


class RunStartThrottle(UserRateThrottle):
    scope = SCOPE

    def get_rate(self) -> str | None:
        rate = getattr(settings, "CLAWBOARD_RUN_RATE", None)
        return str(rate) if rate else None

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.method != "POST":  # GET /runs/ lists runs; only starting one is counted
            return True
        return super().allow_request(request, view)


def throttled_message(wait: float | None) -> str:
    text = "Too many runs started; the rate limit is CLAWBOARD_RUN_RATE"
    rate = getattr(settings, "CLAWBOARD_RUN_RATE", None)
    if rate:
        text += f" ({rate} per user)"
    if wait is not None:
        text += f"; try again in {max(1, math.ceil(wait))} s"
    return text + "."


def dashboard_throttle(request: HttpRequest) -> HttpResponse | None:
    """For the dashboard's form views: None when the user may start a run now, else a 429."""
    throttle = RunStartThrottle()
    if throttle.allow_request(request, None):
        return None
    wait = throttle.wait()
    response = HttpResponse(throttled_message(wait), status=429, content_type="text/plain; charset=utf-8")
    if wait is not None:
        response["Retry-After"] = str(max(1, math.ceil(wait)))
    return response
