"""Site-wide views that belong to no app."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, HttpResponseBase, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

log = logging.getLogger(__name__)


@require_safe
@cache_control(max_age=86400, public=True)
def favicon(request: HttpRequest) -> HttpResponseBase:
    """`/favicon.ico`, which browsers ask for whatever the page links: the site's SVG icon."""
    path = finders.find("clawboard/favicon.svg")
    if not path or isinstance(path, list):
        raise Http404("No icon")
    return FileResponse(open(path, "rb"), content_type="image/svg+xml")  # noqa: SIM115  # FileResponse closes it


# The API docs pages may load only from this site: Redoc's bundle still points an image at its
# vendor's CDN, which the browser then never asks for (and an offline page never waits on).
DOCS_CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
    "script-src 'self' 'unsafe-inline'; worker-src 'self' blob:; font-src 'self' data:; connect-src 'self'"
)


def same_site_only(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """`view` with a Content-Security-Policy that keeps the browser on this site."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        response["Content-Security-Policy"] = DOCS_CSP
        return response

    return wrapped


# -- error pages ---------------------------------------------------------------------------------
# Clawboard's own pages for 400, 403, 404 and 500, with the navigation, whatever DEBUG says
# (docs/deployment.md, "Error pages"). A path under /api/ answers JSON, as the API does.

ERRORS = {
    400: ("Bad request", "The request could not be understood. Check the address and try again."),
    403: ("Forbidden", "Your role does not allow this."),
    404: ("Page not found", "There is nothing at this address. The run or entry may have been deleted."),
    500: ("Server error", "Something went wrong on our side. The error was logged; try again in a moment."),
}
API_CODES = {400: "bad_request", 403: "forbidden", 404: "not_found", 500: "server_error"}


def _error_page(request: HttpRequest, status: int, detail: str = "") -> HttpResponseBase:
    title, text = ERRORS[status]
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": detail or text, "code": API_CODES[status]}, status=status)
    context = {"status": status, "title": title, "text": text, "detail": detail}
    try:
        return render(request, "error.html", context, status=status)
    except Exception:  # the page itself failed (a database gone): a bare page, never a second 500
        log.exception("the %s page could not be rendered", status)
        return HttpResponse(
            f"<!doctype html><title>{title} · Clawboard</title><h1>{title}</h1><p>{text}</p>"
            '<p><a href="/">Home</a></p>',
            status=status,
        )


def _detail(exception: Exception | None) -> str:
    """A message raised on purpose (PermissionDenied("You need the admin role…")), never
    Django's internal text for a path that matched nothing."""
    if exception is None or isinstance(exception, Http404):
        return ""
    args = getattr(exception, "args", ())
    return str(args[0]) if args and isinstance(args[0], str) else ""


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponseBase:
    return _error_page(request, 400)


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponseBase:
    return _error_page(request, 403, _detail(exception))


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponseBase:
    return _error_page(request, 404)


def server_error(request: HttpRequest) -> HttpResponseBase:
    return _error_page(request, 500)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponseBase:
    return _error_page(
        request, 403, "The form had expired or came from another site. Reload the page and send it again."
    )
