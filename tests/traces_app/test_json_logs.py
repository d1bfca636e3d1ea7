"""Structured logs: `CLAWBOARD_LOG_FORMAT=json` makes every record one JSON line; a record
written while a worker holds a run carries the run's ids."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runs_app import runlog
from runs_app.models import Run, ToolCall
from tests.runs_app.engine_support import agent, configure, engine, finish, provider  # noqa: F401
from zeroclaw_site.jsonlogs import JsonFormatter, RunFilter

ROOT = Path(__file__).resolve().parents[2]


def record(message: str) -> logging.LogRecord:
    found = logging.LogRecord("runs_app.engine.step", logging.WARNING, __file__, 1, message, None, None)
    RunFilter().filter(found)
    return found


def test_a_record_of_a_run_carries_its_ids() -> None:
    run = Run(
        id="7f1c5a34-93c1-4a0e-9d2e-0e4d5e9d1c11",
        root_id="0b8e2f7c-1c55-4b5e-8a4e-2d7d0f6c9a01",
        agent="nightly",
        spawn_site="cron",
    )
    with runlog.bound(run):
        line = json.loads(JsonFormatter().format(record("tidying %s")))
    assert set(line) == {"time", "level", "logger", "message", *runlog.run_fields(run)}
    assert {k: v for k, v in line.items() if k != "time"} == {
        "level": "WARNING",
        "logger": "runs_app.engine.step",
        "message": "tidying %s",
        "run_id": "7f1c5a34-93c1-4a0e-9d2e-0e4d5e9d1c11",
        "root_id": "0b8e2f7c-1c55-4b5e-8a4e-2d7d0f6c9a01",
        "agent_alias": "nightly",
        "spawn_site": "cron",
        "trace_id": "0b8e2f7c1c554b5e8a4e2d7d0f6c9a01",
        "span_id": runlog.span_hex(runlog.run_span_id(run.pk)),
    }
    with runlog.bound(run):
        assert '"spawn_site": "cron"' in JsonFormatter().format(record("x"))


def test_a_record_outside_a_run_has_only_the_common_fields() -> None:
    line = json.loads(JsonFormatter().format(record("started")))
    assert set(line) == {"time", "level", "logger", "message"}


def test_the_setting_makes_the_process_log_json_lines(tmp_path: Path) -> None:
    code = (
        "import django, logging; django.setup(); "
        "logging.getLogger('runs_app.engine.step').warning('run %s crashed', 'x')"
    )
    env = {
        **os.environ,
        "CLAWBOARD_LOG_FORMAT": "json",
        "DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "zeroclaw_site.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.strip().splitlines()
    parsed = json.loads(line)
    assert (parsed["level"], parsed["logger"], parsed["message"]) == (
        "WARNING",
        "runs_app.engine.step",
        "run x crashed",
    )


def test_a_bad_format_is_refused_by_name(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "CLAWBOARD_LOG_FORMAT": "xml",
        "DATA_DIR": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "zeroclaw_site.settings",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "CLAWBOARD_LOG_FORMAT must be text or json, not 'xml'" in done.stderr


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("engine")
def test_a_subagents_turns_and_tool_calls_are_logged_under_its_own_ids(caplog: Any) -> None:
    configure(
        provider(
            "solo",
            [
                {
                    "match": "^sub:",
                    "turns": [
                        {"tool_calls": [{"name": "memory_recall", "arguments": {"query": "q"}}]},
                        {"say": "ok"},
                    ],
                },
                {
                    "turns": [
                        {"tool_calls": [{"name": "spawn_subagent", "arguments": {"prompt": "sub: look"}}]},
                        {"say": "done"},
                    ]
                },
            ],
        )
        + agent("solo", "scripted.solo")
    )
    handler_filter = RunFilter()
    caplog.handler.addFilter(handler_filter)
    try:
        with caplog.at_level(logging.INFO, logger="runs_app.engine"):
            root = finish("solo", "go", spawn_site="rest")
    finally:
        caplog.handler.removeFilter(handler_filter)
    child = Run.objects.get(parent=root)
    mine = [r for r in caplog.records if getattr(r, "run_id", None) == str(child.pk)]
    call = ToolCall.objects.get(run=child)
    assert [r.getMessage().split(":")[0] for r in mine] == [
        "model turn 0",
        f"tool call memory_recall {call.call_id}",
        "model turn 1",
    ]
    assert {(r.agent_alias, r.spawn_site, r.root_id, r.trace_id) for r in mine} == {
        ("solo", "spawn_subagent", str(root.pk), runlog.trace_hex(root.pk))
    }
    assert {r.span_id for r in mine} == {runlog.span_hex(runlog.run_span_id(child.pk))}
    lines = [json.loads(JsonFormatter().format(r)) for r in mine]
    assert all(line["spawn_site"] == "spawn_subagent" for line in lines)
