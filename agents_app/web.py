"""Small helpers shared by the dashboard views of every app."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.validators import ProhibitNullCharactersValidator
from django.http import HttpRequest, HttpResponse

from agents_app.roles import has_role


def role_required(role: str) -> Callable[[Callable[..., HttpResponse]], Callable[..., HttpResponse]]:
    """Anonymous users go to the login page; a user below `role` gets 403."""

    def decorator(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not has_role(request.user, role):
                raise PermissionDenied(f"You need the {role} role.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


viewer_required = role_required("viewer")
operator_required = role_required("operator")
admin_required = role_required("admin")


def lines(text: str) -> list[str]:
    """A textarea with one entry per line (blank lines dropped)."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def field_errors(errors: list[tuple[str, str]], prefix: str) -> tuple[dict[str, list[str]], list[str]]:
    """Map (path, message) pairs of SPEC §2.5 to form fields: `agents.x.delegates[1].agent` → `delegates`."""
    by_field: dict[str, list[str]] = {}
    general: list[str] = []
    for path, message in errors:
        rest = path[len(prefix) :].lstrip(".") if path.startswith(prefix) else ""
        name = rest.split(".")[0].split("[")[0] if rest else ""
        if path in ("alias", "type"):
            name = path
        if name:
            by_field.setdefault(name, []).append(message)
        else:
            general.append(message)
    return by_field, general


def without_null_character_check(form: Any) -> None:
    """Drop Django's own NUL check from every field, so a control character gets the
    configuration's one message (agents_app.validation) on this path as on every other."""
    for field in form.fields.values():
        field.validators = [v for v in field.validators if not isinstance(v, ProhibitNullCharactersValidator)]
