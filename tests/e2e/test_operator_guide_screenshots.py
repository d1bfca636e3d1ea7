"""Screenshots of every page for docs/operator-guide.md, taken last (see conftest), when the
scenarios have left runs, approvals and revisions behind."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from tests.e2e.support import SCREENSHOTS, Browse, Server, start_run, wait_for_status


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def traced_tree(page: Page, prompt: str, suffix: str) -> None:
    traced = start_run(page, "tracer", prompt)
    page.wait_for_function(
        "document.querySelectorAll('#run-tree li.node').length >= 31"
        " && document.querySelectorAll('#run-tree .status-completed').length >= 2",
        timeout=30_000,
    )
    expect(page.locator("#now-line")).to_be_visible()
    page.screenshot(path=str(SCREENSHOTS / f"run-page-running{suffix}.png"), full_page=True)
    wait_for_status(page, traced, "completed", timeout_ms=60_000)
    branch = page.locator(f"#run-{traced}-children > li.node").nth(1).get_attribute("id")
    page.click(f"#{branch}-head")
    expect(page.locator(f"#detail-{str(branch)[4:]}")).to_be_visible()
    shot(page, f"run-page-finished{suffix}")


@pytest.mark.screenshots
def test_screenshots_of_every_page(browse: Browse, server: Server) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    anonymous = browse.new_page(user=None)
    anonymous.goto("/accounts/login/")
    shot(anonymous, "login")

    operator = browse.new_page("olga")
    # a tree of 31 runs while it runs (the now line, children side by side), then once it
    # finished with a branch selected: the detail panel beside the waterfall; light and dark
    traced_tree(operator, "trace the release", "")
    traced_tree(browse.new_page("olga", color_scheme="dark"), "trace the release at night", "-dark")
    # the coordinator's tree, with the root's detail open
    root = start_run(operator, "coordinator", "prepare the release")
    wait_for_status(operator, root, "completed")
    operator.click(f"#run-{root}-head")
    expect(operator.locator(f"#detail-{root}")).to_be_visible()
    shot(operator, "run-page")

    # a background delegation for the tasks page
    dispatched = start_run(operator, "dispatcher", "review the notes")
    wait_for_status(operator, dispatched, "completed")
    operator.goto("/tasks/")
    row = operator.locator("#tasks-table tr", has_text="reviewer")
    expect(row).to_contain_text("completed", timeout=15_000)  # live over the tab's socket
    shot(operator, "tasks")

    # a call waiting for an operator
    gated = start_run(operator, "sysadmin", "check the disk")
    wait_for_status(operator, gated, "awaiting_approval")
    operator.goto("/approvals/")
    expect(operator.locator("#pending-table")).to_contain_text("echo disk usage ok")
    shot(operator, "approvals")
    operator.goto("/")
    expect(operator.locator("#pending-approvals")).to_contain_text("shell")
    shot(operator, "home")
    operator.goto("/runs/")
    shot(operator, "runs")

    admin = browse.new_page("admin")
    for name, url in (
        ("agents", "/agents/"),
        ("agent-edit", "/agents/coordinator/"),
        ("agent-delete-plan", "/agents/reviewer/delete/"),
        ("risk-profiles", "/risk-profiles/"),
        ("risk-profile-edit", "/risk-profiles/ops/"),
        ("risk-profile-preset", "/risk-profiles/new/?preset=read_only_role"),
        ("runtime-profiles", "/runtime-profiles/"),
        ("runtime-profile-edit", "/runtime-profiles/agentic/"),
        ("providers", "/providers/"),
        ("provider-edit", "/providers/openai.local/"),
    ):
        admin.goto(url)
        shot(admin, name)

    admin.goto("/risk-profiles/ops/")
    admin.check('input[name="ask__file_write"]')
    expect(admin.locator("#preview-effective")).to_be_visible()
    shot(admin, "risk-profile-preview")

    admin.goto("/delegation-map/")
    admin.select_option("#sim-caller", "coordinator")
    admin.fill("#sim-target", "explorer")
    admin.click("#sim-run")
    expect(admin.locator("#sim-verdict")).to_be_visible()
    shot(admin, "delegation-map")

    admin.goto("/config/")
    exported = admin.locator("#export-toml").input_value()
    admin.fill("#import-toml", exported.replace('model = "review-1"', 'model = "review-2"'))
    admin.click("#import-preview")
    expect(admin.locator("#import-changes")).to_be_visible()
    shot(admin, "config")
    admin.locator("#revisions a").first.click()
    shot(admin, "revision")

    viewer = browse.new_page("vera")
    viewer.goto(f"/runs/{root}/")
    expect(viewer.locator("#run-controls")).to_contain_text("Read-only")
    shot(viewer, "run-page-viewer")
