"""Hardening: the per-user rate limit on starting runs, oversized bodies (413), prompt and
context caps (400 naming the field), and the production settings' cookies and HSTS."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.test import Client, override_settings
from rest_framework.test import APIClient

from agents_app.users import user_create_or_update
from runs_app.engine.messages import MAX_PROMPT_CHARS
from runs_app.models import Run, Schedule
from runs_app.services import RunServiceError, run_start
from tests.dashboard.support import Runs, load_config

BASE_DIR = Path(__file__).resolve().parent.parent
LIMIT = 2 * 1024 * 1024


@pytest.fixture(autouse=True)
def _fast_passwords(settings: Any) -> None:
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def config(db: None) -> None:
    load_config()


def api_as(username: str, role: str) -> APIClient:
    _, _, token = user_create_or_update(username=username, role=role)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def page_as(username: str, role: str) -> Client:
    user, _, _ = user_create_or_update(username=username, role=role)
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]  # the stubs expect auth.User itself
    return client


def owned_run(username: str) -> Run:
    run = Runs().failed  # a finished run: continue works on it
    user, _, _ = user_create_or_update(username=username, role="operator")
    Run.objects.filter(pk=run.pk).update(created_by=user)
    return run


# -- rate limit ------------------------------------------------------------------------------------


@override_settings(CLAWBOARD_RUN_RATE="3/min")
def test_starting_runs_is_rate_limited_per_user_across_every_way_to_start_one(config: None) -> None:
    olivia = api_as("olivia", "operator")
    run = owned_run("olivia")
    assert olivia.post("/api/v1/runs/", {"agent": "alpha", "prompt": "one"}, format="json").status_code == 201
    assert (
        olivia.post(f"/api/v1/runs/{run.pk}/continue/", {"prompt": "two"}, format="json").status_code == 201
    )
    page = page_as("olivia", "operator")
    assert page.post("/runs/start/", {"agent": "alpha", "prompt": "three"}).status_code == 302
    # The budget is spent: every run-starting endpoint now answers 429, in its own shape.
    refused = olivia.post("/api/v1/runs/", {"agent": "alpha", "prompt": "four"}, format="json")
    assert refused.status_code == 429
    body = refused.json()
    assert body["code"] == "throttled" and "throttled" in body["detail"].lower()
    assert 0 < int(refused["Retry-After"]) <= 60
    for url in (f"/api/v1/runs/{run.pk}/continue/", f"/api/v1/runs/{run.pk}/resume/"):
        response = olivia.post(url, {"prompt": "again"}, format="json")
        assert response.status_code == 429, url
        assert response.json()["code"] == "throttled"
    for url in (f"/api/v1/runs/{run.pk}/spawn/", f"/api/v1/runs/{run.pk}/delegate/"):
        response = olivia.post(url, {"prompt": "child", "agent": "beta"}, format="json")
        assert response.status_code == 429, url
        tool = response.json()
        assert tool["success"] is False and tool["output"] == "" and tool["error"] == tool["detail"]
        assert tool["code"] == "throttled"
    dashboard = page.post("/runs/start/", {"agent": "alpha", "prompt": "five"})
    assert dashboard.status_code == 429
    assert "CLAWBOARD_RUN_RATE" in dashboard.content.decode() and dashboard["Retry-After"]
    assert page.post(f"/runs/{run.pk}/continue/", {"prompt": "six"}).status_code == 429
    # Reading is not limited, and another user has a budget of their own.
    assert olivia.get("/api/v1/runs/").status_code == 200
    assert (
        api_as("oscar", "operator")
        .post("/api/v1/runs/", {"agent": "alpha", "prompt": "mine"}, format="json")
        .status_code
        == 201
    )
    assert Run.objects.filter(created_by__username="olivia").count() == 1 + 2 + 1  # owned_run + 2 + page


@override_settings(CLAWBOARD_RUN_RATE=None)
def test_no_rate_means_no_limit(config: None) -> None:
    olivia = api_as("olivia", "operator")
    for i in range(5):
        assert (
            olivia.post("/api/v1/runs/", {"agent": "alpha", "prompt": f"run {i}"}, format="json").status_code
            == 201
        )


def test_the_default_rate_and_cache_are_configured() -> None:
    from django.conf import settings
    from django.core.cache import caches

    assert settings.CLAWBOARD_RUN_RATE == "120/min"
    rest: dict[str, Any] = settings.REST_FRAMEWORK
    assert rest["DEFAULT_THROTTLE_RATES"]["runs"] == "120/min"
    assert caches["default"].__class__.__name__ == "LocMemCache"


# -- oversized bodies --------------------------------------------------------------------------------


def test_an_oversized_body_is_refused_with_413_before_any_view_reads_it(config: None) -> None:
    olivia = api_as("olivia", "operator")
    huge = json.dumps({"agent": "alpha", "prompt": "x" * LIMIT})
    size = len(huge.encode())
    response = olivia.generic("POST", "/api/v1/runs/", huge, content_type="application/json")
    assert response.status_code == 413
    assert response.json() == {
        "detail": f"Request body too large ({size} bytes, max {LIMIT} bytes)",
        "code": "too_large",
    }
    run = owned_run("olivia")
    tool = olivia.generic("POST", f"/api/v1/runs/{run.pk}/spawn/", huge, content_type="application/json")
    assert tool.status_code == 413
    assert tool.json()["success"] is False and tool.json()["code"] == "too_large"
    page = page_as("olivia", "operator").post("/runs/start/", {"agent": "alpha", "prompt": "x" * LIMIT})
    assert page.status_code == 413
    assert page.content.decode().startswith("Request body too large")
    assert not Run.objects.filter(prompt__startswith="xxxx").exists()
    # A body under the limit is read, and then judged on its content (here: the prompt cap).
    fits = json.dumps({"agent": "alpha", "prompt": "y" * (MAX_PROMPT_CHARS + 1)})
    assert olivia.generic("POST", "/api/v1/runs/", fits, content_type="application/json").status_code == 400


# -- prompt and context caps ---------------------------------------------------------------------


def test_prompts_and_contexts_over_the_cap_are_refused_naming_the_field(config: None) -> None:
    n = MAX_PROMPT_CHARS + 1
    too_long = "p" * n
    olivia = api_as("olivia", "operator")
    run = owned_run("olivia")
    for body, field in (
        ({"agent": "alpha", "prompt": too_long}, "prompt"),
        ({"agent": "alpha", "prompt": "ok", "context": too_long}, "context"),
    ):
        response = olivia.post("/api/v1/runs/", body, format="json")
        assert response.status_code == 400
        assert response.json() == {
            "detail": f"{field} is too long ({n} chars, max {MAX_PROMPT_CHARS})",
            "code": "invalid",
        }
    cont = olivia.post(f"/api/v1/runs/{run.pk}/continue/", {"prompt": too_long}, format="json")
    assert cont.status_code == 400
    assert cont.json()["detail"] == f"prompt is too long ({n} chars, max {MAX_PROMPT_CHARS})"
    spawn = olivia.post(f"/api/v1/runs/{run.pk}/spawn/", {"prompt": too_long, "wait": 0}, format="json")
    assert spawn.status_code == 400
    assert spawn.json() == {
        "success": False,
        "output": "",
        "error": f"prompt is too long ({n} chars, max {MAX_PROMPT_CHARS})",
    }
    delegations: list[tuple[dict[str, Any], str]] = [
        ({"agent": "beta", "prompt": too_long, "wait": 0}, "prompt"),
        ({"agent": "beta", "prompt": "ok", "context": too_long, "wait": 0}, "context"),
    ]
    for body, field in delegations:
        delegate = olivia.post(f"/api/v1/runs/{run.pk}/delegate/", body, format="json")
        assert delegate.status_code == 400
        assert delegate.json()["error"] == f"{field} is too long ({n} chars, max {MAX_PROMPT_CHARS})"
    schedule = olivia.post(
        "/api/v1/schedules/",
        {"name": "big", "agent": "alpha", "prompt": too_long, "cron": "0 3 * * *"},
        format="json",
    )
    assert schedule.status_code == 400
    assert schedule.json() == {
        "errors": [{"field": "prompt", "message": f"prompt is too long ({n} chars, max {MAX_PROMPT_CHARS})"}]
    }
    assert not Schedule.objects.exists()
    with pytest.raises(RunServiceError, match=r"^prompt is too long \(100001 chars, max 100000\)$"):
        run_start(agent="alpha", prompt=too_long)
    # Exactly at the cap is fine.
    ok = olivia.post("/api/v1/runs/", {"agent": "alpha", "prompt": "q" * MAX_PROMPT_CHARS}, format="json")
    assert ok.status_code == 201
    assert not Run.objects.filter(parent=run).exists()


def test_the_dashboard_start_form_says_which_field_is_too_long(config: None) -> None:
    page = page_as("olivia", "operator")
    response = page.post(
        "/runs/start/", {"agent": "alpha", "prompt": "p" * (MAX_PROMPT_CHARS + 5)}, follow=True
    )
    assert (
        f"prompt is too long ({MAX_PROMPT_CHARS + 5} chars, max {MAX_PROMPT_CHARS})"
        in response.content.decode()
    )
    assert not Run.objects.filter(agent="alpha", prompt__startswith="ppp").exists()


# -- production settings ---------------------------------------------------------------------------


def settings_in_subprocess(tmp_path: Path, **env: str) -> dict[str, Any]:
    names = [
        "DEBUG",
        "SESSION_COOKIE_SECURE",
        "SESSION_COOKIE_HTTPONLY",
        "CSRF_COOKIE_SECURE",
        "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SECURE_SSL_REDIRECT",
        "SECURE_CONTENT_TYPE_NOSNIFF",
        "X_FRAME_OPTIONS",
    ]
    code = (
        "import json, django; django.setup(); from django.conf import settings; "
        f"print(json.dumps({{n: getattr(settings, n, None) for n in {names!r}}}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=BASE_DIR,
        env={
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "zeroclaw_site.settings",
            "DATA_DIR": str(tmp_path),
            **env,
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    values: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return values


def test_production_settings_make_cookies_secure_and_send_hsts(tmp_path: Path) -> None:
    prod = settings_in_subprocess(tmp_path, DJANGO_DEBUG="false", CLAWBOARD_TLS="true", SECRET_KEY="k" * 60)
    assert prod["DEBUG"] is False
    assert prod["SESSION_COOKIE_SECURE"] is True
    assert prod["CSRF_COOKIE_SECURE"] is True
    assert prod["SESSION_COOKIE_HTTPONLY"] is True
    assert prod["SECURE_HSTS_SECONDS"] >= 31536000
    assert prod["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert prod["SECURE_SSL_REDIRECT"] is True
    assert prod["SECURE_CONTENT_TYPE_NOSNIFF"] is True
    assert prod["X_FRAME_OPTIONS"] == "DENY"
    # The development default serves plain http on localhost, so its cookies cannot be Secure.
    dev = settings_in_subprocess(tmp_path, DJANGO_DEBUG="true")
    assert dev["DEBUG"] is True and dev["SESSION_COOKIE_SECURE"] is False


def test_the_embedded_default_has_debug_off_and_no_https_redirect(tmp_path: Path) -> None:
    env = {k: "" for k in ("DJANGO_DEBUG", "CLAWBOARD_TLS")}
    embedded = settings_in_subprocess(tmp_path, **env)
    assert embedded["DEBUG"] is False
    # `make run` serves plain http on 127.0.0.1: a redirect to https or Secure cookies would
    # lock the operator out, so those follow CLAWBOARD_TLS, not DEBUG.
    assert embedded["SECURE_SSL_REDIRECT"] is False
    assert embedded["SESSION_COOKIE_SECURE"] is False
    assert embedded["CSRF_COOKIE_SECURE"] is False
    assert embedded["SECURE_HSTS_SECONDS"] == 0
