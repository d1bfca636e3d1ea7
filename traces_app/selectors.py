"""What the dashboard says about the trace export."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.db.models import Max
from django.utils import timezone

from runs_app.models import TERMINAL_STATUSES, Run
from traces_app.models import TraceExport


@dataclass(frozen=True)
class ExportStatus:
    enabled: bool
    endpoint: str
    last_success_at: datetime | None
    # Ended trees with spans the receiver has not taken yet (failed, or not tried yet).
    backlog: int
    last_error: str


def export_status() -> ExportStatus:
    import os

    given = os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or os.environ.get(
        "OTEL_EXPORTER_OTLP_ENDPOINT", ""
    )
    parts = urlsplit(given)
    # Only where the spans go, never a credential of the URL.
    endpoint = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    if not settings.CLAWBOARD_TRACES_EXPORT:
        return ExportStatus(False, "", None, 0, "")
    last = TraceExport.objects.aggregate(at=Max("last_success_at"))["at"]
    horizon = timezone.now() - timedelta(hours=float(settings.CLAWBOARD_TRACES_HORIZON_HOURS))
    backlog = (
        Run.objects.filter(parent__isnull=True, status__in=TERMINAL_STATUSES, finished_at__gte=horizon)
        .exclude(pk__in=TraceExport.objects.filter(complete=True).values("root_id"))
        .count()
    )
    failing = (
        TraceExport.objects.filter(complete=False).exclude(last_error="").order_by("-updated_at").first()
    )
    return ExportStatus(True, endpoint, last, backlog, failing.last_error if failing else "")
