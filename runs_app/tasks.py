"""Celery tasks: thin, they take ids and call the engine or a service."""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections


@shared_task(name="runs.advance_run", acks_late=True, ignore_result=True)
def advance_run(run_id: str) -> None:
    from runs_app.engine.loop import advance_run as advance

    close_old_connections()
    try:
        advance(run_id)
    finally:
        close_old_connections()


@shared_task(name="runs.reap", ignore_result=True)
def reap() -> None:
    from runs_app.supervision import reap_once

    close_old_connections()
    reap_once()


@shared_task(name="runs.fire_schedules", ignore_result=True)
def fire_schedules() -> None:
    from runs_app.services import schedules_fire_due

    close_old_connections()
    schedules_fire_due()
