"""Every dashboard page renders for every role, and sends anonymous users to the login page."""

from __future__ import annotations

import pytest
from django.test import Client

from agents_app.models import ConfigRevision
from tests.dashboard.support import ROLES, Runs, client_as, text_of


def page_urls(runs: Runs) -> list[str]:
    """Every page a viewer may open (GET), with the ids of the sample runs filled in."""
    revision = ConfigRevision.objects.order_by("-pk").first()
    assert revision is not None
    return [
        "/",
        "/home/live/",
        "/home/charts/",
        "/runs/",
        "/runs/?status=failed&kind=top_level&agent=loner&since=24h",
        f"/runs/{runs.root.pk}/",
        f"/runs/{runs.gated.pk}/",
        f"/runs/{runs.lost.pk}/",
        f"/runs/{runs.failed.pk}/",
        f"/runs/{runs.root.pk}/children/?offset=0",
        f"/runs/{runs.gated.pk}/detail/",
        f"/runs/{runs.root.pk}/detail/",
        f"/runs/{runs.lost.pk}/controls/",
        f"/runs/{runs.child.pk}/conversation/",
        f"/runs/{runs.root.pk}/nodes/?ids={runs.root.pk},{runs.child.pk}&new={runs.task.pk}",
        "/approvals/",
        "/approvals/live/",
        "/tasks/",
        "/tasks/live/",
        "/schedules/",
        "/schedules/preview/?cron=0+2+*+*+*",
        "/schedules/preview/?cron=61+*+*+*+*",
        "/agents/",
        "/agents/?q=alp",
        "/agents/new/",
        "/agents/alpha/",
        "/agents/remote/",
        "/risk-profiles/",
        "/risk-profiles/new/",
        "/risk-profiles/new/?preset=balanced",
        "/risk-profiles/asker/",
        "/runtime-profiles/",
        "/runtime-profiles/new/",
        "/runtime-profiles/agentic/",
        "/providers/",
        "/providers/new/",
        "/providers/scripted.demo/",
        "/providers/openai.remote/",
        "/delegation-map/",
        "/delegation-map/?caller=alpha&target=gamma",
        "/config/",
        f"/config/revisions/{revision.pk}/",
        "/mcp/",
        "/mcp/state/",
        "/mcp/servers/",
        "/mcp/servers/new/",
        "/mcp/servers/sample/",
        "/mcp/bundles/",
        "/mcp/bundles/new/",
        "/mcp/bundles/kit/",
    ]


ADMIN_ONLY_PAGES = (
    "/agents/beta/delete/",
    "/risk-profiles/solo/delete/",
    "/providers/openai.remote/delete/",
    "/mcp/servers/sample/delete/",
    "/mcp/bundles/kit/delete/",
)


@pytest.mark.parametrize("role", ROLES)
def test_every_page_renders_for_each_role(role: str, runs: Runs) -> None:
    client = client_as(role)
    for url in page_urls(runs):
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    for url in ADMIN_ONLY_PAGES:
        response = client.get(url)
        assert response.status_code == (200 if role == "admin" else 403), (url, response.status_code)


def test_anonymous_users_are_sent_to_the_login_page(anonymous: Client, runs: Runs) -> None:
    for url in [*page_urls(runs), *ADMIN_ONLY_PAGES]:
        response = anonymous.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url


def test_the_login_page_renders_and_logs_in(anonymous: Client) -> None:
    from agents_app.users import user_create_or_update

    user_create_or_update(username="lena", role="viewer", password="a-long-password")
    assert anonymous.get("/accounts/login/").status_code == 200
    refused = anonymous.post("/accounts/login/", {"username": "lena", "password": "wrong"})
    assert "Your username and password didn't match." in text_of(refused)
    response = anonymous.post("/accounts/login/", {"username": "lena", "password": "a-long-password"})
    assert response.status_code == 302
    assert "lena · viewer" in text_of(anonymous.get("/"))


def test_a_user_without_a_role_is_refused(db: None) -> None:
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("nobody", password="x-long-password")
    client = Client()
    client.force_login(user)
    assert client.get("/runs/").status_code == 403


def test_controls_are_rendered_only_for_roles_that_may_use_them(runs: Runs) -> None:
    viewer_page = text_of(client_as("viewer").get(f"/runs/{runs.root.pk}/"))
    admin_page = text_of(client_as("admin").get(f"/runs/{runs.root.pk}/"))
    assert 'id="cancel-tree"' not in viewer_page
    assert "Read-only: viewers can watch runs but not change them." in viewer_page
    assert 'id="cancel-tree"' in admin_page
    assert 'id="continue-form"' not in admin_page  # the run is still going
    lost_page = text_of(client_as("operator").get(f"/runs/{runs.lost.pk}/"))
    assert 'id="resume-form"' in lost_page and 'id="continue-form"' in lost_page
    assert 'id="cancel-tree"' not in lost_page  # finished, and not the operator's run anyway
    viewer_list = text_of(client_as("viewer").get("/runs/"))
    assert 'id="start-run"' not in viewer_list
    assert 'id="start-run"' in text_of(client_as("operator").get("/runs/"))
    approvals_viewer = text_of(client_as("viewer").get("/approvals/"))
    assert f'id="approve-{runs.approval.pk}"' not in approvals_viewer
    assert f'id="approve-{runs.approval.pk}"' in text_of(client_as("operator").get("/approvals/"))
    agent_viewer = text_of(client_as("viewer").get("/agents/alpha/"))
    assert 'id="save"' not in agent_viewer
    assert "<fieldset disabled" in agent_viewer
    assert 'id="save"' in text_of(client_as("admin").get("/agents/alpha/"))


def test_the_run_page_shows_the_tree_with_stable_ids(viewer: Client, runs: Runs) -> None:
    body = text_of(viewer.get(f"/runs/{runs.root.pk}/"))
    for run in (runs.root, runs.child, runs.gated, runs.task):
        assert f'id="run-{run.pk}"' in body
        assert f'id="run-{run.pk}-status"' in body
        assert f'id="run-{run.pk}-children"' in body
    assert f'<span class="badge status-awaiting_approval" id="run-{runs.gated.pk}-status">' in body
    # subtree sums on the root: 4 runs, 10+5 tokens each
    assert "(subtree 4 runs: 40+20 tok" in body


def test_the_node_detail_offers_the_pending_approval_to_operators(runs: Runs) -> None:
    detail = text_of(client_as("operator").get(f"/runs/{runs.gated.pk}/detail/"))
    assert f'action="/approvals/{runs.approval.pk}/approve/"' in detail
    assert "echo hi" in detail
    viewer_detail = text_of(client_as("viewer").get(f"/runs/{runs.gated.pk}/detail/"))
    assert "Approval needed:" in viewer_detail
    assert f'action="/approvals/{runs.approval.pk}/approve/"' not in viewer_detail


def test_home_lists_active_runs_approvals_gauges_failures_and_charts(viewer: Client, runs: Runs) -> None:
    body = text_of(viewer.get("/"))
    for section in ("active-runs", "pending-approvals", "budget-gauges", "recent-failures", "usage-charts"):
        assert f'id="{section}"' in body
    assert "Agent 'loner' failed: boom" in body
    assert 'id="chart-cost"' in body  # drawn by uPlot: tests/dashboard/test_home_charts.py


def test_the_tasks_page_lists_background_delegations(viewer: Client, runs: Runs) -> None:
    body = text_of(viewer.get("/tasks/"))
    assert f'id="task-{runs.task.pk}"' in body
    assert f'id="cancel-task-{runs.task.pk}"' not in body
    assert f'id="cancel-task-{runs.task.pk}"' in text_of(client_as("admin").get("/tasks/"))


def test_an_inline_approval_answers_in_place_without_a_later_flash(operator: Client, runs: Runs) -> None:
    response = operator.post(
        f"/approvals/{runs.approval.pk}/approve/", {"fragment": "node"}, HTTP_HX_REQUEST="true"
    )
    assert text_of(response) == (
        f'<p class="muted" id="node-approval-{runs.approval.pk}">Approval {runs.approval.pk} approved.</p>'
    )
    again = operator.post(f"/approvals/{runs.approval.pk}/deny/", HTTP_HX_REQUEST="true")
    assert f"Approval {runs.approval.pk} was already approved" in text_of(again)
    assert 'class="flash' not in text_of(operator.get("/runs/"))  # nothing queued for later


def test_forms_never_redirect_off_the_site(operator: Client, runs: Runs) -> None:
    response = operator.post(f"/approvals/{runs.approval.pk}/approve/", {"next": "https://evil.example/"})
    assert response["Location"] == "/approvals/"
    response = client_as("admin").post(
        f"/runs/{runs.task.pk}/cancel/", {"next": "//evil.example/", "confirm": "yes"}
    )
    assert response["Location"] == f"/runs/{runs.root.pk}/"
