"""`manage.py export_traces`: export every ended run tree not exported yet, now, in this
process (after a receiver outage, or to send the history once an endpoint is set)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from traces_app import services
from traces_app.models import TraceExport


class Command(BaseCommand):
    help = "Export every ended run tree not yet taken by the OTLP receiver (OTEL_EXPORTER_OTLP_ENDPOINT)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--timeout", type=float, default=300.0, help="seconds to keep trying (default 300)"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.CLAWBOARD_TRACES_EXPORT:
            raise CommandError("Trace export is off: set OTEL_EXPORTER_OTLP_ENDPOINT.")
        if not services.drain(timeout=options["timeout"]):
            failing = TraceExport.objects.filter(complete=False).exclude(last_error="").first()
            raise CommandError(
                f"The receiver did not take every span: {failing.last_error if failing else 'timed out'}"
            )
        total = sum(TraceExport.objects.values_list("spans_sent", flat=True))
        self.stdout.write(
            f"exported: {TraceExport.objects.filter(complete=True).count()} trees, {total} spans"
        )
