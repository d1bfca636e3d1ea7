from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

from agents_app.roles import has_role


class IsViewer(BasePermission):
    message = "You need at least the viewer role."

    def has_permission(self, request: Any, view: Any) -> bool:
        return has_role(request.user, "viewer")


class IsOperator(BasePermission):
    message = "You need the operator role."

    def has_permission(self, request: Any, view: Any) -> bool:
        return has_role(request.user, "operator")


class IsAdminRole(BasePermission):
    message = "You need the admin role."

    def has_permission(self, request: Any, view: Any) -> bool:
        return has_role(request.user, "admin")


class ReadViewerWriteAdmin(BasePermission):
    """Configuration endpoints: viewers read, admins write."""

    message = "You need the admin role to change configuration."

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            self.message = IsViewer.message  # one instance per request, so this is safe
            return has_role(request.user, "viewer")
        return has_role(request.user, "admin")
