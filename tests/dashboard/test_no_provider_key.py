"""No page shows a provider's key: the variable named by api_key_env holds a secret, and
every page (and every API read) is searched for it, also after a run used that provider
against an endpoint that echoes the key back in its error body."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import Client

from agents_app.config_io import parse_toml
from agents_app.services import config_replace
from runs_app.models import TERMINAL_STATUSES, Run
from tests.dashboard.support import CONFIG_TOML, ROLES, SECRET_ENV, SECRET_VALUE, Runs, client_as
from tests.dashboard.test_pages import ADMIN_ONLY_PAGES, page_urls

API_READS = (
    "/api/v1/providers/",
    "/api/v1/providers/openai.remote/",
    "/api/v1/agents/remote/",
    "/api/v1/config/",
    "/api/v1/config/?format=toml",
    "/api/v1/config/?format=json",
    "/api/v1/config/revisions/",
)


def assert_no_secret(client: Client, urls: list[str]) -> int:
    """GET every url; none may contain the secret. Returns how many answered 200."""
    ok = 0
    for url in urls:
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content  # type: ignore[attr-defined]
        assert SECRET_VALUE.encode() not in body, url
        ok += response.status_code == 200
    return ok


@pytest.mark.parametrize("role", ROLES)
def test_no_page_shows_a_providers_key(role: str, runs: Runs) -> None:
    client = client_as(role)
    urls = [*page_urls(runs), *ADMIN_ONLY_PAGES, *API_READS]
    assert assert_no_secret(client, urls) >= len(page_urls(runs))
    # the variable's NAME is shown, so the provider pages were really looked at
    assert SECRET_ENV in client.get("/providers/").content.decode()
    assert SECRET_ENV in client.get("/providers/openai.remote/").content.decode()


class EchoKeyHandler(BaseHTTPRequestHandler):
    """An OpenAI-compatible endpoint that refuses the key and quotes it back, as some do."""

    received: list[str] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        key = self.headers.get("Authorization", "")
        EchoKeyHandler.received.append(key)
        body = json.dumps({"error": {"message": f"Incorrect API key provided: {key}", "type": "auth"}})
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def echo_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoKeyHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


@pytest.mark.django_db(transaction=True)
def test_a_run_that_used_the_key_shows_it_nowhere(worker: object, echo_server: str) -> None:
    toml = CONFIG_TOML.replace('uri = "http://127.0.0.1:9/v1"', f'uri = "{echo_server}"')
    toml = toml.replace(
        'model_provider = "openai.remote"\nrisk_profile = "team"\nenabled = false',
        'model_provider = "openai.remote"\nrisk_profile = "team"',
    )
    EchoKeyHandler.received.clear()
    config_replace(snapshot=parse_toml(toml).snapshot)
    operator = client_as("operator")
    response = operator.post("/runs/start/", {"agent": "remote", "prompt": "hello"})
    assert response.status_code == 302
    run = Run.objects.get(agent="remote")
    deadline = time.monotonic() + 30
    while run.status not in TERMINAL_STATUSES:
        assert time.monotonic() < deadline, run.status
        time.sleep(0.05)
        run.refresh_from_db()
    assert run.status == "failed"
    assert run.error.startswith("All model providers/models failed after")
    assert f"Bearer {SECRET_VALUE}" in EchoKeyHandler.received  # the key really was used
    for role in ROLES:
        client = client_as(role)
        urls = [
            "/",
            "/runs/",
            f"/runs/{run.pk}/",
            f"/runs/{run.pk}/detail/",
            f"/runs/{run.pk}/nodes/?ids={run.pk}",
            f"/api/v1/runs/{run.pk}/",
            f"/api/v1/runs/{run.pk}/events/",
            f"/api/v1/runs/{run.pk}/transcript/",
            f"/api/v1/runs/{run.pk}/tree/",
            "/providers/openai.remote/",
            "/config/",
        ]
        assert assert_no_secret(client, urls) == len(urls)
