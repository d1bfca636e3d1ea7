"""The browser tests' server handle, browser pages, and small helpers of the scenarios."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from playwright.sync_api import Browser, BrowserContext, Page, ViewportSize

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
# The operator guide's pictures are refreshed only on request (UPDATE_SCREENSHOTS=1), so a
# test run leaves the committed ones alone; otherwise they go with the other artifacts.
SCREENSHOTS = (
    ROOT / "docs" / "screenshots"
    if os.environ.get("UPDATE_SCREENSHOTS") == "1"
    else Path(__file__).resolve().parent / "artifacts" / "screenshots"
)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# nora signs in but has no role (her viewer group is taken away): the 4403 of the websocket
PASSWORDS = {"olga": "operator-pass-1234", "vera": "viewer-pass-1234", "nora": "no-role-pass-1234"}
VIEWPORT: ViewportSize = {"width": 1280, "height": 800}
# Playwright's default is 30 s per action; the product answers in well under a second.
TIMEOUT_MS = 15_000


@dataclass
class Server:
    url: str
    data_dir: Path
    admin_password: str
    admin_token: str
    process: subprocess.Popen[bytes]
    log: Path
    users: dict[str, str] = field(default_factory=dict)

    def api(self, method: str, path: str, body: Any = None) -> Any:
        """The REST API as the admin (token auth)."""
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={"Authorization": f"Token {self.admin_token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read() or b"null")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Browse:
    """Opens pages logged in as a user; every page opened is screenshotted if the test fails."""

    def __init__(self, browser: Browser, server: Server) -> None:
        self.browser = browser
        self.server = server
        self.contexts: list[BrowserContext] = []
        self.pages: list[Page] = []

    def new_page(
        self, user: str | None = "admin", *, color_scheme: Literal["light", "dark"] | None = None
    ) -> Page:
        context = self.browser.new_context(
            base_url=self.server.url, viewport=VIEWPORT, color_scheme=color_scheme or "light"
        )
        context.set_default_timeout(TIMEOUT_MS)
        self.contexts.append(context)
        page = context.new_page()
        self.pages.append(page)
        if user is not None:
            login(page, user, self.server.users[user])
        return page

    def another_tab(self, page: Page) -> Page:
        tab = page.context.new_page()
        self.pages.append(tab)
        return tab

    def close(self, failed_as: str | None) -> None:
        if failed_as:
            ARTIFACTS.mkdir(exist_ok=True)
            for i, page in enumerate(self.pages):
                if not page.is_closed():
                    suffix = "" if i == 0 else f"-{i}"
                    try:
                        page.screenshot(path=str(ARTIFACTS / f"{failed_as}{suffix}.png"), full_page=True)
                    except Exception as exc:  # a crashed page must not hide the test's own failure
                        print(f"screenshot of {failed_as}{suffix} failed: {exc}")
        for context in self.contexts:
            context.close()


def login(page: Page, username: str, password: str) -> None:
    page.goto("/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-submit")
    page.wait_for_url(re.compile(r"^(?!.*/accounts/login/).*$"))


UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def start_run(page: Page, agent: str, prompt: str) -> str:
    """Start a run from the runs page's form; returns the root run id of the page it opens."""
    page.goto("/runs/")
    page.select_option("#start-agent", agent)
    page.fill("#start-prompt", prompt)
    page.click("#start-submit")
    page.wait_for_url(re.compile(rf"/runs/{UUID}/$"))
    found = re.search(rf"/runs/({UUID})/$", page.url)
    assert found, page.url
    return found.group(1)


def nodes(page: Page) -> int:
    return page.locator("#run-tree li.node").count()


def status_of(page: Page, run_id: str) -> str:
    return page.locator(f"#run-{run_id}-status").inner_text().strip()


def wait_for_status(page: Page, run_id: str, status: str, timeout_ms: int = 20_000) -> None:
    page.wait_for_function(
        "([id, status]) => { const el = document.getElementById('run-' + id + '-status');"
        " return el && el.textContent.trim() === status; }",
        arg=[run_id, status],
        timeout=timeout_ms,
    )


def mark_page(page: Page) -> None:
    """A marker that only survives as long as the document does: a reload would erase it."""
    page.evaluate("window.__e2eMarker = 'still the same document'")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("window.__e2eMarker") == "still the same document"
    assert page.evaluate("performance.getEntriesByType('navigation').length") == 1


def eventually(check: Callable[[], Any], timeout: float = 20, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached after {timeout}s (last: {value!r})")
        time.sleep(0.1)


def tree_statuses(tree: dict[str, Any]) -> dict[str, str]:
    """run id -> status, for every node of a /api/v1/runs/<id>/tree/ answer."""
    found: dict[str, str] = {}
    stack = [tree]
    while stack:
        node = stack.pop()
        found[str(node["id"])] = node["status"]
        stack.extend(node.get("children", []))
    return found


def page_statuses(page: Page) -> dict[str, str]:
    result: dict[str, str] = page.evaluate(
        "() => Object.fromEntries(Array.from(document.querySelectorAll('#run-tree li.node')).map("
        "(li) => [li.id.slice(4), document.getElementById(li.id + '-status').textContent.trim()]))"
    )
    return result
