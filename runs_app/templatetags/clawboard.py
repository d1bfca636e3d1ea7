"""Template filters of the dashboard."""

from __future__ import annotations

import json
from typing import Any

from django import template

register = template.Library()


@register.filter
def as_json(value: Any) -> str:
    """Tool arguments as the model wrote them (JSON), not as Python prints a dict."""
    return json.dumps(value, ensure_ascii=False, sort_keys=False)
