"""Celery tasks: the top of the house, and thin. They take ids and call the engine or a
service; the engine sends them by name (`runs_app/engine/dispatch.py`)."""

from __future__ import annotations

from typing import Any

from celery import shared_task
from django.db import close_old_connections

from runs_app import services, supervision
from runs_app.engine import step, timers


@shared_task(name="runs.advance_run", acks_late=True, ignore_result=True)
def advance_run(run_id: str) -> None:
    close_old_connections()
    try:
        step.advance_run(run_id)
    finally:
        close_old_connections()


@shared_task(name="runs.continue_run", acks_late=True, ignore_result=True)
def continue_run(run_id: str, owner: str, answer: dict[str, Any]) -> None:
    close_old_connections()
    try:
        step.continue_run(run_id, owner, answer)
    finally:
        close_old_connections()


@shared_task(name="runs.reap", ignore_result=True)
def reap() -> None:
    close_old_connections()
    supervision.reap_once()


@shared_task(name="runs.fire_schedules", ignore_result=True)
def fire_schedules() -> None:
    close_old_connections()
    services.schedules_fire_due()


@shared_task(name="runs.expire_call", ignore_result=True)
def expire_call(call_id: int) -> None:
    """Promptly settle an await_sessions call whose deadline has come (the reaper is the backstop)."""
    close_old_connections()
    timers.expire_call(call_id)


@shared_task(name="runs.expire_run", ignore_result=True)
def expire_run(run_id: str) -> None:
    """End a run whose deadline has come, promptly (the reaper's sweep is the backstop)."""
    close_old_connections()
    timers.expire_run(run_id)
