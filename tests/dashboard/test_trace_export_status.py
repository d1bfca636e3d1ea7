"""The home page says whether runs are exported as traces, the export's last success and its
backlog."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from tests.dashboard.support import make_run, text_of
from traces_app.models import TraceExport


def card(page: str) -> str:
    found = re.search(r'<section class="card" id="trace-export">(.*?)</section>', page, flags=re.S)
    assert found is not None
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).strip()


def test_off_says_how_to_turn_it_on(viewer: Client, settings: Any) -> None:
    settings.CLAWBOARD_TRACES_EXPORT = False
    assert card(text_of(viewer.get("/"))) == (
        "Trace export Off: set OTEL_EXPORTER_OTLP_ENDPOINT to export every run tree as an OpenTelemetry trace."
    )


def test_on_gives_the_receiver_last_success_and_backlog(
    viewer: Client, settings: Any, monkeypatch: Any
) -> None:
    settings.CLAWBOARD_TRACES_EXPORT = True
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "https://pk:sk@otel.example.test:4318/api/public/otel")
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", raising=False)
    done, waiting, failing = make_run(), make_run(), make_run()
    make_run(status="running")  # not ended: not in the backlog yet
    when = timezone.now().replace(microsecond=0) - timedelta(minutes=3)
    TraceExport.objects.create(root_id=done.pk, complete=True, last_success_at=when)
    TraceExport.objects.create(root_id=failing.pk, attempts=2, last_error="ConnectionError: refused")
    del waiting  # ended, never tried: in the backlog
    text = card(text_of(viewer.get("/")))
    assert text == (
        "Trace export on OTLP/HTTP to https://otel.example.test:4318. "
        f"Last success: {when:%Y-%m-%d %H:%M:%S} UTC (3 minutes ago). "
        "Backlog: 2 run trees not yet taken by the receiver. "
        "Last error: ConnectionError: refused"
    )


def test_a_run_started_from_the_dashboard_says_so(operator: Client) -> None:
    from runs_app.models import Run

    response = operator.post("/runs/start/", {"agent": "alpha", "prompt": "go"})
    assert response.status_code == 302
    assert Run.objects.get(agent="alpha", prompt="go").spawn_site == "dashboard"
