"""Celery application. Tasks are thin: they take ids and call services."""

import logging
import os
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zeroclaw_site.settings")

logger = logging.getLogger(__name__)

app = Celery("zeroclaw_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

IN_MEMORY_LAYER_REFUSAL = (
    "Clawboard: refusing to start a separate Celery worker while the channel layer is the "
    "in-memory one (InMemoryChannelLayer): its events would never reach the web server, so live "
    "pages and websockets would silently stop updating. Set CHANNEL_LAYER_URL (e.g. "
    "redis://127.0.0.1:6379/1) for both the web server and the workers, or run the embedded "
    "worker with `python manage.py serve`."
)


def uses_in_memory_channel_layer() -> bool:
    from django.conf import settings

    backend = str(settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", ""))
    return backend.rsplit(".", 1)[-1] == "InMemoryChannelLayer"


@signals.worker_init.connect
def refuse_in_memory_channel_layer(sender: Any = None, **kwargs: Any) -> None:
    # The embedded worker lives in the web server's process and shares its layer.
    if getattr(sender, "clawboard_embedded", False):
        return
    if uses_in_memory_channel_layer():
        # SystemExit, not an Exception: Celery logs and ignores exceptions of signal handlers.
        raise SystemExit(IN_MEMORY_LAYER_REFUSAL)


@signals.worker_init.connect
def fit_db_pool_to_concurrency(sender: Any = None, **kwargs: Any) -> None:
    """Size the database pool from the worker's threads, or refuse a pool set too small."""
    if sender is None or getattr(sender, "clawboard_embedded", False):
        return  # the embedded worker runs on SQLite: no pool
    from django.conf import settings
    from django.db import connections

    from zeroclaw_site.dbpool import size_worker_pool

    concurrency = sender.concurrency
    if not isinstance(concurrency, int):  # "auto" is resolved after worker_init: the CPUs
        concurrency = os.cpu_count() or 1
    before = connections.settings["default"].get("OPTIONS", {}).get("pool")
    before_size = before.get("max_size") if isinstance(before, dict) else None
    refusal = size_worker_pool(
        connections.settings, concurrency, explicit=settings.CLAWBOARD_DB_POOL_EXPLICIT
    )
    if refusal:
        raise SystemExit(refusal)  # SystemExit: Celery logs and ignores exceptions of signal handlers
    after = connections.settings["default"].get("OPTIONS", {}).get("pool")
    if isinstance(after, dict) and after.get("max_size") != before_size:
        # A pool built before now (none should be) would keep its old size: build it again.
        connections["default"].close_pool()  # type: ignore[attr-defined]
        logger.info(
            "database pool: at most %s connections for -c %s (CLAWBOARD_DB_POOL_MAX unset)",
            after["max_size"],
            concurrency,
        )
