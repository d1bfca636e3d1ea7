"""`manage.py run_agent ALIAS "prompt" [--wait SECONDS]`: run an agent once from a shell.

Prints the run's final text and exits 0, or prints its error to stderr and exits 1
(2 when it is still going after `--wait`)."""

from __future__ import annotations

import sys
from typing import Any

from asgiref.sync import async_to_sync
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs_app import live
from runs_app.models import Run
from runs_app.services import RunServiceError, run_start


class Command(BaseCommand):
    help = "Run an agent on a prompt, wait for it, print its final text."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("alias")
        parser.add_argument("prompt")
        parser.add_argument("--context", default="")
        parser.add_argument("--wait", type=float, default=300.0, help="seconds to wait (default 300)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["wait"] < 0:
            raise CommandError("--wait must not be negative")
        worker = None
        # With the memory:// broker only a worker in this process can run the run.
        if str(settings.CELERY_BROKER_URL).startswith("memory://") and not settings.CELERY_TASK_ALWAYS_EAGER:
            from zeroclaw_site.embedded import EmbeddedWorkerThread

            worker = EmbeddedWorkerThread(settings.CLAWBOARD_WORKERS).start()
        try:
            try:
                run = run_start(agent=options["alias"], prompt=options["prompt"], context=options["context"])
            except RunServiceError as exc:
                raise CommandError(exc.message) from exc
            finished = async_to_sync(live.wait_terminal)([run.pk], options["wait"])
            run = Run.objects.get(pk=run.pk)
        finally:
            if worker is not None:
                worker.stop()
        if not finished:
            self.stderr.write(f"run {run.pk} is still {run.status} after {options['wait']:g}s")
            sys.exit(2)
        if run.status != Run.Status.COMPLETED:
            self.stderr.write(f"run {run.pk} {run.status}: {run.error}")
            sys.exit(1)
        self.stdout.write(run.output)
