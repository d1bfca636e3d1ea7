"""A viewer's session changes nothing through any page or form: every POST target of the
dashboard is tried, with the data an admin would send."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver

from agents_app import urls as agents_urls
from agents_app.models import ConfigRevision
from runs_app import urls as runs_urls
from runs_app.models import Schedule
from tests.dashboard.support import Runs, client_as, state
from tests.dashboard.test_pages import page_urls

GOOD_TOML = """\
[providers.models.scripted.demo]
model = "demo-1"
[risk_profiles.team]
[agents.solo]
model_provider = "scripted.demo"
risk_profile = "team"
"""


MCP_JSON = '{"mcpServers": {"docs": {"url": "https://docs.example.com/mcp"}}}'


def mutating_posts(runs: Runs) -> list[tuple[str, dict[str, Any]]]:
    """Every dashboard URL that changes state, with a body that would succeed for an admin."""
    first = ConfigRevision.objects.order_by("pk").first()
    assert first is not None
    schedule, _ = Schedule.objects.get_or_create(
        name="nightly", defaults={"agent": "alpha", "prompt": "sum up", "cron": "0 2 * * *"}
    )
    agent = {
        "alias": "alpha2",
        "model_provider": "scripted.demo",
        "risk_profile": "team",
        "enabled": "on",
        "delegable": "on",
    }
    risk = {"alias": "team2", "level": "supervised", "delegation_mode": "allow", "allow__shell": "on"}
    runtime = {
        "alias": "rt2",
        "max_tool_iterations": 0,
        "max_actions_per_hour": 20,
        "max_cost_per_day_cents": 500,
        "shell_timeout_secs": 60,
        "max_delegation_depth": 0,
        "max_tool_result_chars": 0,
        "max_spawn_depth": 1,
        "max_children_per_run": 5,
        "subagent_timeout_secs": 0,
        "max_output_tokens": 0,
    }
    provider = {
        "type": "scripted",
        "alias": "other",
        "timeout_secs": 60,
        "input_per_mtok_cents": 0,
        "output_per_mtok_cents": 0,
    }
    return [
        ("/agents/new/", agent),
        ("/agents/alpha/", {**agent, "alias": "alpha"}),
        ("/agents/beta/delete/", {"confirm": "yes"}),
        ("/risk-profiles/new/", risk),
        ("/risk-profiles/solo/", {**risk, "alias": "solo"}),
        ("/risk-profiles/spare/delete/", {"confirm": "yes"}),
        ("/runtime-profiles/new/", runtime),
        ("/runtime-profiles/agentic/", {**runtime, "alias": "agentic"}),
        ("/runtime-profiles/spare/delete/", {"confirm": "yes"}),
        ("/providers/new/", provider),
        ("/providers/scripted.demo/", {**provider, "alias": "demo"}),
        ("/providers/scripted.spare/delete/", {"confirm": "yes"}),
        ("/config/import/", {"toml": GOOD_TOML}),
        ("/config/import/preview/", {"toml": GOOD_TOML}),
        (f"/config/revisions/{first.pk}/restore/", {"confirm": "yes"}),
        ("/runs/start/", {"agent": "alpha", "prompt": "go"}),
        (f"/runs/{runs.root.pk}/cancel/", {"confirm": "yes"}),
        (f"/runs/{runs.task.pk}/cancel/", {"next": "/tasks/", "confirm": "yes"}),
        (f"/runs/{runs.root.pk}/steer/", {"message": "faster"}),
        (f"/runs/{runs.lost.pk}/resume/", {}),
        (f"/runs/{runs.child.pk}/continue/", {"prompt": "and then?"}),
        (f"/approvals/{runs.approval.pk}/approve/", {}),
        (f"/approvals/{runs.approval.pk}/deny/", {"reason": "no"}),
        ("/approvals/bulk/", {"ids": [runs.approval.pk], "decision": "deny", "reason": "no"}),
        (
            "/schedules/",
            {"name": "weekly", "agent": "alpha", "prompt": "go", "cron": "0 3 * * 1", "enabled": "on"},
        ),
        (f"/schedules/{schedule.pk}/enabled/", {"enabled": "off"}),
        (f"/schedules/{schedule.pk}/delete/", {"confirm": "yes"}),
        ("/mcp/servers/new/", {"name": "other", "transport": "stdio", "command": "/bin/true"}),
        ("/mcp/servers/sample/", {"name": "sample", "transport": "stdio", "command": "/bin/false"}),
        ("/mcp/bundles/new/", {"alias": "kit2", "servers": ["sample"]}),
        ("/mcp/bundles/kit/", {"alias": "kit", "servers": []}),
        ("/mcp/bundles/kit/delete/", {"confirm": "yes"}),
        ("/mcp/servers/sample/delete/", {"confirm": "yes"}),
        ("/mcp/settings/", {"enabled": "on", "deferred_loading": "on"}),
        ("/mcp/import/", {"json": MCP_JSON}),
        ("/mcp/import/preview/", {"json": MCP_JSON}),
    ]


def read_only_posts(runs: Runs) -> list[tuple[str, dict[str, Any]]]:
    """POST endpoints that compute a preview and save nothing: a viewer may use them."""
    return [
        ("/agents/preview/", {"alias": "x", "model_provider": "scripted.demo", "risk_profile": "team"}),
        (
            "/agents/alpha/preview/",
            {"alias": "alpha", "model_provider": "scripted.demo", "risk_profile": "team"},
        ),
        ("/risk-profiles/preview/", {"alias": "p", "level": "readonly", "delegation_mode": "allow"}),
        ("/risk-profiles/team/preview/", {"alias": "team", "level": "full", "delegation_mode": "allow"}),
        ("/runtime-profiles/preview/", {"alias": "r"}),
        ("/runtime-profiles/agentic/preview/", {"alias": "agentic"}),
        ("/providers/preview/", {"type": "scripted", "alias": "p"}),
        ("/providers/scripted.demo/preview/", {"type": "scripted", "alias": "demo"}),
        ("/delegation-map/simulate/", {"caller": "alpha", "target": "gamma"}),
    ]


# second path segments that are words of the URL scheme, not entry keys
FIXED = {"logout", "new", "preview", "start", "import", "revisions", "simulate", "live", "bulk", "<id>", ""}


def _normalize(url: str) -> str:
    path = url.split("?")[0].lstrip("/")
    path = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", path)
    path = re.sub(r"/\d+/", "/<id>/", path)
    parts = path.split("/")
    if len(parts) > 2 and parts[1] not in FIXED:
        parts[1] = "<id>"
    return "/".join(parts)


def test_every_post_target_of_the_dashboard_is_covered(runs: Runs) -> None:
    """The lists above name every URL a form posts to; a new form must be added to them."""
    covered = {_normalize(u) for u, _ in mutating_posts(runs) + read_only_posts(runs)}
    admin = client_as("admin")
    targets: set[str] = set()
    for url in page_urls(runs):
        body = admin.get(url).content.decode()
        for form in re.finditer(r"<form\b[^>]*>", body):
            tag = form.group(0)
            if 'method="post"' not in tag and "hx-post" not in tag:
                continue
            action = re.search(r'(?:hx-post|action)="([^"]*)"', tag)
            targets.add(_normalize(action.group(1) if action and action.group(1) else url))
        for hx in re.finditer(r'hx-post="([^"]+)"', body):
            targets.add(_normalize(hx.group(1)))
    targets.discard("accounts/logout/")
    assert targets - covered == set()


def test_every_dashboard_url_pattern_is_tried(runs: Runs) -> None:
    """Each route of the dashboard apps is either a page (GET) or one of the POSTs above."""
    tried = [u for u, _ in mutating_posts(runs) + read_only_posts(runs)] + page_urls(runs)
    patterns: list[URLPattern | URLResolver] = [*agents_urls.urlpatterns, *runs_urls.urlpatterns]
    for pattern in patterns:
        assert any(pattern.resolve(u.split("?")[0].lstrip("/")) for u in tried), str(pattern.pattern)


@pytest.mark.parametrize("who", ["viewer", "anonymous"])
def test_a_viewer_cannot_change_anything_through_any_form(who: str, runs: Runs) -> None:
    client = client_as("viewer") if who == "viewer" else Client()
    posts = mutating_posts(runs)  # (it makes the schedule they act on)
    before = state()
    for url, data in posts:
        response = client.post(url, data)
        if who == "viewer":
            assert response.status_code == 403, (url, response.status_code)
        else:
            assert response.status_code == 302, (url, response.status_code)
            assert response["Location"].startswith("/accounts/login/"), url
        # htmx requests are refused the same way
        response = client.post(url, data, HTTP_HX_REQUEST="true")
        assert response.status_code in (403, 302), url
    assert state() == before


def test_a_viewer_may_preview_and_simulate_but_nothing_is_saved(viewer: Client, runs: Runs) -> None:
    before = state()
    for url, data in read_only_posts(runs):
        response = viewer.post(url, data)
        assert response.status_code == 200, (url, response.status_code)
    assert state() == before


def test_read_pages_ignore_a_viewers_post(viewer: Client, runs: Runs) -> None:
    before = state()
    for url in page_urls(runs):
        response = viewer.post(url, {"alias": "zzz", "status": "cancelled"})
        assert response.status_code in (200, 403, 405), (url, response.status_code)
    assert state() == before


def test_the_same_posts_work_for_an_admin(admin: Client, runs: Runs) -> None:
    """So the refusals above are refusals, not broken requests."""
    for url, data in mutating_posts(runs):
        if url.endswith("/deny/"):
            continue  # the approval is already approved by the previous request
        response = admin.post(url, data)
        assert response.status_code in (200, 302), (url, response.status_code)
        if response.status_code == 200:
            assert "/preview/" in url, url


def test_a_viewer_cannot_use_the_django_admin(viewer: Client, runs: Runs) -> None:
    before = state()
    assert viewer.get("/admin/").status_code == 302
    for url in ("/admin/agents_app/agent/add/", "/admin/agents_app/agent/alpha/delete/"):
        response = viewer.post(url, {"alias": "evil", "model_provider": "scripted.demo", "post": "yes"})
        assert response.status_code == 302, url
        assert response["Location"].startswith("/admin/login/"), url
    assert state() == before
