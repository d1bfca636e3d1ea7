from __future__ import annotations

import pytest
from django.test import Client

from tests.dashboard.support import SECRET_ENV, SECRET_VALUE, Runs, client_as, load_config


@pytest.fixture(autouse=True)
def _fast_passwords(settings: pytest.FixtureRequest) -> None:
    """Users are created in nearly every test; the real hasher is slow on purpose."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _provider_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment variable named by `openai.remote`'s api_key_env holds a secret."""
    monkeypatch.setenv(SECRET_ENV, SECRET_VALUE)


@pytest.fixture
def config(db: None) -> None:
    load_config()


@pytest.fixture
def admin(config: None) -> Client:
    return client_as("admin", "ada")


@pytest.fixture
def operator(config: None) -> Client:
    return client_as("operator", "otto")


@pytest.fixture
def viewer(config: None) -> Client:
    return client_as("viewer", "vic")


@pytest.fixture
def anonymous(config: None) -> Client:
    return Client()


@pytest.fixture
def runs(config: None) -> Runs:
    return Runs()
