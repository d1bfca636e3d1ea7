"""Pasting an mcpServers JSON on the MCP page: preview, confirm, and the server is listed."""

from __future__ import annotations

import json

from playwright.sync_api import expect

from tests.e2e.support import SCREENSHOTS, Browse

CLAUDE_JSON = {
    "mcpServers": {
        "e2e-notes": {"command": "/bin/cat", "args": ["--help"], "env": {"NOTES_TOKEN": "n-e2e-secret-55"}},
        "e2e-docs": {
            "type": "http",
            "url": "https://docs.example.com/mcp",
            "headers": {"X-Key": "${E2E_DOCS_KEY}"},
        },
    }
}


def test_an_admin_pastes_mcp_servers_previews_and_confirms(browse: Browse) -> None:
    page = browse.new_page("admin")
    page.goto("/mcp/")
    page.fill("#mcp-import-json", json.dumps(CLAUDE_JSON))
    page.fill("#mcp-import-bundle", "e2e-kit")
    page.click("#mcp-import-preview")
    expect(page.locator("#import-changes li")).to_have_text(
        ["+ mcp.servers.e2e-docs", "+ mcp.servers.e2e-notes", "+ mcp_bundles.e2e-kit"]
    )
    expect(page.locator("#mcp-import-result")).not_to_contain_text("n-e2e-secret-55")
    # the preview saved nothing
    expect(page.locator("#mcp-server-e2e-notes")).to_have_count(0)
    page.click("#mcp-import-confirm")
    expect(page.locator("#mcp-server-e2e-notes")).to_contain_text("/bin/cat --help")
    expect(page.locator("#mcp-server-e2e-notes")).to_contain_text("NOTES_TOKEN=********")
    expect(page.locator("#mcp-server-e2e-docs")).to_contain_text("X-Key: ${E2E_DOCS_KEY}")
    expect(page.locator("#mcp-bundle-e2e-kit")).to_contain_text("e2e-notes")
    expect(page.locator("body")).not_to_contain_text("n-e2e-secret-55")
    expect(page.locator("#mcp-state-e2e-notes")).to_contain_text("not started by any worker yet")
    # the operator guide's picture of the page (docs/screenshots with UPDATE_SCREENSHOTS=1)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SCREENSHOTS / "mcp.png"), full_page=True)
