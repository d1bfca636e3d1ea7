"""MCP servers, bundles and the [mcp] switches in the Django admin: same validation, a revision
per save, secrets masked and never written in the clear."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from agents_app import secrets
from agents_app.models import ConfigRevision, McpBundle, McpServer
from agents_app.selectors import config_snapshot_get
from agents_app.users import user_create_or_update
from tests.agents_app.support import config_state

pytestmark = pytest.mark.usefixtures("base_config")


@pytest.fixture
def admin_client(db: None) -> Client:
    user_create_or_update(username="root", role="admin", password="correct horse battery")
    client = Client()
    assert client.login(username="root", password="correct horse battery")
    return client


def server_form(**fields: Any) -> dict[str, str]:
    values: dict[str, Any] = {
        "name": "notes",
        "transport": "stdio",
        "command": "/opt/notes/bin/notes-mcp",
        "args": [],
        "env": {},
        "url": "",
        "headers": {},
        "tool_timeout_secs": "",
    }
    values.update(fields)
    return {k: json.dumps(v) if isinstance(v, list | dict) else str(v) for k, v in values.items()}


def test_a_server_added_in_the_admin_is_saved_encrypted_with_a_revision(admin_client: Client) -> None:
    revisions = ConfigRevision.objects.count()
    response = admin_client.post(
        "/admin/agents_app/mcpserver/add/", server_form(env={"NOTES_TOKEN": "n-7731", "HOME_DIR": "${HOME}"})
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    row = McpServer.objects.get(name="notes")
    assert row.env["HOME_DIR"] == {"env": "HOME"}
    assert secrets.decrypt(row.env["NOTES_TOKEN"]["token"]) == "n-7731"
    assert ConfigRevision.objects.count() == revisions + 1
    assert ConfigRevision.objects.order_by("-pk").first().summary == "admin: add notes"  # type: ignore[union-attr]

    page = admin_client.get(f"/admin/agents_app/mcpserver/{row.pk}/change/").content.decode()
    assert "n-7731" not in page
    assert row.env["NOTES_TOKEN"]["token"] not in page
    assert "********" in page


def test_sending_the_mask_back_keeps_the_stored_value(admin_client: Client) -> None:
    admin_client.post("/admin/agents_app/mcpserver/add/", server_form(env={"NOTES_TOKEN": "n-7731"}))
    row = McpServer.objects.get(name="notes")
    token = row.env["NOTES_TOKEN"]["token"]
    response = admin_client.post(
        f"/admin/agents_app/mcpserver/{row.pk}/change/",
        server_form(env={"NOTES_TOKEN": "********"}, tool_timeout_secs=30),
    )
    assert response.status_code == 302
    row.refresh_from_db()
    assert row.env["NOTES_TOKEN"]["token"] == token
    assert row.tool_timeout_secs == 30


def test_the_admin_shows_every_error_at_its_field_and_saves_nothing(admin_client: Client) -> None:
    before = config_state()
    response = admin_client.post(
        "/admin/agents_app/mcpserver/add/", server_form(command="", tool_timeout_secs=601)
    )
    assert response.status_code == 200
    errors = {name: list(msgs) for name, msgs in response.context["adminform"].form.errors.items()}
    assert errors == {
        "command": ["mcp.servers.notes.command is empty; a stdio server needs a command"],
        "tool_timeout_secs": ["mcp.servers.notes.tool_timeout_secs must be between 1 and 600 (got 601)"],
    }
    assert config_state() == before
    assert not McpServer.objects.exists()


def test_a_bundle_of_an_unknown_server_is_refused_and_deleting_a_bundle_scrubs_agents(
    admin_client: Client,
) -> None:
    response = admin_client.post(
        "/admin/agents_app/mcpbundle/add/", {"alias": "b", "servers": '["ghost"]', "exclude": "[]"}
    )
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["servers"] == [
        'mcp_bundles.b.servers[0] = "ghost" but mcp.servers has no server named "ghost"'
    ]
    admin_client.post("/admin/agents_app/mcpserver/add/", server_form())
    assert (
        admin_client.post(
            "/admin/agents_app/mcpbundle/add/", {"alias": "b", "servers": '["notes"]', "exclude": "[]"}
        ).status_code
        == 302
    )
    bundle = McpBundle.objects.get(alias="b")
    snap = config_snapshot_get()
    assert snap.mcp_bundles["b"].servers == ("notes",)
    from agents_app.entries import entry_update

    entry_update(kind="agents", key="beta", body={"mcp_bundles": ["b"]}, partial=True)
    response = admin_client.post(f"/admin/agents_app/mcpbundle/{bundle.pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    assert config_snapshot_get().agents["beta"].mcp_bundles == ()


def test_the_mcp_switches_are_edited_in_the_admin(admin_client: Client) -> None:
    response = admin_client.post("/admin/agents_app/mcpsettings/add/", {"deferred_loading": "on"})
    assert response.status_code == 302
    assert config_snapshot_get().mcp.enabled is False
    assert config_snapshot_get().mcp.deferred_loading is True
