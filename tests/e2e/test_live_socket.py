"""One websocket per tab (issue 17 item 2), in a real browser and with a real websocket client
against the real server: the nav badge and the approvals inbox follow without a reload,
polling takes over visibly when the socket is down, and the socket's error paths answer as
documented, never with a 500."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from playwright.sync_api import Page, WebSocketRoute, expect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.e2e.support import (
    Browse,
    Server,
    assert_not_reloaded,
    eventually,
    mark_page,
    start_run,
    wait_for_status,
)


def badge(page: Page) -> str:
    """The nav badge's count ("0" when there is no badge), read in one look: a count() then an
    inner_text() can see the badge, then wait 15 s for it after a refresh removed it."""
    text = page.evaluate("() => document.querySelector('#nav-approvals-count')?.innerText ?? '0'")
    return str(text).strip()


def pending_count(server: Server) -> int:
    return len(server.api("GET", "/api/v1/approvals/?status=pending"))


def start_gated(server: Server) -> str:
    run = server.api("POST", "/api/v1/runs/", {"agent": "sysadmin", "prompt": "check the disk"})
    return str(run["id"])


def decide_all(server: Server, root: str) -> None:
    for a in server.api("GET", "/api/v1/approvals/?status=pending"):
        if a["root_id"] == root:
            server.api("POST", f"/api/v1/approvals/{a['id']}/approve/", {})


def test_the_nav_badge_and_the_inbox_follow_approvals_live(browse: Browse, server: Server) -> None:
    page = browse.new_page("olga")
    page.goto("/runs/")
    page.wait_for_load_state("networkidle")
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    page.reload()  # counted from the page's start
    expect(page.locator("#socket-state")).to_have_text("live")
    assert [re.sub(r"^ws://[^/]+", "", u) for u in sockets] == ["/ws/live/"]  # one per tab
    mark_page(page)
    before = pending_count(server)
    assert badge(page) == str(before)
    root = start_gated(server)
    expect(page.locator("#nav-approvals-count")).to_have_text(str(before + 1), timeout=20_000)
    expect(page.locator(f'#run-table a[href="/runs/{root}/"]').first).to_be_visible()  # the list too
    inbox = browse.another_tab(page)
    inbox.goto("/approvals/")
    expect(inbox.locator("#pending-table")).to_contain_text("echo disk usage ok")
    rows = inbox.locator("#pending-table tr[id^=approval-]").count()
    home = browse.another_tab(page)
    home.goto("/")
    waiting = home.locator(f'#pending-approvals a[href="/runs/{root}/"]')
    expect(waiting).to_have_count(1)
    mark_page(inbox)
    mark_page(home)
    decide_all(server, root)
    eventually(lambda: badge(page) == str(before), what="the badge to go down")
    expect(inbox.locator("#pending-table tr[id^=approval-]")).to_have_count(rows - 1)
    expect(waiting).to_have_count(0)  # the home page follows too
    for tab in (page, inbox, home):
        assert_not_reloaded(tab)


def test_polling_takes_over_visibly_while_the_socket_is_down(browse: Browse, server: Server) -> None:
    page = browse.new_page("olga")

    def refuse(ws: WebSocketRoute) -> None:
        ws.close(code=1011, reason="down for the test")

    page.route_web_socket(re.compile(r".*/ws/.*"), refuse)
    page.goto("/approvals/")
    expect(page.locator("#socket-state")).to_have_text("live updates down: polling every 3 s")
    before = pending_count(server)
    root = start_gated(server)
    expect(page.locator("#nav-approvals-count")).to_have_text(str(before + 1), timeout=20_000)
    decide_all(server, root)


def test_a_signed_out_browser_sees_the_documented_close_code(browse: Browse) -> None:
    page = browse.new_page(user=None)
    page.goto("/accounts/login/")
    code = page.evaluate(
        """() => new Promise((done) => {
            const ws = new WebSocket(`ws://${location.host}/ws/live/`);
            ws.onclose = (e) => done(e.code);
        })"""
    )
    assert code == 4401


def session_headers(page: Page, server: Server) -> dict[str, str]:
    cookies = "; ".join(f"{c['name']}={c['value']}" for c in page.context.cookies())
    return {"Cookie": cookies, "Origin": server.url}


def answers_to(url: str, headers: dict[str, str], frames: list[str | bytes]) -> list[dict[str, Any]]:
    """Each frame's answer, then the answer to a ping (the socket is still open)."""
    answers = []
    with connect(url, additional_headers=headers, open_timeout=10) as ws:
        if "/ws/live/" in url:
            assert json.loads(ws.recv(timeout=10))["type"] == "hello"
        for frame in [*frames, '{"type": "ping"}']:
            ws.send(frame)
            answers.append(json.loads(ws.recv(timeout=10)))
    return answers


def handshake_status(url: str, headers: dict[str, str]) -> int:
    with pytest.raises(InvalidStatus) as refused:
        with connect(url, additional_headers=headers, open_timeout=10):
            pass
    return int(refused.value.response.status_code)


def close_code(url: str, headers: dict[str, str]) -> int:
    with connect(url, additional_headers=headers, open_timeout=10) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None
    return int(closed.value.rcvd.code)


def test_a_real_websocket_client_gets_404_json_errors_and_close_codes(browse: Browse, server: Server) -> None:
    ws_url = server.url.replace("http://", "ws://")
    headers = session_headers(browse.new_page("vera"), server)

    assert handshake_status(ws_url + "/ws/runs/abc/", headers) == 404
    assert handshake_status(ws_url + "/ws/foo/", headers) == 404

    answers = answers_to(
        ws_url + "/ws/live/",
        headers,
        ["not json", b"\x00\x01", '{"type":"resync","after":1e400}', "[]", '{"type":"dance"}'],
    )
    assert [a.get("code") for a in answers[:-1]] == [
        "invalid_json",
        "binary_frame",
        "unknown_type",  # the live socket follows no tree: a resync means nothing there
        "invalid_message",
        "unknown_type",
    ]
    assert answers[-1] == {"type": "pong"}

    root = server.api("POST", "/api/v1/runs/", {"agent": "reviewer", "prompt": "frames", "wait": 30})["id"]
    tree = answers_to(
        f"{ws_url}/ws/runs/{root}/?after=999999999",
        headers,
        ['{"type":"resync","after":1e400}', '{"type":"resync","after":-3}', b"\xff"],
    )
    assert [a.get("code") for a in tree] == ["invalid_after", "invalid_after", "binary_frame", None]
    assert tree[-1] == {"type": "pong"}

    assert close_code(ws_url + "/ws/live/", {"Origin": server.url}) == 4401
    assert close_code(ws_url + "/ws/live/", session_headers(browse.new_page("nora"), server)) == 4403
    assert close_code(ws_url + "/ws/runs/00000000-0000-0000-0000-000000000000/", headers) == 4404


def test_the_run_page_follows_a_tree_by_polling_while_its_socket_is_down(browse: Browse) -> None:
    page = browse.new_page("olga")
    page.route_web_socket(re.compile(r".*/ws/.*"), lambda ws: ws.close(code=1011))
    root = start_run(page, "tracer", "trace without a socket")
    mark_page(page)
    expect(page.locator("#socket-state")).to_have_text("live updates down: polling every 3 s")
    wait_for_status(page, root, "completed", timeout_ms=60_000)
    page.wait_for_function("document.querySelectorAll('#run-tree li.node').length === 31", timeout=20_000)
    expect(page.locator("#continue")).to_be_visible()
    assert_not_reloaded(page)
