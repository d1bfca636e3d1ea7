"""The dashboard's MCP page, its editors and the agent editor's MCP part."""

from __future__ import annotations

import json
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from agents_app.entries import entry_create, entry_update
from agents_app.models import McpServer
from agents_app.selectors import config_snapshot_get
from runs_app.models import McpServerState
from tests.dashboard.support import error_items, state, text_of

CURSOR = {"mcpServers": {"docs": {"url": "https://docs.example.com/mcp", "headers": {"X-Key": "k-secret-1"}}}}


def _server(name: str = "notes", **fields: object) -> None:
    entry_create(kind="mcp_servers", body={"name": name, "command": "/opt/notes/bin/notes-mcp", **fields})


def test_the_mcp_page_lists_servers_with_masked_secrets_and_bundles(admin: Client) -> None:
    _server(env={"NOTES_TOKEN": "n-secret-7731", "HOME_DIR": "${HOME}"}, tool_timeout_secs=30)
    entry_create(kind="mcp_bundles", body={"alias": "notes", "servers": ["notes"]})
    entry_update(kind="agents", key="alpha", body={"mcp_bundles": ["notes"]}, partial=True)
    response = admin.get("/mcp/")
    assert response.status_code == 200
    page = text_of(response)
    assert "n-secret-7731" not in page
    assert "NOTES_TOKEN=********" in page
    assert "HOME_DIR=${HOME}" in page
    assert "/opt/notes/bin/notes-mcp" in page
    assert "30 s" in page
    assert 'id="mcp-bundle-notes"' in page
    assert "<td>alpha</td>" in page


def test_the_state_fragment_shows_what_workers_last_saw(viewer: Client) -> None:
    _server()
    _server("idle")
    now = timezone.now()
    McpServerState.objects.create(
        server="notes",
        tools=[{"name": "search_notes"}, {"name": "add_note"}],
        last_call_at=now,
        last_error="notes: the server closed its output",
        last_error_at=now - timedelta(minutes=1),
    )
    page = text_of(viewer.get("/mcp/state/"))
    assert "search_notes" in page and "add_note" in page
    assert "notes: the server closed its output" in page
    assert "not started by any worker yet" in page


def test_a_server_editor_shows_every_error_at_its_field_in_one_round(admin: Client) -> None:
    before = state()
    response = admin.post(
        "/mcp/servers/new/",
        {
            "name": "bad",
            "transport": "stdio",
            "command": "",
            "tool_timeout_secs": "601",
            "env": "",
            "headers": "",
        },
    )
    assert response.status_code == 400
    assert error_items(response) == [
        "mcp.servers.bad.command is empty; a stdio server needs a command",
        "mcp.servers.bad.tool_timeout_secs must be between 1 and 600 (got 601)",
    ]
    assert state() == before


def test_a_server_is_created_and_edited_keeping_its_masked_secret(admin: Client) -> None:
    form = {
        "name": "api",
        "transport": "http",
        "url": "https://api.example/mcp",
        "headers": "Authorization: Bearer t-1",
        "env": "",
        "command": "",
        "args": "",
        "tool_timeout_secs": "",
    }
    assert admin.post("/mcp/servers/new/", form).status_code == 302
    token = McpServer.objects.get(name="api").headers["Authorization"]["token"]
    page = text_of(admin.get("/mcp/servers/api/"))
    assert "Authorization: ********" in page and "Bearer t-1" not in page
    edited = {**form, "headers": "Authorization: ********", "tool_timeout_secs": "20"}
    assert admin.post("/mcp/servers/api/", edited).status_code == 302
    row = McpServer.objects.get(name="api")
    assert (row.headers["Authorization"]["token"], row.tool_timeout_secs) == (token, 20)


def test_deleting_a_server_shows_the_plan_first(admin: Client) -> None:
    _server()
    entry_create(kind="mcp_bundles", body={"alias": "notes", "servers": ["notes"]})
    plan = text_of(admin.get("/mcp/servers/notes/delete/"))
    assert 'remove "notes" from mcp_bundles.notes.servers' in plan
    assert admin.post("/mcp/servers/notes/delete/", {"confirm": "yes"}).status_code == 302
    assert config_snapshot_get().mcp_bundles["notes"].servers == ()


def test_the_json_paste_is_previewed_then_confirmed(admin: Client) -> None:
    before = state()
    preview = admin.post("/mcp/import/preview/", {"json": json.dumps(CURSOR), "bundle": "docs"})
    body = text_of(preview)
    assert "+ mcp.servers.docs" in body and "+ mcp_bundles.docs" in body
    assert "k-secret-1" not in body
    assert 'id="mcp-import-confirm"' in body
    assert state() == before
    done = admin.post("/mcp/import/", {"json": json.dumps(CURSOR), "bundle": "docs"})
    assert done.status_code == 302
    assert list(config_snapshot_get().mcp_servers) == ["docs", "sample"]


def test_a_paste_that_is_not_json_or_not_mcp_servers_is_refused(admin: Client) -> None:
    bad = admin.post("/mcp/import/preview/", {"json": "{nope"})
    assert error_items(bad) == [
        "the text is not JSON: Expecting property name enclosed in double quotes (line 1, column 2)"
    ]
    before = state()
    wrong = admin.post("/mcp/import/", {"json": "{}"})
    assert wrong.status_code == 400
    assert state() == before


def test_the_switches_are_saved(admin: Client, viewer: Client) -> None:
    assert admin.post("/mcp/settings/", {"deferred_loading": "on"}).status_code == 302
    assert (config_snapshot_get().mcp.enabled, config_snapshot_get().mcp.deferred_loading) == (False, True)
    assert viewer.post("/mcp/settings/", {"enabled": "on"}).status_code == 403


def test_the_agent_editor_has_mcp_bundles_and_lists_granted_and_excluded_servers(admin: Client) -> None:
    _server()
    _server("tracker")
    entry_create(kind="mcp_bundles", body={"alias": "work", "servers": ["notes", "tracker"]})
    entry_create(kind="mcp_bundles", body={"alias": "safe", "exclude": ["tracker"]})
    page = text_of(admin.get("/agents/beta/"))
    assert 'name="mcp_bundles" value="work"' in page
    assert "No MCP bundle: no MCP server (omission is not a grant)." in page
    entry_update(kind="agents", key="beta", body={"mcp_bundles": ["work", "safe"]}, partial=True)
    page = text_of(admin.get("/agents/beta/"))
    assert (
        '<tr id="preview-mcp-notes"><td>notes</td><td>work</td><td><span class="badge status-completed">granted</span>'
        in page
    )
    assert "excluded</span> excluded by mcp_bundles.safe.exclude" in page


def test_the_tool_grid_keeps_mcp_tools_of_configured_servers_as_known(admin: Client) -> None:
    entry_update(kind="risk_profiles", key="team", body={"always_ask": ["sample__run"]}, partial=True)
    page = text_of(admin.get("/risk-profiles/team/"))
    assert '<tr id="grid-sample__run"><td>sample__run</td>' in page
