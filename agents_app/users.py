"""Users, roles (Django groups) and API tokens."""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, Group
from django.db import transaction
from rest_framework.authtoken.models import Token

from agents_app.roles import ROLES


@transaction.atomic
def user_create_or_update(
    *, username: str, role: str, password: str | None = None
) -> tuple[AbstractUser, str, str]:
    """Create (or update) a user with exactly one role. Returns (user, password, token key)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {', '.join(ROLES)} (got {role!r})")
    user_model = get_user_model()
    user, _ = user_model.objects.get_or_create(username=username)
    password = password or secrets.token_urlsafe(12)
    user.set_password(password)
    user.is_staff = role == "admin"
    user.is_superuser = role == "admin"
    user.save()
    user.groups.set([Group.objects.get_or_create(name=role)[0]])
    token, _ = Token.objects.get_or_create(user=user)
    return user, password, token.key
