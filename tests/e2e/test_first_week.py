"""The operator's first week, in Debian's chromium: statuses that say what happened, errors that
are the product's, approvals where the work is, forms as good as the API, a trace view with
room to read, conversations as threads, and the smaller items. Each test also takes the
operator guide's pictures of its screen (light and dark; docs/screenshots with
UPDATE_SCREENSHOTS=1)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.e2e.support import (
    SCREENSHOTS,
    Browse,
    Server,
    assert_not_reloaded,
    eventually,
    mark_page,
    start_run,
    tree_statuses,
    wait_for_status,
)


def shot(page: Page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def settle(server: Server, run_id: str, statuses: set[str]) -> None:
    eventually(lambda: server.api("GET", f"/api/v1/runs/{run_id}/")["status"] in statuses, what=run_id)


def both_schemes(browse: Browse, user: str, path: str, name: str, ready: str) -> None:
    for scheme in ("light", "dark"):
        page = browse.new_page(user, color_scheme=scheme)
        page.goto(path)
        expect(page.locator(ready).first).to_be_visible()
        shot(page, name if scheme == "light" else f"{name}-dark")


# -- (a) statuses that say what happened ----------------------------------------------------------


def test_a_denied_run_completes_marked_denied_and_the_filter_finds_it(browse: Browse, server: Server) -> None:
    run_id = server.api(
        "POST", "/api/v1/runs/", {"agent": "sysadmin", "prompt": "check the disk, then deny"}
    )["id"]
    settle(server, run_id, {"awaiting_approval"})
    page = browse.new_page("olga")
    page.goto(f"/runs/{run_id}/")
    # (c) the approval is decided from the run's own Controls panel
    box = page.locator("#controls-approvals .controls-approval")
    expect(box).to_have_count(1)
    expect(box).to_contain_text("shell")
    box.locator("input[name=reason]").fill("not on a Friday")
    box.get_by_role("button", name="Deny").click()
    page.wait_for_url(re.compile(rf"/runs/{run_id}/$"))
    wait_for_status(page, run_id, "completed")
    expect(page.locator(f"#run-{run_id}-head .badge.outcome")).to_have_text("denied")

    page.goto("/runs/?outcome=denied")
    row = page.locator(f"#row-{run_id}")
    expect(row.locator(".badge.status-completed")).to_have_text("completed")
    expect(row.locator(".badge.outcome")).to_have_text("denied")
    expect(page.locator("#filter-outcome")).to_have_value("denied")
    page.goto("/runs/?outcome=refused")
    expect(page.locator(f"#row-{run_id}")).to_have_count(0)
    both_schemes(browse, "olga", "/runs/?outcome=denied", "runs-outcome-filter", "#run-table .badge.outcome")


def test_cancelling_a_run_that_waits_on_an_approval_closes_its_call(browse: Browse, server: Server) -> None:
    run_id = server.api(
        "POST", "/api/v1/runs/", {"agent": "sysadmin", "prompt": "check the disk, then cancel"}
    )["id"]
    settle(server, run_id, {"awaiting_approval"})
    page = browse.new_page("admin")  # the run's creator (the API token's user) may cancel it
    page.goto(f"/runs/{run_id}/")
    mark_page(page)
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-tree")
    wait_for_status(page, run_id, "cancelled")
    assert_not_reloaded(page)
    calls = server.api("GET", f"/api/v1/runs/{run_id}/transcript/")["tool_calls"]
    assert [(c["name"], c["status"]) for c in calls] == [("shell", "cancelled")]
    assert calls[0]["finished_at"] is not None
    # no bar outlives the run: after a reload the call's bar is closed and stops growing
    page.reload()
    lane = page.locator(f"#run-{run_id}-head .lane")
    expect(lane.locator(".span.closed")).to_have_count(1)
    expect(lane.locator(".running")).to_have_count(0)
    before = lane.locator(".span.closed").get_attribute("style")
    page.wait_for_timeout(1200)
    assert lane.locator(".span.closed").get_attribute("style") == before
    assert "cancelled after" in (lane.locator(".span.closed").get_attribute("title") or "")


# -- (b) errors are the product's ---------------------------------------------------------------


def test_an_unknown_or_malformed_run_id_is_clawboards_404(browse: Browse) -> None:
    page = browse.new_page("vera")
    for path in ("/runs/not-a-uuid/", "/runs/00000000-0000-0000-0000-000000000000/"):
        response = page.goto(path)
        assert response is not None and response.status == 404
        expect(page).to_have_title("Page not found · Clawboard")
        expect(page.locator("nav.nav a[href='/runs/']")).to_be_visible()
        expect(page.locator("body")).not_to_contain_text("URLconf")
    both_schemes(browse, "vera", "/runs/not-a-uuid/", "error-404", "#error-page")


# -- (c) approvals where the work is --------------------------------------------------------------


def test_the_root_controls_decide_approvals_deep_in_the_tree(browse: Browse, server: Server) -> None:
    root = server.api(
        "POST", "/api/v1/runs/", {"agent": "brancher", "prompt": "branch out for the controls"}
    )["id"]
    eventually(
        lambda: (
            sum(
                s == "awaiting_approval"
                for s in tree_statuses(server.api("GET", f"/api/v1/runs/{root}/tree/")).values()
            )
            == 2
        ),
        what="both leaves awaiting approval",
    )
    page = browse.new_page("olga")
    page.goto(f"/runs/{root}/")
    boxes = page.locator("#controls-approvals .controls-approval")
    expect(boxes).to_have_count(2)
    expect(boxes.first).to_contain_text("echo leaf")
    both_schemes(browse, "olga", f"/runs/{root}/", "run-controls-approvals", "#controls-approvals")
    boxes.first.get_by_role("button", name="Approve").click()
    page.wait_for_url(re.compile(rf"/runs/{root}/$"))
    expect(page.locator("#controls-approvals .controls-approval")).to_have_count(1)
    page.goto("/approvals/")
    decided = page.locator("#decided-table tbody tr").first
    expect(decided).to_contain_text("leaf: work")
    expect(decided.locator(".chain")).to_contain_text("brancher")
    shot(page, "approvals-decided")
    page = browse.new_page("admin")  # the tree's creator ends the rest of it
    page.goto(f"/runs/{root}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-tree")
    wait_for_status(page, root, "cancelled")


def test_the_steer_notice_goes_once_the_message_is_delivered(browse: Browse) -> None:
    page = browse.new_page("olga")
    root = start_run(page, "fanout", "split the steer test")
    mark_page(page)
    page.fill("#steer-message", "keep the pieces short")
    page.click("#steer-submit")
    expect(page.locator("#steer-notice")).to_have_text("Message queued for the next model turn.")
    wait_for_status(page, root, "completed", timeout_ms=40_000)
    expect(page.locator("#steer-notice")).to_have_count(0)
    assert_not_reloaded(page)


# -- (d) forms as good as the API -----------------------------------------------------------------

BROKEN_IMPORT = """\
[agents.first-week-import]
model_provider = "nodots"
risk_profile = "team"
"""
GOOD_IMPORT = """\
[agents.first-week-import]
model_provider = "scripted.review"
risk_profile = "team"
runtime_profile = "oneshot"
"""


def test_import_needs_a_clean_preview_and_a_confirmation(browse: Browse, server: Server) -> None:
    page = browse.new_page("admin")
    page.goto("/config/")
    expect(page.locator("#import-apply")).to_be_disabled()
    page.fill("#import-toml", BROKEN_IMPORT)
    page.click("#import-preview")
    where = page.locator("#import-errors .where").first
    expect(where).to_have_text("agents.first-week-import.model_provider line 2")
    expect(page.locator("#import-apply")).to_be_disabled()
    for scheme in ("light", "dark"):
        if scheme == "dark":
            page = browse.new_page("admin", color_scheme="dark")
            page.goto("/config/")
            page.fill("#import-toml", BROKEN_IMPORT)
            page.click("#import-preview")
            expect(page.locator("#import-errors")).to_be_visible()
        shot(page, "config-import-errors" if scheme == "light" else "config-import-errors-dark")
    page.fill("#import-toml", GOOD_IMPORT)
    expect(page.locator("#import-apply")).to_be_disabled()  # typing disables it until the next preview
    page.click("#import-preview")
    expect(page.locator("#import-changes")).to_be_visible()
    expect(page.locator("#import-apply")).to_be_enabled()
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("#import-apply")
    expect(page).to_have_url(re.compile(r"/config/$"))
    expect(page.locator(".flash")).to_have_count(0)  # dismissed: nothing imported
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#import-apply")
    expect(page.locator(".flash")).to_contain_text("Configuration imported")
    server.api("DELETE", "/api/v1/agents/first-week-import/")  # leave the shared server as it was


def test_the_agent_form_shows_every_error_in_plain_words(browse: Browse) -> None:
    page = browse.new_page("admin")
    page.goto("/agents/new/")
    page.fill("input[name=alias]", "Bad Alias!")
    page.select_option("select[name=model_provider]", "scripted.review")
    page.select_option("select[name=risk_profile]", "team")
    page.fill("input[name=workspace]", "w" * 501)
    page.click("#entry-form button[type=submit]")
    errors = page.locator("ul.errorlist li")
    expect(errors).to_have_count(2)
    expect(errors.first).to_have_text(
        '"Bad Alias!" cannot be an alias: use 1 to 64 lowercase letters, digits, "-" or "_", '
        "starting with a letter or a digit."
    )
    expect(page.locator("body")).not_to_contain_text("[a-z0-9]")
    shot(page, "agent-form-errors")


# -- (e) a trace view with room to read -------------------------------------------------------------


def test_the_trace_view_has_room_to_read(browse: Browse, server: Server) -> None:
    root = server.api("POST", "/api/v1/runs/", {"agent": "reviewer", "prompt": "review the trace view"})["id"]
    settle(server, root, {"completed", "failed"})
    page = browse.new_page("vera")
    page.goto(f"/runs/{root}/")
    # the root has the keyboard at load: Enter opens nothing, but j/k and the arrows move
    assert page.evaluate("document.activeElement && document.activeElement.id") == f"run-{root}-head"
    expect(page.locator(f"#run-{root}-head .bar")).to_have_attribute(
        "title", re.compile(r"reviewer · completed · ")
    )
    # the split: the waterfall grows with ← on the handle, and the choice is kept
    card = page.locator(".trace-card")
    page.focus("#trace-split")
    page.keyboard.press("ArrowLeft")
    assert card.evaluate("el => el.style.getPropertyValue('--lane-w')") == "55%"
    handle = page.locator("#trace-split").bounding_box()
    assert handle is not None
    page.mouse.move(handle["x"] + 4, handle["y"] + 8)
    page.mouse.down()
    page.mouse.move(handle["x"] - 150, handle["y"] + 8, steps=5)
    page.mouse.up()
    assert int(card.evaluate("el => parseInt(el.style.getPropertyValue('--lane-w'))")) > 55
    page.reload()
    assert int(card.evaluate("el => parseInt(el.style.getPropertyValue('--lane-w'))")) > 55
    # the model call's exchange, folded until asked for
    page.click(f"#run-{root}-head .agent")
    exchange = page.locator("details.model-exchange").first
    expect(exchange).to_be_visible()
    assert exchange.get_attribute("open") is None
    exchange.locator("summary").click()
    expect(exchange).to_contain_text("review the trace view")
    expect(exchange.locator(".exchange-answer")).to_be_visible()
    for scheme in ("light", "dark"):
        shown = page if scheme == "light" else browse.new_page("vera", color_scheme="dark")
        if scheme == "dark":
            shown.goto(f"/runs/{root}/")
            shown.click(f"#run-{root}-head .agent")
            shown.locator("details.model-exchange summary").first.click()
        shot(shown, "trace-model-exchange" if scheme == "light" else "trace-model-exchange-dark")


# -- (f) conversations as threads ------------------------------------------------------------------


def test_a_continued_run_links_both_ways_and_the_thread_lists_them(browse: Browse, server: Server) -> None:
    first = server.api("POST", "/api/v1/runs/", {"agent": "reviewer", "prompt": "review chapter one"})["id"]
    settle(server, first, {"completed", "failed"})
    page = browse.new_page("olga")
    page.goto(f"/runs/{first}/")
    page.fill("#continue-prompt", "now chapter two")
    page.click("#continue")
    page.wait_for_url(re.compile(r"/runs/[0-9a-f-]{36}/$"))
    second = page.url.rstrip("/").rsplit("/", 1)[1]
    assert second != first
    expect(page.locator("#continues a")).to_have_attribute("href", f"/runs/{first}/")
    page.goto(f"/runs/{first}/")
    expect(page.locator("#continued-in a")).to_have_attribute("href", f"/runs/{second}/")
    page.click("#conversation-link")
    items = page.locator("#conversation > li")
    expect(items).to_have_count(2)
    expect(items.nth(0)).to_contain_text("review chapter one")
    expect(items.nth(1)).to_contain_text("now chapter two")
    both_schemes(browse, "olga", f"/runs/{second}/conversation/", "conversation", "#conversation")


# -- (g) the smaller items ---------------------------------------------------------------------------


def test_the_smaller_items(browse: Browse) -> None:
    page = browse.new_page("olga")
    page.goto("/runs/?kind=weird")
    expect(page.locator("#filter-kind option", has_text="weird")).to_have_count(0)
    expect(page.locator("#filter-status option")).to_have_count(10)  # any + the nine statuses
    assert page.locator("#start-prompt").evaluate("el => el.tagName") == "TEXTAREA"
    page.goto("/delegation-map/?caller=ghost&target=reviewer")
    expect(page.locator("#sim-caller")).to_have_value("ghost")
    expect(page.locator("#sim-errors")).to_contain_text("ghost")
    page.goto("/")
    expect(page.locator("#sandbox-status")).to_be_visible()
    strip = page.locator("#sandbox-status").bounding_box()
    assert strip is not None and strip["height"] < 80  # a line above the cards, not a card
    expect(page.locator("#budget-gauges")).not_to_contain_text("local-llm")  # disabled: no gauge
    shot(page, "home-first-week")
    page.click("#nav-api-docs")
    expect(page).to_have_url(re.compile(r"/api/docs/$"))
