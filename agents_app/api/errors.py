"""One error shape for the whole API: {"detail", "code"} or {"errors": [{"field", "message"}]}."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler


class ConfigInvalid(exceptions.APIException):
    """Raised with the list of (field, message) pairs of SPEC §2.5."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        super().__init__(detail="invalid configuration")
        self.errors = errors


def _flatten(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    if isinstance(detail, dict):
        for key, value in detail.items():
            name = key if not prefix else f"{prefix}.{key}"
            if key == "non_field_errors":
                name = prefix
            out.extend(_flatten(value, name))
    elif isinstance(detail, list):
        if all(not isinstance(v, (dict, list)) for v in detail):
            out.extend({"field": prefix, "message": str(v)} for v in detail)
        else:
            for i, value in enumerate(detail):
                out.extend(_flatten(value, f"{prefix}[{i}]"))
    else:
        out.append({"field": prefix, "message": str(detail)})
    return out


def field_errors(exc: exceptions.ValidationError) -> list[dict[str, str]]:
    """A validation error as the API answers it: [{"field", "message"}, ...]."""
    return _flatten(exc.detail)


def exception_handler(exc: Exception, context: Any) -> Response | None:
    # Django's own 404 and 403 (a format no renderer serves, a get_object_or_404) get the
    # API's shape with a code as well, like DRF's.
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    if isinstance(exc, ConfigInvalid):
        return Response(
            {"errors": [{"field": f, "message": m} for f, m in exc.errors]}, status=exc.status_code
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        response.data = {"errors": _flatten(exc.detail)}
        return response
    if isinstance(exc, exceptions.APIException):
        detail = exc.detail
        code = exc.get_codes() if hasattr(exc, "get_codes") else exc.default_code
        if isinstance(detail, (dict, list)):
            response.data = {"errors": _flatten(detail)}
        else:
            response.data = {"detail": str(detail), "code": str(code)}
    return response
