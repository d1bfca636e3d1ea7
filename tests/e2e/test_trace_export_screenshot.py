"""A run tree as the real receiver shows it: Arize Phoenix's trace page in chromium, beside
Clawboard's own run page for the same tree (docs/screenshots/trace-phoenix-and-run-page.png,
refreshed with UPDATE_SCREENSHOTS=1)."""

from __future__ import annotations

import base64
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect

from runs_app import runlog
from tests.e2e.conftest import _manage
from tests.e2e.support import ROOT, SCREENSHOTS, Browse, Server, eventually
from tests.traces_app import receivers


@pytest.fixture(scope="module")
def phoenix_url() -> Iterator[str]:
    if not receivers.installed():
        message = f"Arize Phoenix is not installed at {receivers.PHOENIX} (make phoenix)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with receivers.phoenix(Path(tempfile.mkdtemp(prefix="clawboard-phoenix-"))) as base:
        yield base


def test_phoenix_shows_the_exported_tree_beside_the_run_page(
    browse: Browse, server: Server, phoenix_url: str
) -> None:
    run_id = server.api(
        "POST", "/api/v1/runs/", {"agent": "coordinator", "prompt": "plan the release", "wait": 60}
    )["id"]
    assert server.api("GET", f"/api/v1/runs/{run_id}/")["status"] == "completed"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OTEL_", "DATABASE_URL", "CELERY_BROKER_URL"))
    }
    env.update(
        DATA_DIR=str(server.data_dir),
        DJANGO_SETTINGS_MODULE="zeroclaw_site.settings",
        DJANGO_DEBUG="true",
        OTEL_EXPORTER_OTLP_ENDPOINT=phoenix_url,
    )
    (said,) = _manage(env, ["export_traces", "--timeout", "60"])
    assert said.startswith("exported: ")
    trace = runlog.trace_hex(run_id)
    eventually(lambda: len(receivers.spans_of(phoenix_url, trace)) > 0, what="spans in Phoenix")

    phoenix = browse.browser.new_page(viewport={"width": 1280, "height": 800})
    try:
        phoenix.goto(f"{phoenix_url}/redirects/traces/{trace}")
        expect(phoenix.get_by_text("invoke_agent coordinator").first).to_be_visible(timeout=30_000)
        expect(phoenix.get_by_text("execute_tool delegate").first).to_be_visible()
        expect(phoenix.get_by_text("chat coord-1").first).to_be_visible()
        phoenix.wait_for_timeout(1000)
        left = phoenix.screenshot()
    finally:
        phoenix.close()

    page = browse.new_page("olga")
    page.goto(f"/runs/{run_id}/")
    expect(page.locator("body")).to_contain_text("coordinator")
    page.wait_for_load_state("networkidle")
    right = page.screenshot()

    side = browse.browser.new_page(viewport={"width": 2560 + 24, "height": 800 + 48})
    try:
        images = "".join(
            f'<figure><figcaption>{caption}</figcaption><img src="data:image/png;base64,{base64.b64encode(png).decode()}"></figure>'
            for caption, png in (("Arize Phoenix (the OTLP receiver)", left), ("Clawboard's run page", right))
        )
        side.set_content(
            "<style>body{margin:0;display:flex;gap:8px;padding:8px;font:14px sans-serif;background:#ddd}"
            "figure{margin:0}figcaption{padding:4px 0}</style>" + images
        )
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        side.screenshot(path=str(SCREENSHOTS / "trace-phoenix-and-run-page.png"), full_page=True)
    finally:
        side.close()
    assert (ROOT / "docs" / "screenshots").is_dir()
