"""Content negotiation that answers a bad `?format=` with a 400 field error.

DRF ignores an empty `format` and answers an unknown one with a 404; the API documents both
as field errors (docs/api.md, "Paging and filters")."""

from __future__ import annotations

from typing import Any

from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation


class StrictFormatNegotiation(DefaultContentNegotiation):
    def select_renderer(self, request: Any, renderers: Any, format_suffix: str | None = None) -> Any:
        name = self.settings.URL_FORMAT_OVERRIDE
        if not format_suffix and name and name in request.query_params:
            value = request.query_params.get(name, "")
            formats = [r.format for r in renderers]
            if value not in formats:
                raise ValidationError({name: [f'{name} must be one of {", ".join(formats)} (got "{value}")']})
        return super().select_renderer(request, renderers, format_suffix)
