"""Request size limit: a body larger than DATA_UPLOAD_MAX_MEMORY_SIZE is answered 413 at once.

Django enforces that setting only when something reads `request.body` or form data (and then
answers 400); a JSON body read as a stream, as DRF's parsers read it, is not checked at all.
This middleware refuses by the declared Content-Length, before any view or parser runs, with
one answer everywhere: 413, `{"detail", "code": "too_large"}` under /api/ (a tool result as
well on the tool endpoints), plain text on pages. File uploads count too: no request this
product serves needs a body that large. A chunked body (no Content-Length) is not seen here:
DRF reads it as empty, but a form post would be read whole, so a reverse proxy in front
should cap bodies as well (docs/deployment.md, Security)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse

TOO_LARGE_CODE = "too_large"


def body_limit() -> int | None:
    limit = getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None)
    return int(limit) if limit is not None else None


def too_large_response(request: HttpRequest, size: int, limit: int) -> HttpResponse:
    message = f"Request body too large ({size} bytes, max {limit} bytes)"
    if request.path.startswith("/api/"):
        body: dict[str, Any] = {"detail": message, "code": TOO_LARGE_CODE}
        if request.path.rstrip("/").endswith(("/spawn", "/delegate")) or "/results/" in request.path:
            body.update({"success": False, "output": "", "error": message})  # a tool result too
        return HttpResponse(json.dumps(body), status=413, content_type="application/json")
    return HttpResponse(message, status=413, content_type="text/plain; charset=utf-8")


class BodySizeLimitMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        limit = body_limit()
        if limit is not None:
            try:
                size = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                size = 0
            if size > limit:
                return too_large_response(request, size, limit)
        return self.get_response(request)
