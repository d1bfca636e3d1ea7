"""Site-wide views that belong to no app."""

from __future__ import annotations

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
