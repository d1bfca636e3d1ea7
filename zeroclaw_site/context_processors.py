"""Template context of every dashboard page (the site's, since it reads more than one app)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from agents_app.roles import has_role, user_role
from runs_app.models import Approval


def clawboard(request: HttpRequest) -> dict[str, Any]:
    """Role flags for templates: buttons a user may not use are not rendered at all."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {
        "role": user_role(user),
        "can_operate": has_role(user, "operator"),
        "can_admin": has_role(user, "admin"),
        "pending_approvals": Approval.objects.filter(status=Approval.Status.PENDING).count(),
    }
