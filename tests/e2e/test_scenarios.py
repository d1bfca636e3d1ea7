"""The operator's main paths, in a real browser against the real server (issue items 9 and 10)."""

from __future__ import annotations

import re

from playwright.sync_api import expect

from tests.e2e.support import (
    Browse,
    Server,
    assert_not_reloaded,
    eventually,
    mark_page,
    nodes,
    page_statuses,
    start_run,
    status_of,
    tree_statuses,
    wait_for_status,
)


def test_an_operator_logs_in(browse: Browse, server: Server) -> None:
    page = browse.new_page(user=None)
    page.goto("/runs/")
    expect(page).to_have_url(re.compile(r"/accounts/login/\?next=/runs/$"))
    page.fill("#id_username", "olga")
    page.fill("#id_password", "not the password")
    page.click("#login-submit")
    expect(page.locator("#login-error")).to_have_text(
        "Your username and password didn't match. Please try again."
    )
    page.fill("#id_username", "olga")
    page.fill("#id_password", server.users["olga"])
    page.click("#login-submit")
    expect(page).to_have_url(server.url + "/runs/")
    expect(page.locator(".who")).to_contain_text("olga · operator")
    expect(page.locator("#start-run")).to_be_visible()


def test_an_admin_edits_a_risk_profile_and_sees_the_error_inline(browse: Browse, server: Server) -> None:
    page = browse.new_page("admin")
    page.goto("/risk-profiles/team/")
    page.fill("#id_shell_env_passthrough", "HOME\n9lives")
    page.click("#save")
    expect(page.locator("#error-shell_env_passthrough li")).to_have_text(
        ["risk_profiles.team.shell_env_passthrough[1] is invalid (9lives); expected [A-Za-z_][A-Za-z0-9_]*"]
    )
    # nothing was saved
    assert server.api("GET", "/api/v1/risk-profiles/team/")["shell_env_passthrough"] == []
    # the live preview follows the tool grid without saving
    page.goto("/risk-profiles/team/")
    page.check('input[name="ask__file_write"]')
    expect(page.locator("#preview-effective")).to_contain_text("always ask")


def test_allowing_delegation_adds_an_edge_to_the_map(browse: Browse, server: Server) -> None:
    page = browse.new_page("admin")
    page.goto("/delegation-map/")
    edge = page.locator('#delegation-map line[data-source="cartographer"][data-target="reviewer"]')
    expect(edge).to_have_count(0)
    expect(page.locator("#map-cartographer")).to_have_attribute("data-forbidden", "true")
    page.goto("/risk-profiles/mapper/")
    page.select_option("#id_delegation_mode", "allow")
    page.click("#save")
    expect(page.locator(".flash")).to_contain_text("Risk profile mapper saved.")
    page.click('nav a[href="/delegation-map/"]')
    expect(edge).to_have_count(1)
    expect(edge).to_have_attribute("data-mode", "bounded")
    expect(page.locator("#map-cartographer")).to_have_attribute("data-forbidden", "false")


def test_the_policy_simulator_shows_every_gate_and_the_exact_refusal(browse: Browse) -> None:
    page = browse.new_page("vera")  # a viewer may simulate: it changes nothing
    page.goto("/delegation-map/")
    page.select_option("#sim-caller", "sysadmin")
    page.fill("#sim-target", "reviewer")
    page.click("#sim-run")
    expect(page.locator("#sim-refusal")).to_have_text(
        'delegation is forbidden for caller "sysadmin" by risk profile "ops" delegation_policy; '
        'set [risk_profiles.ops].delegation_policy mode = "allow"'
    )
    expect(page.locator("#sim-verdict")).to_contain_text("refused")
    page.select_option("#sim-caller", "coordinator")
    page.fill("#sim-target", "sysadmin")
    page.select_option("#sim-mode", "")
    page.click("#sim-run")
    expect(page.locator("#sim-refusal")).to_have_text(
        'delegate target "sysadmin" cannot run in independent mode from "coordinator": risk profile "ops" '
        'has always_ask entries (shell). See the documentation, "Delegation & SubAgents" > "What\'s not supported".'
    )
    page.fill("#sim-target", "reviewer")
    page.click("#sim-run")
    expect(page.locator("#sim-verdict")).to_contain_text("allowed as bounded")
    expect(page.locator("#sim-gates")).not_to_contain_text("fail")
    assert page.locator("#sim-gates tr").count() >= 6  # a header and every gate, each passed


def test_a_scripted_run_grows_live_without_reload(browse: Browse, server: Server) -> None:
    page = browse.new_page("olga")
    root = start_run(page, "fanout", "split the release")
    mark_page(page)
    first = nodes(page)
    page.wait_for_function("document.querySelectorAll('#run-tree li.node').length >= 7", timeout=20_000)
    wait_for_status(page, root, "completed")
    assert nodes(page) == 9
    assert nodes(page) - first >= 6, f"only {9 - first} nodes appeared after the page was open"
    assert_not_reloaded(page)
    assert page.evaluate("window.clawboardLive.received") > 0
    expect(page.locator("#live-text")).to_have_text("live")
    # each child hangs under the root with its own stable ids, finished
    children = page.locator(f"#run-{root}-children > li.node")
    expect(children).to_have_count(8)
    assert set(page_statuses(page).values()) == {"completed"}
    expect(page.locator(f"#run-{root}-head")).to_contain_text("subtree 9 runs")


def test_an_operator_approves_a_gated_call_from_the_inbox(browse: Browse, server: Server) -> None:
    page = browse.new_page("olga")
    root = start_run(page, "sysadmin", "check the disk")
    mark_page(page)
    wait_for_status(page, root, "awaiting_approval")

    inbox = browse.another_tab(page)
    inbox.goto("/approvals/")
    row = inbox.locator("#pending-table tr", has=inbox.locator(f'a[href="/runs/{root}/"]'))
    expect(row).to_contain_text("shell")
    expect(row).to_contain_text("echo disk usage ok")
    mark_page(inbox)
    row.get_by_role("button", name="Approve").click()
    expect(inbox.locator("#approvals-notice")).to_contain_text(re.compile(r"Approval \d+ approved\."))
    expect(inbox.locator("#decided-table")).to_contain_text("olga")
    expect(row).to_have_count(0)
    assert_not_reloaded(inbox)  # the inbox answered in place

    # the run page, left open in the other tab, sees the run finish
    wait_for_status(page, root, "completed")
    expect(page.locator(f"#run-{root}-output")).to_have_text("ops report: disk usage ok")
    assert_not_reloaded(page)


def test_an_operator_cancels_a_subtree(browse: Browse, server: Server) -> None:
    page = browse.new_page("olga")
    root = start_run(page, "brancher", "branch out")
    mark_page(page)
    page.wait_for_function("document.querySelectorAll('#run-tree li.node').length >= 5", timeout=20_000)
    tree = eventually(
        lambda: (
            (t := server.api("GET", f"/api/v1/runs/{root}/tree/"))
            and sum(s == "awaiting_approval" for s in tree_statuses(t).values()) == 2
            and t
        ),
        what="both leaves awaiting approval",
    )
    one = next(c for c in tree["children"] if c["label"] == "one")
    two = next(c for c in tree["children"] if c["label"] == "two")
    leaf_one, leaf_two = one["children"][0]["id"], two["children"][0]["id"]
    wait_for_status(page, leaf_one, "awaiting_approval")

    page.click(f"#run-{one['id']}-head")
    page.click(f"#cancel-{one['id']}")
    # the confirmation step (issue 17): the runs it would stop, then back to the tree
    page.wait_for_selector("#confirm-cancel")
    assert page.locator("li.to-cancel").count() == 2
    page.click("#confirm-cancel")
    page.wait_for_selector("#run-tree")
    mark_page(page)
    wait_for_status(page, one["id"], "cancelled")
    wait_for_status(page, leaf_one, "cancelled")
    # the other branch and the root are untouched
    assert status_of(page, two["id"]) == "waiting"
    assert status_of(page, leaf_two) == "awaiting_approval"
    assert status_of(page, root) == "waiting"
    after = tree_statuses(server.api("GET", f"/api/v1/runs/{root}/tree/"))
    assert after[one["id"]] == after[leaf_one] == "cancelled"
    assert after[leaf_two] == "awaiting_approval"
    assert_not_reloaded(page)
    # end the rest of the tree so nothing is left waiting on an operator
    # the Controls panel asks in the page itself (a dialog), then cancels without a reload
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-tree")
    wait_for_status(page, root, "cancelled")


def test_a_dropped_socket_reconnects_and_the_tree_catches_up(browse: Browse, server: Server) -> None:
    page = browse.new_page("olga")
    root = start_run(page, "fanout", "split it again")
    mark_page(page)
    page.wait_for_function("window.clawboardLive && window.clawboardLive.socket.readyState === 1")
    # Close the socket from the page and hold the reconnect back for about 4 s (the back-off
    # after four failed attempts), while the run goes on spawning subagents.
    page.evaluate("window.clawboardLive.retry = 4; window.clawboardLive.socket.close()")
    expect(page.locator("#live-text")).to_have_text("reconnecting…")
    seen_while_down = nodes(page)
    eventually(
        lambda: len(tree_statuses(server.api("GET", f"/api/v1/runs/{root}/tree/"))) > seen_while_down + 1,
        what="runs created while the page was disconnected",
    )
    assert nodes(page) == seen_while_down  # nothing arrives while the socket is down
    expect(page.locator("#live-text")).to_have_text("live", timeout=15_000)
    wait_for_status(page, root, "completed")
    final = server.api("GET", f"/api/v1/runs/{root}/tree/")
    eventually(lambda: page_statuses(page) == tree_statuses(final), what="the page matching the tree")
    events = server.api("GET", f"/api/v1/runs/{root}/events/")
    assert page.evaluate("window.clawboardLive.lastId") == max(e["id"] for e in events)
    assert_not_reloaded(page)
