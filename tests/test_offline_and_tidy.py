"""Offline and tidy (issue 17 item 7): the API docs load nothing from the internet, every page
has an icon and /favicon.ico answers, and `make run` installs only what serving needs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

ROOT = Path(__file__).resolve().parents[1]
CSRF_IN_SWAGGER = re.compile(r'(request\.headers\["[^"]+"\] = ")[A-Za-z0-9]+(")')


def local_assets(body: str) -> list[str]:
    return re.findall(r'(?:src|href)="(/static/[^"]+)"', body)


@pytest.mark.parametrize("url", ["/api/docs/", "/api/redoc/"])
def test_the_api_docs_are_served_from_static_files(db: None, url: str) -> None:
    response = Client().get(url)
    assert response.status_code == 200
    # Swagger UI's page carries this request's random CSRF token, which may spell "cdn" by chance.
    body = CSRF_IN_SWAGGER.sub(r"\1<csrf token>\2", response.content.decode())
    assert not re.search(r"https?://", body.replace("http://testserver", "")), "nothing from the internet"
    assert "@latest" not in body and "cdn" not in body.lower()
    assert response["Content-Security-Policy"].startswith("default-src 'self';")
    scripts = [a for a in local_assets(body) if a.endswith(".js")]
    assert scripts, "the page loads its UI from /static/"
    for asset in local_assets(body):
        assert finders.find(asset.removeprefix("/static/")), f"{asset} is not among the static files"


def test_favicon_ico_answers_with_the_site_icon(db: None) -> None:
    response = Client().get("/favicon.ico")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert b"<svg" in b"".join(response.streaming_content)  # type: ignore[attr-defined]


def test_every_page_links_its_icon(db: None) -> None:
    body = Client().get("/accounts/login/").content.decode()
    icon = re.search(r'<link rel="icon" href="(/static/[^"]+)"', body)
    assert icon is not None
    assert finders.find(icon.group(1).removeprefix("/static/"))


def make_dry_run(target: str) -> str:
    done = subprocess.run(
        ["make", "-n", "-B", target], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    return done.stdout


def test_make_run_installs_the_runtime_dependencies_only() -> None:
    installs = [line for line in make_dry_run("run").splitlines() if "pip install" in line]
    assert installs == [".venv/bin/pip install -q -e ."]


def test_make_test_installs_the_dev_extras() -> None:
    assert '.venv/bin/pip install -q -e ".[dev]"' in make_dry_run("test").splitlines()
