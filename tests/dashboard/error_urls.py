"""The site's URLs plus one view that fails, to see the 500 page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import path

from zeroclaw_site.urls import handler400, handler403, handler404, handler500, urlpatterns

__all__ = ["handler400", "handler403", "handler404", "handler500", "urlpatterns"]


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("a bug")


urlpatterns = [path("boom/", boom), *urlpatterns]
