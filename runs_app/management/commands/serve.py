"""`manage.py serve`: the whole product in one process (SPEC §12, embedded mode).

daphne serves HTTP and websockets in the main thread; a Celery worker runs in a thread of the
same process; a timer thread runs the reaper and fires due schedules."""

from __future__ import annotations

import logging
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

log = logging.getLogger(__name__)

PERIOD_SECS = 30.0


def embedded_broker() -> bool:
    return str(settings.CELERY_BROKER_URL).startswith("memory://")


def check_deployment() -> None:
    """A worker in another process cannot reach an in-memory channel layer: refuse to start
    instead of serving pages that silently never update."""
    from zeroclaw_site.celery import uses_in_memory_channel_layer

    if not embedded_broker() and uses_in_memory_channel_layer():
        raise CommandError(
            f"CELERY_BROKER_URL is {settings.CELERY_BROKER_URL!r} (workers in other processes) but the "
            "channel layer is the in-memory one (InMemoryChannelLayer), which those workers cannot "
            "reach: live updates would never arrive. Set CHANNEL_LAYER_URL (e.g. "
            "redis://127.0.0.1:6379/1) as well, or unset CELERY_BROKER_URL for the embedded mode."
        )


def supervise(stop: threading.Event, period: float) -> None:
    """Reaper and schedules, every `period` seconds, until `stop` is set."""
    from django.db import close_old_connections

    from runs_app.services import schedules_fire_due
    from runs_app.supervision import reap_once
    from traces_app.services import sweep

    while not stop.wait(period):
        for name, job in (("reaper", reap_once), ("schedules", schedules_fire_due), ("traces", sweep)):
            try:
                close_old_connections()
                job()
            except Exception:  # one bad sweep must not end supervision
                log.exception("%s sweep failed", name)
            finally:
                close_old_connections()


class Command(BaseCommand):
    help = "Serve Clawboard (HTTP + websockets) with an in-process Celery worker, reaper and scheduler."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument(
            "--no-worker",
            action="store_true",
            help="do not start the in-process worker (scale-out: `celery worker` processes do the work)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        check_deployment()
        if options["no_worker"] and embedded_broker():
            raise CommandError(
                "--no-worker needs a real broker (CELERY_BROKER_URL): nothing would run the runs."
            )
        # Imported here: daphne installs Twisted's asyncio reactor when it is first imported.
        from daphne.endpoints import build_endpoint_description_strings
        from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

        from runs_app.supervision import reap_once
        from zeroclaw_site.asgi import application
        from zeroclaw_site.daphne_server import DenialServer
        from zeroclaw_site.embedded import EmbeddedWorkerThread

        worker = None if options["no_worker"] else EmbeddedWorkerThread(settings.CLAWBOARD_WORKERS).start()
        stop = threading.Event()
        try:
            # With the memory:// broker this process is the only worker, so runs still marked
            # running by an earlier boot are lost; other deployments must not judge that.
            reap_once(startup=embedded_broker())
            period = float(getattr(settings, "CLAWBOARD_REAP_SECS", PERIOD_SECS))
            threading.Thread(
                target=supervise, args=(stop, period), name="clawboard-supervisor", daemon=True
            ).start()
            host, port = options["host"], options["port"]
            self.stdout.write(f"Clawboard on http://{host}:{port}/ (Ctrl+C to stop)")
            DenialServer(
                application=ASGIStaticFilesHandler(application),
                endpoints=build_endpoint_description_strings(host=host, port=port),
            ).run()
        finally:
            stop.set()
            if worker is not None:
                worker.stop()
