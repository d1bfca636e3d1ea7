"""Celery tasks of the trace export: thin, they take ids and call the services."""

from __future__ import annotations

from celery import shared_task
from django.db import close_old_connections

from traces_app import services


@shared_task(name="traces.export_tree", ignore_result=True)
def export_tree(root_id: str) -> None:
    close_old_connections()
    try:
        services.export_tree(root_id=root_id)
    finally:
        close_old_connections()


@shared_task(name="traces.sweep", ignore_result=True)
def sweep() -> None:
    close_old_connections()
    services.sweep()
