"""Helpers for engine tests: configuration from TOML text and waiting for runs."""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings

from agents_app.config_io import parse_toml
from agents_app.services import config_replace
from runs_app.engine import dispatch
from runs_app.models import TERMINAL_STATUSES, Run

BASE = """
[risk_profiles.team]
allowed_commands = ["*"]
[risk_profiles.team.delegation_policy]
mode = "allow"
"""


def configure(toml_text: str) -> None:
    config_replace(snapshot=parse_toml(BASE + toml_text).snapshot)


def wait_for(
    run_id: Any, statuses: frozenset[str] | set[str] = TERMINAL_STATUSES, timeout: float = 30
) -> Run:
    if getattr(settings, "CLAWBOARD_DISPATCH", "") == "queued":  # no worker: run what is queued
        dispatch.queued().run_until_idle()
    deadline = time.monotonic() + timeout
    while True:
        run = Run.objects.get(pk=run_id)
        if run.status in statuses:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} still {run.status} after {timeout}s")
        time.sleep(0.02)
