"""The run page as a trace, in a real browser (issue 17 items 1, 2 and 8): the waterfall of a
running tree grows live with a "now" line, the tree folds and searches from the keyboard, the
detail panel opens beside it, and the Controls follow the run's status."""

from __future__ import annotations

import re

from playwright.sync_api import Dialog, Page, expect

from tests.e2e.support import (
    Browse,
    Server,
    assert_not_reloaded,
    eventually,
    mark_page,
    start_run,
    wait_for_status,
)

DURATION = re.compile(r"^(\d+ ms|\d+\.\d\d s)$")


def script_errors(page: Page) -> list[str]:
    """Uncaught errors of the page's scripts, collected from now on."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    return errors


def test_the_waterfall_of_a_running_tree_grows_live_with_a_now_line(browse: Browse) -> None:
    page = browse.new_page("olga")
    errors = script_errors(page)
    root = start_run(page, "tracer", "trace the release")
    expect(page.locator("#live-text")).to_have_text("live")  # this document's socket is open
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.reload()  # counted from the page's start
    mark_page(page)
    # running: the root's bar grows, the now line is drawn, children arrive over the socket
    expect(page.locator(f"#run-{root}-head .bar.running")).to_have_count(1)
    expect(page.locator("#now-line")).to_be_visible()
    end_of = "el => parseInt(el.style.getPropertyValue('--e'), 10)"
    first = page.locator(f"#run-{root}-head .bar").evaluate(end_of)
    page.wait_for_function("document.querySelectorAll('#run-tree li.node').length >= 7", timeout=20_000)
    assert page.locator(f"#run-{root}-status").inner_text() != "completed"
    grown = page.locator(f"#run-{root}-head .bar").evaluate(end_of)
    assert grown > first  # the running bar's end follows the clock
    wait_for_status(page, root, "completed", timeout_ms=60_000)
    page.wait_for_function("document.querySelectorAll('#run-tree li.node').length === 31", timeout=20_000)
    assert_not_reloaded(page)
    expect(page.locator("#now-line")).to_be_hidden()
    # one bar per run, one per model call and per tool call, parallel siblings marked
    assert page.locator("#run-tree .lane .bar").count() == 31
    page.wait_for_function("document.querySelectorAll('#run-tree .span-model').length >= 62", timeout=20_000)
    assert page.locator("#run-tree .span-tool").count() >= 25
    assert page.locator("#run-tree .parallel-mark").count() >= 6 + 24
    for text in page.locator("#run-tree .duration").all_inner_texts():
        assert DURATION.match(text), text
    # siblings that ran side by side overlap on the time axis
    boxes = page.eval_on_selector_all(
        f"#run-{root}-children > li.node > .node-head .bar", "els => els.map(e => e.getBoundingClientRect())"
    )
    assert len(boxes) == 6
    assert any(
        a["x"] < b["x"] + b["width"] and b["x"] < a["x"] + a["width"]
        for a in boxes
        for b in boxes
        if a is not b
    )
    assert errors == []
    # the tree's events and the tab's notices come over one socket
    assert [re.sub(r"^ws://[^/]+", "", u) for u in sockets] == [
        f"/ws/runs/{root}/?after={sockets[0].split('after=')[1]}"
    ]
    assert sockets[0].endswith("&notices=1")


def focused_head(page: Page) -> str:
    return str(page.evaluate("document.activeElement.id"))


def test_the_tree_moves_folds_and_searches_from_the_keyboard(browse: Browse, server: Server) -> None:
    page = browse.new_page("vera")
    errors = script_errors(page)
    root = str(
        server.api("POST", "/api/v1/runs/", {"agent": "tracer", "prompt": "trace the keys", "wait": 60})["id"]
    )
    eventually(lambda: server.api("GET", f"/api/v1/runs/{root}/")["status"] == "completed", timeout=60)
    page.goto(f"/runs/{root}/")
    page.locator(f"#run-{root}-head").click()
    expect(page.locator(f"#detail-{root}")).to_be_visible()
    assert focused_head(page) == f"run-{root}-head"
    branch = str(page.locator(f"#run-{root}-children > li.node").first.get_attribute("id"))
    page.keyboard.press("j")
    assert focused_head(page) == f"{branch}-head"
    expect(page.locator(f"#detail-{branch[4:]}")).to_be_visible()  # moving selects: the panel follows
    page.keyboard.press("ArrowDown")
    leaf = str(page.locator(f"#{branch}-children > li.node").first.get_attribute("id"))
    assert focused_head(page) == f"{leaf}-head"
    page.keyboard.press("k")
    assert focused_head(page) == f"{branch}-head"
    page.keyboard.press("Enter")  # fold the branch: its leaves are hidden
    expect(page.locator(f"#{leaf}-head")).to_be_hidden()
    page.keyboard.press("j")
    assert focused_head(page) != f"{leaf}-head"
    page.keyboard.press("k")
    page.keyboard.press(" ")  # and unfold it
    expect(page.locator(f"#{leaf}-head")).to_be_visible()
    page.keyboard.press("ArrowLeft")  # fold with the arrow
    expect(page.locator(f"#{leaf}-head")).to_be_hidden()
    page.keyboard.press("ArrowRight")
    expect(page.locator(f"#{leaf}-head")).to_be_visible()
    # `/` searches the tree: only matches and their ancestors stay
    page.keyboard.press("/")
    expect(page.locator("#tree-search")).to_be_focused()
    page.keyboard.type("branch 4")
    expect(page.locator("#tree-search-count")).to_have_text("1 match")
    expect(page.locator("#run-tree li.node:visible")).to_have_count(2)  # the root and branch 4
    page.keyboard.press("Enter")
    selected = page.locator("#run-tree .node-head.selected")
    expect(selected).to_contain_text("branch 4")
    expect(page.locator("#trace-detail")).to_contain_text("branch: 4")
    page.locator("#tree-search").fill("")
    page.locator("#tree-search").dispatch_event("input")
    expect(page.locator("#run-tree li.node:visible")).to_have_count(31)
    assert errors == []


def test_the_detail_panel_shows_calls_json_and_permissions_and_links_child_runs(
    browse: Browse, server: Server
) -> None:
    page = browse.new_page("olga")
    root = start_run(page, "tracer", "trace the detail")
    wait_for_status(page, root, "completed", timeout_ms=60_000)
    page.locator(f"#run-{root}-head").click()
    panel = page.locator("#trace-detail")
    expect(panel.locator(f"#detail-{root}")).to_be_visible()
    expect(panel.locator("#detail-prompt")).to_have_text("trace the detail")
    expect(panel.locator("#detail-output")).to_contain_text("traced:")
    rows = panel.locator("#detail-model-calls tr.model-call")
    expect(rows).to_have_count(2)
    expect(rows.nth(0)).to_contain_text("trace-1")
    expect(rows.nth(0).locator("td.latency")).to_have_text(DURATION)
    expect(rows.nth(0)).to_contain_text("800")
    expect(rows.nth(1)).to_contain_text("5,000")
    expect(panel.locator(".tool-call")).to_have_count(6)
    arguments = panel.locator(".tool-call").first.locator("pre.json-text").first
    expect(arguments).to_have_text('{\n  "prompt": "branch: 1",\n  "label": "branch 1"\n}')
    expect(panel.locator("#perm-reached")).to_contain_text("top_level")
    expect(panel.locator("#perm-tools")).to_contain_text("spawn_subagent")
    expect(panel.locator("#perm-budgets")).to_contain_text("actions this hour")
    expect(panel.locator("#perm-sandbox")).not_to_be_empty()
    # events are JSON, whole
    panel.locator("#detail-events > summary").click()
    first_event = panel.locator("#detail-events details.event").first
    first_event.locator("summary").click()
    expect(first_event.locator("pre")).to_contain_text('"type": "run.queued"')
    # a child run id in a tool result links to its node on this page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    mark_page(page)
    link = panel.locator(".tool-call").first.locator("a[data-run-link]").first
    child = link.get_attribute("data-run-link")
    link.click()
    expect(page.locator(f"#run-{child}-head")).to_have_class(re.compile(r"\bselected\b"))
    expect(panel.locator(f"#detail-{child}")).to_be_visible()
    assert_not_reloaded(page)
    copy = panel.locator(".tool-call").first.locator("[data-copy]").first
    copy.click()
    expect(copy).to_have_text("copied")
    assert '"prompt": "leaf:' in page.evaluate("navigator.clipboard.readText()")


def test_the_controls_follow_the_run_cancel_and_steer_then_continue(browse: Browse) -> None:
    page = browse.new_page("olga")
    root = start_run(page, "tracer", "trace and steer")
    mark_page(page)
    expect(page.locator("#cancel-tree")).to_be_visible()
    page.fill("#steer-message", "keep it short")
    page.click("#steer-submit")
    expect(page.locator("#steer-notice")).to_have_text("Message queued for the next model turn.")
    expect(page.locator("#steer-message")).to_have_value("")
    page.fill("#steer-message", "one more thing")
    asked: list[str] = []

    def confirm(dialog: Dialog) -> None:
        asked.append(dialog.message)
        dialog.accept()

    page.once("dialog", confirm)
    page.click("#cancel-tree")
    wait_for_status(page, root, "cancelled")
    # without a reload, the panel now offers Continue, and the unsent text became its prompt
    expect(page.locator("#continue")).to_be_visible()
    expect(page.locator("#cancel-tree")).to_have_count(0)
    expect(page.locator("#steer-submit")).to_have_count(0)
    expect(page.locator("#continue-prompt")).to_have_value("one more thing")
    expect(page.locator("#controls-status")).to_have_text("cancelled")
    assert asked == ["Cancel this run and every run below it that is still active?"]  # confirmed first
    assert_not_reloaded(page)


def test_a_steer_refused_because_the_run_ended_keeps_the_typed_text(browse: Browse) -> None:
    page = browse.new_page("olga")
    # the panel's own refresh is held back, as when the run ends between a look and a click
    page.route("**/controls/", lambda route: route.abort())
    root = start_run(page, "tracer", "trace and be late")
    wait_for_status(page, root, "completed", timeout_ms=60_000)
    page.fill("#steer-message", "too late?")
    page.click("#steer-submit")
    expect(page.locator("#steer-error")).to_have_text("Run is already completed")
    expect(page.locator("#steer-message")).to_have_value("too late?")
    expect(page.locator("#continue")).to_be_visible()
