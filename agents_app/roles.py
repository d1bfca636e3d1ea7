"""Roles are Django groups: viewer (read), operator (run, approve, cancel), admin (configure)."""

from __future__ import annotations

from typing import Any

ROLES: tuple[str, ...] = ("viewer", "operator", "admin")
ROLE_RANK = {name: i for i, name in enumerate(ROLES)}


def user_role(user: Any) -> str | None:
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    if user.is_superuser:
        return "admin"
    if hasattr(user, "_clawboard_role"):
        cached: str | None = user._clawboard_role
        return cached
    names = set(user.groups.values_list("name", flat=True))
    role = next((r for r in reversed(ROLES) if r in names), None)
    user._clawboard_role = role
    return role


def has_role(user: Any, needed: str) -> bool:
    role = user_role(user)
    return role is not None and ROLE_RANK[role] >= ROLE_RANK[needed]
