"""Browser tests: `manage.py serve` (daphne + the in-process Celery worker) in a child process
with its own DATA_DIR and SQLite database, driven by Debian's chromium through Playwright.

Run them in their own pytest process: `make e2e` (or `.venv/bin/pytest tests/e2e`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Generator, Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright, sync_playwright

from tests.e2e.support import CHROMIUM, CHROMIUM_ARGS, PASSWORDS, ROOT, Browse, Server, free_port

# Runs management commands one after the other in ONE child process (Django starts once),
# and prints what each wrote, as a JSON list.
_MANAGE = """
import io, json, sys
import django
django.setup()
from django.core.management import call_command
outputs = []
for args in json.loads(sys.argv[1]):
    buffer = io.StringIO()
    call_command(*args, stdout=buffer)
    outputs.append(buffer.getvalue())
print(json.dumps(outputs))
"""


def _manage(env: dict[str, str], *commands: list[str]) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-c", _MANAGE, json.dumps(commands)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    if done.returncode != 0:
        raise RuntimeError(f"management commands {commands} failed:\n{done.stdout}\n{done.stderr}")
    outputs: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return outputs


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"manage.py serve exited with {process.returncode}:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(url + "/accounts/login/", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"manage.py serve did not answer within {timeout}s:\n{log.read_text()}")


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    data_dir = Path(tempfile.mkdtemp(prefix="clawboard-e2e-"))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "CELERY_BROKER_URL", "CHANNEL_LAYER_URL")
    }
    env.update(
        DATA_DIR=str(data_dir),
        DJANGO_DEBUG="false",
        CELERY_TASK_ALWAYS_EAGER="false",
        PYTHONUNBUFFERED="1",
        DJANGO_SETTINGS_MODULE="zeroclaw_site.settings",
    )
    config = data_dir / "e2e.toml"
    config.write_text(
        (ROOT / "demo" / "clawboard.toml").read_text()
        + "\n"
        + (Path(__file__).parent / "e2e_config.toml").read_text()
    )
    demo = _manage(
        env,
        ["migrate", "--noinput", "--verbosity", "0"],
        ["demo"],
        ["clawboard_config", "import", str(config)],
        ["clawboard_user", "olga", "--role", "operator", "--password", PASSWORDS["olga"]],
        ["clawboard_user", "vera", "--role", "viewer", "--password", PASSWORDS["vera"]],
        ["clawboard_user", "nora", "--role", "viewer", "--password", PASSWORDS["nora"]],
        [
            "shell",
            "-c",
            "from django.contrib.auth.models import User; User.objects.get(username='nora').groups.clear()",
        ],
    )[1]
    password = re.search(r"^admin password: (\S+)$", demo, re.M)
    token = re.search(r"^admin API token: (\S+)$", demo, re.M)
    assert password and token, demo

    port = free_port()
    log = data_dir / "serve.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, log)
        yield Server(
            url=url,
            data_dir=data_dir,
            admin_password=password.group(1),
            admin_token=token.group(1),
            process=process,
            log=log,
            users={"admin": password.group(1), **PASSWORDS},
        )
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (never a downloaded browser)")
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Keep each phase's report on the item, so the `browse` fixture knows the test failed."""
    report = yield
    setattr(item, f"report_{report.when}", report)
    return report


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The screenshots for the operator guide come last, when the scenarios have left data."""
    items.sort(key=lambda item: item.get_closest_marker("screenshots") is not None)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "screenshots: takes the operator guide's screenshots (runs last)")


@pytest.fixture
def browse(request: pytest.FixtureRequest, browser: Browser, server: Server) -> Iterator[Browse]:
    b = Browse(browser, server)
    yield b
    report = getattr(request.node, "report_call", None)
    failed = report is not None and report.failed
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    b.close(name if failed else None)
