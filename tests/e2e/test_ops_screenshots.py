"""Screenshots of the pages of issue 17 items 3-7 for docs/operator-guide.md (light and dark),
taken with the other screenshots, last (the `screenshots` marker; see conftest)."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.support import SCREENSHOTS, Browse, Server, eventually


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def settle(server: Server, run_id: str, statuses: set[str]) -> None:
    eventually(lambda: server.api("GET", f"/api/v1/runs/{run_id}/")["status"] in statuses, what=run_id)


@pytest.mark.screenshots
def test_screenshots_of_the_operator_console_pages(browse: Browse, server: Server) -> None:
    for prompt in ("review the release notes", "review the migration plan", "review the release checklist"):
        settle(
            server,
            server.api("POST", "/api/v1/runs/", {"agent": "reviewer", "prompt": prompt})["id"],
            {"completed", "failed"},
        )
    gated = [
        server.api("POST", "/api/v1/runs/", {"agent": "sysadmin", "prompt": f"check the disks of host {n}"})[
            "id"
        ]
        for n in (3, 7)
    ]
    for run_id in gated:
        settle(server, run_id, {"awaiting_approval"})

    for scheme in ("light", "dark"):
        suffix = "" if scheme == "light" else "-dark"
        page = browse.new_page("olga", color_scheme=scheme)
        page.goto("/runs/?q=release")
        expect(page.locator("#run-table tbody tr").first).to_be_visible()
        shot(page, f"runs-search{suffix}")
        page.goto("/approvals/")
        for box in page.locator("input.bulk-pick").all()[:2]:
            box.check()
        page.fill("#bulk-reason", "maintenance window")
        shot(page, f"approvals-bulk{suffix}")
        page.goto("/")
        expect(page.locator("#chart-runs canvas")).to_have_count(1)
        shot(page, f"home-charts{suffix}")

    dark = browse.new_page("vera", color_scheme="dark")
    dark.goto("/delegation-map/?caller=coordinator&target=explorer")
    shot(dark, "delegation-map-dark")

    page = browse.new_page("olga")
    page.goto("/runs/?since=yesterday&status=bogus")
    shot(page, "runs-refused-filter")
    page.goto("/schedules/")
    page.fill("#schedule-name", "nightly review")
    page.fill("#schedule-agent", "reviewer")
    page.fill("#schedule-prompt", "review what changed today")
    page.fill("#schedule-cron", "30 2 * * 1-5")
    expect(page.locator("#cron-next li")).to_have_count(5)
    shot(page, "schedules")
    page.goto(f"/runs/{gated[0]}/cancel/")
    shot(page, "cancel-confirm")

    admin = browse.new_page("admin")
    revisions = server.api("GET", "/api/v1/config/revisions/")
    rows = revisions["results"] if isinstance(revisions, dict) else revisions
    previous = max(r["id"] for r in rows)
    server.api("POST", "/api/v1/providers/", {"type": "scripted", "alias": "scratch", "model": "scratch-1"})
    admin.goto(f"/config/revisions/{previous}/#restore-plan")
    expect(admin.locator("#restore-plan .entry-remove")).to_have_count(1)
    admin.check("#restore-confirm")
    admin.locator("#restore-plan").screenshot(path=str(SCREENSHOTS / "restore-plan.png"))
    admin.click("#restore")  # and the scratch provider is gone again
    expect(admin.locator("ul.flash li").first).to_contain_text(f"Restored revision {previous}")
    admin.goto("/api/docs/")
    expect(admin.locator(".swagger-ui .info .title")).to_be_visible()
    shot(admin, "api-docs-offline")

    for run_id in gated:  # leave nothing waiting on an operator
        server.api("POST", f"/api/v1/runs/{run_id}/cancel/")
