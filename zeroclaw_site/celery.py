"""Celery application. Tasks are thin: they take ids and call services."""

import os
from typing import Any

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zeroclaw_site.settings")

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
