from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.agents_app.support import api_client, load_base_config


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings: pytest.FixtureRequest) -> None:
    """Every test makes users; the production hasher would make that most of the run time."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # type: ignore[attr-defined]


@pytest.fixture
def base_config(db: None) -> None:
    load_base_config()


@pytest.fixture
def admin_api(db: None) -> APIClient:
    return api_client("admin", "alice")


@pytest.fixture
def operator_api(db: None) -> APIClient:
    return api_client("operator", "oscar")


@pytest.fixture
def viewer_api(db: None) -> APIClient:
    return api_client("viewer", "victor")


@pytest.fixture
def anon_api(db: None) -> APIClient:
    return api_client(None)
