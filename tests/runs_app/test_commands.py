"""`manage.py run_agent`, `manage.py serve` and the start-up refusals (SPEC §12), run as the
operator would: in child processes, against a database of their own."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.core.management import CommandError, call_command

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
[risk_profiles.team]
[providers.models.scripted.greet]
model = "greet-1"
script = [
  { match = "^slow", turns = [ { sleep_ms = 2500 }, { say = "slept" } ] },
  { match = "^fail", turns = [ { error = "boom" } ] },
  { turns = [ { say = "hello {{prompt}}" } ] },
]
[agents.greeter]
model_provider = "scripted.greet"
risk_profile = "team"
"""
PREPARE = """
import django, sys
django.setup()
from django.core.management import call_command
from agents_app.users import user_create_or_update
call_command("migrate", verbosity=0)
call_command("clawboard_config", "import", sys.argv[1], verbosity=0)
print(user_create_or_update(username="op", role="operator")[2])
"""


def child_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "CHANNEL_LAYER", "DATABASE_URL"))
    }
    env.update(
        DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="zeroclaw_site.settings", PYTHONWARNINGS="ignore"
    )
    env.update(extra)
    return env


def manage(data_dir: Path, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=child_env(data_dir, **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A migrated database with the greeter agent and an operator's token."""
    data_dir = tmp_path_factory.mktemp("site")
    config = data_dir / "config.toml"
    config.write_text(CONFIG)
    done = subprocess.run(
        [sys.executable, "-c", PREPARE, str(config)],
        cwd=ROOT,
        env=child_env(data_dir),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return data_dir, done.stdout.strip().splitlines()[-1]


def test_run_agent_prints_the_final_text_and_exits_0(site: tuple[Path, str]) -> None:
    done = manage(site[0], "run_agent", "greeter", "world", "--wait", "60")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello world\n"


def test_run_agent_prints_the_error_to_stderr_and_exits_non_zero_on_failure(site: tuple[Path, str]) -> None:
    done = manage(site[0], "run_agent", "greeter", "fail now", "--wait", "60")
    assert done.returncode == 1
    assert done.stdout == ""
    assert " failed: All model providers/models failed after 2 failure event(s)" in done.stderr


def test_run_agent_refuses_an_unknown_agent(site: tuple[Path, str]) -> None:
    done = manage(site[0], "run_agent", "nobody", "hi")
    assert done.returncode == 1
    assert "Unknown agent 'nobody'" in done.stderr


def test_a_separate_celery_worker_refuses_the_in_memory_channel_layer(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "celery", "-A", "zeroclaw_site", "worker", "-P", "threads", "-c", "1",
         "--without-heartbeat", "--without-mingle", "--without-gossip"],
        cwd=ROOT,
        env=child_env(tmp_path, CELERY_BROKER_URL="memory://localhost/"),
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert (
        "refusing to start a separate Celery worker while the channel layer is the in-memory one"
        in done.stderr
    )


def test_serve_refuses_a_real_broker_with_the_in_memory_channel_layer(settings: Any) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    with pytest.raises(CommandError, match="the channel layer is the in-memory one"):
        call_command("serve")


def test_serve_refuses_to_start_without_any_worker_on_the_memory_broker(settings: Any) -> None:
    settings.CELERY_BROKER_URL = "memory://localhost/"
    with pytest.raises(CommandError, match="--no-worker needs a real broker"):
        call_command("serve", "--no-worker")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server(site: tuple[Path, str]) -> Iterator[httpx.Client]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=ROOT,
        env=child_env(site[0]),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Token {site[1]}"})
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if client.get("/api/v1/runs/").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.stdout.read() if process.stdout else ""
            assert time.monotonic() < deadline, "serve did not answer within 60 s"
            time.sleep(0.2)
        yield client
    finally:
        client.close()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise


def test_serve_answers_other_requests_while_one_waits_for_its_run(server: httpx.Client) -> None:
    answers: list[httpx.Response] = []
    waiting = threading.Thread(
        target=lambda: answers.append(
            server.post(
                "/api/v1/runs/", json={"agent": "greeter", "prompt": "slowly", "wait": 60}, timeout=90
            )
        )
    )
    waiting.start()
    try:
        listed = server.get("/api/v1/runs/", timeout=30)
        assert listed.status_code == 200
        assert waiting.is_alive(), "the waiting request should still be waiting"
    finally:
        waiting.join(timeout=90)
    [answer] = answers
    assert answer.status_code == 201
    assert (answer.json()["status"], answer.json()["output"]) == ("completed", "slept")


def test_serve_streams_events_while_the_run_is_still_going(server: httpx.Client) -> None:
    run = server.post("/api/v1/runs/", json={"agent": "greeter", "prompt": "slow stream"}).json()
    seen: list[str] = []
    status_at_first_event = None
    with server.stream(
        "GET", f"/api/v1/runs/{run['id']}/events/", headers={"Accept": "text/event-stream"}, timeout=60
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("event: "):
                seen.append(line.removeprefix("event: "))
                if status_at_first_event is None:
                    status_at_first_event = server.get(f"/api/v1/runs/{run['id']}/").json()["status"]
            elif line.startswith("data: "):
                assert json.loads(line.removeprefix("data: "))["type"] == seen[-1]
    assert status_at_first_event not in (None, "completed")
    assert seen[0] == "run.queued" and seen[-1] == "run.completed"
