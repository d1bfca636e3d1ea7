"""Shared helpers of the engine suite (`test_engine_*.py`): configuration written from Python
values, runs started through the services, and their transcripts and tool calls read back.

Every engine test runs a real in-process Celery worker (2 threads) with scripted providers, so
the model tool path is exercised end to end: a scripted model turn calls a tool, the engine
admits or refuses it, children run on the worker, results come back to the parent."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest

from agents_app.users import user_create_or_update
from runs_app.engine import dispatch
from runs_app.models import ACTIVE_STATUSES, TERMINAL_STATUSES, Message, Run, RunEvent, ToolCall
from runs_app.services import run_start
from tests.runs_app.helpers import configure, wait_for

__all__ = [
    "TERMINAL_STATUSES",
    "agent",
    "at",
    "call_results",
    "configure",
    "drain",
    "events_of",
    "finish",
    "idle",
    "inline",
    "make_user",
    "provider",
    "start",
    "toml_value",
    "transcript",
    "wait_for",
    "wait_until",
]


def toml_value(value: Any) -> str:
    """Render a Python value as an inline TOML value (scripts are nested lists and tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"cannot render {value!r} as TOML")


def provider(alias: str, script: list[dict[str, Any]], *, model: str = "", **fields: Any) -> str:
    """A `[providers.models.scripted.<alias>]` section."""
    lines = [f"[providers.models.scripted.{alias}]", f"model = {toml_value(model or alias + '-1')}"]
    lines += [f"{k} = {toml_value(v)}" for k, v in fields.items() if k != "pricing"]
    lines.append(f"script = {toml_value(script)}")
    if "pricing" in fields:
        lines.append(f"[providers.models.scripted.{alias}.pricing]")
        lines += [f"{k} = {toml_value(v)}" for k, v in fields["pricing"].items()]
    return "\n".join(lines) + "\n"


def agent(alias: str, model_provider: str, *, risk: str = "team", runtime: str = "", **fields: Any) -> str:
    """An `[agents.<alias>]` section (risk profile `team` of helpers.BASE by default)."""
    lines = [
        f"[agents.{alias}]",
        f"model_provider = {toml_value(model_provider)}",
        f"risk_profile = {toml_value(risk)}",
    ]
    if runtime:
        lines.append(f"runtime_profile = {toml_value(runtime)}")
    lines += [f"{k} = {toml_value(v)}" for k, v in fields.items()]
    return "\n".join(lines) + "\n"


def configure_turn_of_twenty() -> None:
    """Agent `boss`, whose first turn spawns twenty children (each says "did <prompt>") and
    whose second says "got them"."""
    spawn = {"name": "spawn_subagent", "arguments": {"prompt": "sub: part"}}
    configure(
        provider(
            "boss",
            [
                {"match": "^sub:", "turns": [{"say": "did {{prompt}}"}]},
                {"turns": [{"tool_calls": [spawn] * 20}, {"say": "got them"}]},
            ],
        )
        + agent("boss", "scripted.boss", runtime="wide")
        + "[runtime_profiles.wide]\nmax_children_per_run = 20\n"
    )


def start(agent_alias: str, prompt: str, **kwargs: Any) -> Run:
    return run_start(agent=agent_alias, prompt=prompt, **kwargs)


def finish(agent_alias: str, prompt: str, timeout: float = 30, **kwargs: Any) -> Run:
    """Start a top-level run and wait until it is terminal."""
    return wait_for(start(agent_alias, prompt, **kwargs).pk, timeout=timeout)


def at(value: datetime | None) -> datetime:
    """A timestamp the test knows is set (started_at, finished_at of a finished run)."""
    assert value is not None
    return value


def transcript(run: Run | Any) -> list[tuple[str, str]]:
    run_id: Any = getattr(run, "pk", run)
    return [(m.role, m.content) for m in Message.objects.filter(run_id=run_id).order_by("seq")]


def call_results(run: Run | Any, name: str | None = None) -> list[dict[str, Any]]:
    """The results of a run's tool calls, in order (turn, position)."""
    run_id: Any = getattr(run, "pk", run)
    qs = ToolCall.objects.filter(run_id=run_id).order_by("turn", "position")
    if name is not None:
        qs = qs.filter(name=name)
    return [dict(c.result or {}) for c in qs]


def events_of(run: Run | Any, type_: str | None = None) -> list[RunEvent]:
    qs = RunEvent.objects.filter(run_id=getattr(run, "pk", run)).order_by("id")
    if type_ is not None:
        qs = qs.filter(type=type_)
    return list(qs)


def wait_until(predicate: Any, timeout: float = 20, message: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not reached after {timeout}s")
        time.sleep(0.02)


def drain(timeout: float = 30) -> None:
    """Wait until no run is active, so a test never leaves work behind for the next one."""
    wait_until(
        lambda: not Run.objects.filter(status__in=ACTIVE_STATUSES).exists(), timeout, "all runs terminal"
    )


def make_user(username: str = "op", role: str = "admin") -> Any:
    user, _, _ = user_create_or_update(username=username, role=role)
    return user


def idle(timeout: float = 15) -> None:
    """Wait until no worker thread holds a run (e.g. a cancelled run still sleeping in its model
    call), so that the next test starts with both worker threads free."""
    from runs_app.engine import heartbeat

    wait_until(lambda: not heartbeat.held_ids(), timeout, "worker threads idle")


@pytest.fixture
def inline(settings: Any, transactional_db: None) -> Iterator[dispatch.QueuedDispatcher]:
    """No worker thread: every message the engine sends waits in a queue of this process,
    and `run_until_idle()` (which `wait_for` and `finish` call first) runs them, and those
    they send, one after the other in the test's own thread. A run is then as far as it can
    go without the outside world: nothing to poll, nothing to sleep for."""
    import runs_app.tasks  # noqa: F401 - registers the tasks the queue runs

    settings.CLAWBOARD_DISPATCH = "queued"
    queue = dispatch.queued()
    queue.queue.clear()
    queue.delayed.clear()
    yield queue
    queue.queue.clear()
    queue.delayed.clear()


@pytest.fixture
def engine(worker: object) -> Iterator[object]:
    """The worker, and at the end of the test: every run terminal (cancel what is left) and
    the worker threads idle."""
    yield worker
    from runs_app.services import run_cancel

    try:
        drain(timeout=15)
    except AssertionError:
        for run in Run.objects.filter(status__in=ACTIVE_STATUSES, parent__isnull=True):
            try:
                run_cancel(run=run, check_owner=False)
            except Exception:  # best effort cleanup
                pass
        drain(timeout=15)
    idle()
