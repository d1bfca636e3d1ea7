"""Issue 17, items 3-7 in the browser: search and refused filters on the runs list, bulk
approval, restore with its diff and confirmation, schedules, charts, the dark theme, and the
API docs offline."""

from __future__ import annotations

import re
import time
import uuid

from playwright.sync_api import Page, Request, Route, expect

from tests.e2e.support import Browse, Server, eventually


def api_run(server: Server, agent: str, prompt: str) -> str:
    run: dict[str, str] = server.api("POST", "/api/v1/runs/", {"agent": agent, "prompt": prompt})
    return run["id"]


def wait_run(server: Server, run_id: str, statuses: set[str]) -> dict[str, str]:
    return eventually(
        lambda: (r := server.api("GET", f"/api/v1/runs/{run_id}/")) and r["status"] in statuses and r,
        what=f"run {run_id} in {statuses}",
    )


def test_search_finds_a_run_by_a_word_of_its_prompt(browse: Browse, server: Server) -> None:
    word = "zebra" + uuid.uuid4().hex[:8]
    run_id = api_run(server, "reviewer", f"look at the {word} notes")
    wait_run(server, run_id, {"completed", "failed"})
    page = browse.new_page("vera")
    page.goto("/runs/")
    page.fill("#run-search", word[:-2])  # a prefix is enough
    page.press("#run-search", "Enter")
    expect(page.locator(f"#row-{run_id}")).to_be_visible()
    assert page.locator("#run-table tbody tr").count() == 1
    assert re.search(r"· 1 run\b", page.locator("section.card p").last.inner_text())


def test_a_bad_filter_is_refused_on_the_page(browse: Browse, server: Server) -> None:
    page = browse.new_page("vera")
    response = page.goto("/runs/?since=yesterday&status=bogus")
    assert response is not None and response.status == 400
    errors = page.locator("#filter-errors li")
    expect(errors).to_have_count(2)
    expect(errors.nth(0)).to_have_text(re.compile(r"^Unknown status 'bogus'\. Use one of: queued, "))
    expect(errors.nth(1)).to_have_text(re.compile(r"^Invalid since 'yesterday': use a date"))
    expect(page.locator("#run-table-empty")).to_have_text("Fix the filter above to see runs.")
    # the form keeps what was typed, to correct it
    expect(page.locator("#run-filters input[name=since]")).to_have_value("yesterday")


def test_an_operator_approves_two_calls_at_once(browse: Browse, server: Server) -> None:
    runs = [api_run(server, "sysadmin", f"check disk {i} {uuid.uuid4().hex[:6]}") for i in range(2)]
    for run_id in runs:
        wait_run(server, run_id, {"awaiting_approval"})
    pending = [a for a in server.api("GET", "/api/v1/approvals/?status=pending") if a["run_id"] in runs]
    assert len(pending) == 2
    page = browse.new_page("olga")
    page.goto("/approvals/")
    for a in pending:
        row = page.locator(f"#approval-{a['id']}")
        expect(row).to_contain_text(a["prompt"])  # what tells the two apart
        expect(row).to_contain_text(a["run_id"])
        page.check(f"#pick-{a['id']}")
    expect(page.locator("#bulk-count")).to_have_text("2 selected:")
    time.sleep(3.5)  # a poll of the inbox comes and goes: the ticks stay
    for a in pending:
        expect(page.locator(f"#pick-{a['id']}")).to_be_checked()
    page.fill("#bulk-reason", "maintenance window")
    page.click("#bulk-approve")
    # named as the inbox shows them (tool, agent, run, prompt), never by database id
    named = ", ".join(f"shell of sysadmin in run {a['run_id'][:8]} (“{a['prompt']}”)" for a in pending)
    expect(page.locator("ul.flash li").first).to_have_text(f"Approved 2 approvals: {named}.")
    for a in pending:
        decided = next(x for x in server.api("GET", "/api/v1/approvals/") if x["id"] == a["id"])
        assert (decided["status"], decided["reason"]) == ("approved", "maintenance window")
    for run_id in runs:
        wait_run(server, run_id, {"completed", "failed"})


def test_restore_shows_the_diff_and_asks_for_a_confirmation(browse: Browse, server: Server) -> None:
    alias = "tmp" + uuid.uuid4().hex[:6]
    before = server.api("GET", "/api/v1/config/revisions/")
    newest_before = max(r["id"] for r in (before["results"] if isinstance(before, dict) else before))
    server.api(
        "POST",
        "/api/v1/providers/",
        {"type": "scripted", "alias": alias, "script": [{"turns": [{"say": "hi"}]}]},
    )
    page = browse.new_page("admin")
    page.goto("/config/")
    page.click(f'a[href="/config/revisions/{newest_before}/#restore-plan"]')
    plan = page.locator("#restore-plan")
    expect(plan.locator(".entry-remove")).to_have_text([f"providers.models.scripted.{alias}"])
    expect(plan.locator(".diff-del", has_text=f"[providers.models.scripted.{alias}]")).to_be_visible()
    # the button does nothing until the confirmation is ticked (and the server asks for it too)
    page.click("#restore")
    expect(page).to_have_url(re.compile(rf"/config/revisions/{newest_before}/"))
    assert f"scripted.{alias}" in {
        f"{p['type']}.{p['alias']}" for p in server.api("GET", "/api/v1/providers/")
    }
    page.check("#restore-confirm")
    page.click("#restore")
    expect(page.locator("ul.flash li").first).to_contain_text(
        f"Restored revision {newest_before} as revision"
    )
    assert f"scripted.{alias}" not in {
        f"{p['type']}.{p['alias']}" for p in server.api("GET", "/api/v1/providers/")
    }
    # the newest revision offers no restore
    page.goto("/config/")
    page.locator("#revisions a").first.click()
    expect(page.locator("#restore-none")).to_be_visible()
    expect(page.locator("#restore")).to_have_count(0)


def test_a_schedule_is_created_with_a_preview_of_its_next_times(browse: Browse, server: Server) -> None:
    page = browse.new_page("olga")
    page.goto("/schedules/")
    name = "nightly-" + uuid.uuid4().hex[:6]
    page.fill("#schedule-name", name)
    page.fill("#schedule-agent", "reviewer")
    page.fill("#schedule-prompt", "review the day")
    page.fill("#schedule-cron", "0 0 31 2 *")
    expect(page.locator("#cron-preview-error")).to_contain_text("never fires")
    page.fill("#schedule-cron", "15 3 * * *")
    expect(page.locator("#cron-next li")).to_have_count(5)
    expect(page.locator("#cron-next li").first).to_contain_text("03:15 UTC")
    page.click("#schedule-submit")
    row = page.locator("#schedule-table tr", has_text=name)
    expect(row).to_contain_text("03:15 UTC")
    row.locator("button", has_text="Disable").click()
    expect(page.locator("#schedule-table tr", has_text=name)).to_contain_text("disabled")
    page.locator("#schedule-table tr", has_text=name).locator("a", has_text="Delete").click()
    page.check("#confirm-check")
    page.click("#confirm-submit")
    expect(page.locator("#schedule-table")).not_to_contain_text(name)


def chart_legend(page: Page, metric: str) -> list[str]:
    labels: list[str] = page.locator(
        f"#chart-{metric} .u-legend .u-series:not(:first-child) .u-label"
    ).all_inner_texts()
    return labels


def test_the_home_charts_are_drawn_per_agent_and_per_model(browse: Browse, server: Server) -> None:
    wait_run(server, api_run(server, "reviewer", "chart me"), {"completed", "failed"})
    page = browse.new_page("vera")
    page.goto("/")
    for metric in ("runs", "tokens", "cost"):
        expect(page.locator(f"#chart-{metric} canvas")).to_have_count(1)
    assert "reviewer" in chart_legend(page, "runs")
    font = page.locator("#chart-runs .u-legend").evaluate("el => parseFloat(getComputedStyle(el).fontSize)")
    assert font >= 12
    page.click("#chart-group-model")
    expect(page.locator("#chart-group-model")).to_have_attribute("aria-pressed", "true")
    assert "review-1" in chart_legend(page, "runs")
    page.click("#chart-window-7d")
    expect(page.locator("#chart-runs canvas")).to_have_count(1)


def background(page: Page) -> str:
    color: str = page.evaluate("getComputedStyle(document.body).backgroundColor")
    return color


def test_the_dark_theme_follows_the_systems_preference(browse: Browse, server: Server) -> None:
    light = browse.new_page("vera", color_scheme="light")
    dark = browse.new_page("vera", color_scheme="dark")
    for page in (light, dark):
        page.goto("/runs/")
    assert background(light) == "rgb(246, 247, 249)"
    assert background(dark) == "rgb(18, 21, 28)"
    text = dark.evaluate("getComputedStyle(document.body).color")
    assert text == "rgb(228, 231, 238)"
    card = dark.locator("section.card").first.evaluate("el => getComputedStyle(el).backgroundColor")
    assert card == "rgb(26, 30, 39)"


def test_the_api_docs_load_nothing_from_the_internet(browse: Browse, server: Server) -> None:
    page = browse.new_page(None)
    outside: list[str] = []

    def only_local(route: Route, request: Request) -> None:
        if request.url.startswith(server.url):
            route.continue_()
        else:
            outside.append(request.url)
            route.abort()

    page.route("**/*", only_local)
    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Clawboard API")
    expect(page.locator(".opblock-tag", has_text="runs").first).to_be_visible()
    page.goto("/api/redoc/")
    expect(page.locator("h1", has_text="Clawboard API")).to_be_visible(timeout=15_000)
    page.unroute("**/*")  # Playwright cannot route a request for /favicon.ico
    assert page.evaluate("fetch('/favicon.ico').then((r) => [r.status, r.headers.get('content-type')])") == [
        200,
        "image/svg+xml",
    ]
    assert outside == []  # the page's policy keeps the browser from even asking
