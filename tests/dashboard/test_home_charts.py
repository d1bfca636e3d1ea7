"""The home page's charts (issue 17 item 5): runs, tokens and cost over time per agent and per
model, drawn by the vendored uPlot from static/ (nothing from the internet)."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from django.contrib.staticfiles import finders
from django.test import Client
from django.utils import timezone

from runs_app import selectors
from runs_app.models import Run
from tests.dashboard.support import make_run


def test_usage_series_sums_runs_tokens_and_cost_per_hour_agent_and_model(config: None) -> None:
    now = timezone.now().replace(minute=30)
    make_run("alpha", model="demo-1", input_tokens=1000, output_tokens=500, cost_cents=150)
    make_run("alpha", model="demo-1", input_tokens=10, output_tokens=5, cost_cents=0.5)
    old = make_run("beta", model="", input_tokens=7, output_tokens=3, cost_cents=2)
    Run.objects.filter(pk=old.pk).update(created_at=now - timedelta(days=2))
    ancient = make_run("beta")
    Run.objects.filter(pk=ancient.pk).update(created_at=now - timedelta(days=9))
    usage = selectors.usage_series(now=now)
    day = usage["24h"]
    assert len(day["t"]) == 24 and day["t"][1] - day["t"][0] == 3600
    assert day["agent"]["runs"] == {"alpha": [0] * 23 + [2]}
    assert day["agent"]["tokens"]["alpha"][-1] == 1515
    assert day["agent"]["cost"]["alpha"][-1] == 1.505  # dollars
    assert day["model"]["runs"] == {"demo-1": [0] * 23 + [2]}
    week = usage["7d"]
    assert len(week["t"]) == 28 and week["t"][1] - week["t"][0] == 6 * 3600
    assert sum(week["agent"]["runs"]["beta"]) == 1  # the run of nine days ago is outside
    assert sum(week["model"]["runs"]["(no model)"]) == 1
    assert sum(week["agent"]["runs"]["alpha"]) == 2


def test_the_home_page_draws_its_charts_with_the_vendored_uplot(viewer: Client) -> None:
    make_run("alpha", model="demo-1")
    body = viewer.get("/").content.decode()
    scripts = re.findall(r'<script src="(/static/[^"]+)"', body)
    assert "/static/vendor/uplot/uPlot.iife.min.js" in scripts
    for asset in scripts + re.findall(r'<link rel="stylesheet" href="(/static/[^"]+)"', body):
        assert finders.find(asset.removeprefix("/static/")), asset
    assert finders.find("vendor/uplot/LICENSE")
    embedded = re.search(r'<script id="usage-data" type="application/json">(.*?)</script>', body, re.S)
    assert embedded is not None
    data = json.loads(embedded.group(1))
    assert data["24h"]["agent"]["runs"]["alpha"][-1] == 1
    for metric in ("runs", "tokens", "cost"):
        assert f'id="chart-{metric}"' in body


def test_the_chart_data_reloads_as_json(viewer: Client, anonymous: Client) -> None:
    make_run("gamma", model="spare-1")
    response = viewer.get("/home/charts/")
    assert response.status_code == 200
    assert response.json()["7d"]["model"]["runs"]["spare-1"][-1] == 1
    assert anonymous.get("/home/charts/").status_code == 302
