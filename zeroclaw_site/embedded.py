"""The embedded worker: a real Celery worker (threads pool) inside the serving process,
fed by the in-process `memory://` broker. Used by `manage.py serve` and by tests."""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any

from celery.apps.worker import Worker
from celery.platforms import SecurityWarning

from zeroclaw_site.celery import app

log = logging.getLogger(__name__)

POLLING_INTERVAL_SECS = 0.002
# The embedded worker runs as whoever runs `make run` (root in a container): nothing to warn about.
warnings.filterwarnings("ignore", category=SecurityWarning)


class EmbeddedWorker(Worker):
    """A worker that lives in a thread: no signal handlers, no banner, no stdout redirection."""

    # It shares the serving process's channel layer, so the in-memory one is fine for it
    # (zeroclaw_site.celery refuses that layer to separate worker processes).
    clawboard_embedded = True

    def install_platform_tweaks(self, worker: Any) -> None:
        pass

    def on_consumer_ready(self, consumer: Any) -> None:
        pass

    def emit_banner(self) -> None:
        pass

    def redirect_stdouts(self, **kwargs: Any) -> None:  # type: ignore[override]
        pass


class EmbeddedWorkerThread:
    def __init__(self, concurrency: int = 4) -> None:
        self.concurrency = concurrency
        # The memory transport polls its queue: this is the longest a hop waits for the worker
        # to see its message, traded against the idle process's wake-ups (docs/performance.md).
        app.conf.broker_transport_options = {"polling_interval": POLLING_INTERVAL_SECS}
        app.conf.worker_hijack_root_logger = False
        self.worker = EmbeddedWorker(
            app=app,
            pool_cls="threads",
            concurrency=concurrency,
            without_heartbeat=True,
            without_mingle=True,
            without_gossip=True,
            loglevel="WARNING",
            hostname=f"embedded-{threading.get_ident()}@localhost",
            quiet=True,
        )
        self.thread = threading.Thread(target=self._run, name="clawboard-embedded-worker", daemon=True)

    def _run(self) -> None:
        try:
            self.worker.start()
        except Exception:
            log.exception("embedded worker stopped")

    def start(self) -> EmbeddedWorkerThread:
        self.thread.start()
        return self

    def stop(self) -> None:
        try:
            self.worker.stop(in_sighandler=False)
        except Exception:
            log.exception("stopping the embedded worker failed")
        self.thread.join(timeout=10)
