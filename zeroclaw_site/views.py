"""Site-wide views that belong to no app."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.staticfiles import finders
from django.http import FileResponse, Http404, HttpRequest, HttpResponseBase
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe


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
