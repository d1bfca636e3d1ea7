"""Query parameters of the whole API, checked as documented: a bad value is a 400 field error
(`{"errors": [{"field", "message"}]}`), never a silent default."""

from __future__ import annotations

from collections.abc import Iterable

from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

TRUE_VALUES = ("true", "1")
FALSE_VALUES = ("false", "0")


def bool_message(name: str, raw: str) -> str:
    return f'{name} must be one of true, false, 1, 0 (got "{raw}")'


def bool_param(request: Request, name: str, default: bool = False) -> bool:
    """`true/false/1/0` (any case); absent = `default`; anything else, empty included, is a 400."""
    if name not in request.query_params:
        return default
    raw = str(request.query_params.get(name, ""))
    value = raw.strip().lower()
    if value in TRUE_VALUES:
        return True
    if value in FALSE_VALUES:
        return False
    raise ValidationError({name: [bool_message(name, raw)]})


def int_param(request: Request, name: str, *, default: int, low: int, high: int | None = None) -> int:
    if name not in request.query_params:
        return default
    raw = str(request.query_params.get(name, ""))
    bounds = f"from {low} to {high}" if high is not None else f"of {low} or more"
    message = f'{name} must be an integer {bounds} (got "{raw}")'
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValidationError({name: [message]}) from None
    if value < low or (high is not None and value > high):
        raise ValidationError({name: [message]})
    return value


def choice_param(request: Request, name: str, choices: Iterable[str]) -> str | None:
    """None when absent; one of `choices`, else a 400 (an empty value included)."""
    if name not in request.query_params:
        return None
    raw = str(request.query_params.get(name, ""))
    options = tuple(choices)
    if raw not in options:
        raise ValidationError({name: [f'{name} must be one of {", ".join(options)} (got "{raw}")']})
    return raw


def page_params(request: Request, *, default_limit: int, max_limit: int) -> tuple[int, int]:
    """`limit` (1..max_limit) and `offset` (>= 0), both errors reported at once."""
    errors: dict[str, list[str]] = {}
    values: dict[str, int] = {}
    for name, default, high in (("limit", default_limit, max_limit), ("offset", 0, None)):
        try:
            values[name] = int_param(
                request, name, default=default, low=1 if name == "limit" else 0, high=high
            )
        except ValidationError as exc:
            errors.update(exc.detail)  # type: ignore[arg-type]
    if errors:
        raise ValidationError(errors)
    return values["limit"], values["offset"]
