"""What the workers last saw of each MCP server, as a fragment of the dashboard's MCP page.

The MCP page belongs to the configuration (agents_app), which never imports runs_app; the page
loads this fragment from here (`hx-get="/mcp/state/"`), so the state rows stay on this side."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agents_app.selectors import config_snapshot_get
from agents_app.web import viewer_required
from runs_app.models import McpServerState


def mcp_server_state_list() -> QuerySet[McpServerState]:
    return McpServerState.objects.order_by("server")


@viewer_required
def mcp_state_fragment(request: HttpRequest) -> HttpResponse:
    configured = config_snapshot_get().mcp_servers
    states = {state.server: state for state in mcp_server_state_list()}
    rows = [{"server": name, "state": states.get(name)} for name in sorted(configured)]
    return render(request, "runs/_mcp_state.html", {"rows": rows})
