"""The home page on a fresh machine: the sandbox strip names what is missing and the command
that installs it; a disabled agent has no budget gauge; `make run` installs bubblewrap and
serves with DEBUG off unless asked."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from django.test import Client

from runs_app.engine.tools import sandbox
from tests.dashboard.support import text_of

ROOT = Path(__file__).resolve().parents[2]


def test_a_missing_bubblewrap_is_named_with_the_command_that_installs_it(
    viewer: Client, settings: object
) -> None:
    settings.CLAWBOARD_BWRAP = "/nonexistent/bwrap"  # type: ignore[attr-defined]
    page = text_of(viewer.get("/home/live/"))
    assert (
        '<code id="sandbox-fix-command">make bwrap  (or: sudo apt-get install -y bubblewrap)</code>' in page
    )
    sandbox.status(refresh=True)


def test_a_working_sandbox_is_one_line_not_a_card(viewer: Client) -> None:
    page = text_of(viewer.get("/"))
    strip = re.search(
        r'<section class="sandbox-strip[^"]*" id="sandbox-status".*?</section>', page, flags=re.S
    )
    assert strip is not None
    assert ('id="sandbox-fix"' in strip.group(0)) is not sandbox.status().available


def test_a_disabled_agent_has_no_budget_gauge(viewer: Client) -> None:
    page = text_of(viewer.get("/"))
    gauges = re.search(r'<section class="card" id="budget-gauges">.*?</section>', page, flags=re.S)
    assert gauges is not None
    trackers = re.findall(r"<tr><td>([a-z0-9_-]+)</td>", gauges.group(0))
    assert "alpha" in trackers and "sleeper" not in trackers and "remote" not in trackers


def make_dry_run(*args: str) -> str:
    done = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout


def test_make_run_installs_bubblewrap_and_serves_with_debug_off() -> None:
    plan = make_dry_run("run")
    assert "apt-get install -y bubblewrap" in plan
    assert "DJANGO_DEBUG=false .venv/bin/python manage.py serve" in plan
    assert "DJANGO_DEBUG=true .venv/bin/python manage.py serve" in make_dry_run("run", "DEBUG=1")
