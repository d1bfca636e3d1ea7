"""Whether the shell sandbox works on this host, and which profiles run without it (issue 15):
`GET /api/v1/health/`, the home page, the risk profile pages and the run of such a profile."""

from __future__ import annotations

import dataclasses

import pytest
from django.test import Client

from agents_app.selectors import config_snapshot_get
from agents_app.services import config_replace
from runs_app.engine.tools import sandbox
from tests.dashboard.support import make_run, text_of


@pytest.fixture
def unsandboxed(config: None) -> None:
    """Risk profile `solo` (agent `loner`) sets sandbox_enabled = false."""
    snapshot = config_snapshot_get()
    solo = dataclasses.replace(snapshot.risk_profiles["solo"], sandbox_enabled=False)
    config_replace(
        snapshot=dataclasses.replace(snapshot, risk_profiles={**snapshot.risk_profiles, "solo": solo})
    )


def test_health_says_whether_the_sandbox_works_here(anonymous: Client) -> None:
    body = anonymous.get("/api/v1/health/").json()

    state = sandbox.status()
    assert body == {"status": "ok" if state.available else "degraded", "sandbox": state.as_dict()}
    assert body["sandbox"]["backend"] == "bubblewrap"


def test_health_names_the_cause_when_bubblewrap_is_missing(anonymous: Client, settings: object) -> None:
    settings.CLAWBOARD_BWRAP = "/nonexistent/bwrap"  # type: ignore[attr-defined]

    body = anonymous.get("/api/v1/health/").json()

    assert body["status"] == "degraded"
    assert body["sandbox"]["available"] is False
    assert body["sandbox"]["detail"] == (
        "bubblewrap is not installed (/nonexistent/bwrap not found; install the Debian package bubblewrap)"
    )


def test_the_home_page_says_whether_the_sandbox_works(viewer: Client, settings: object) -> None:
    page = text_of(viewer.get("/"))
    assert 'id="sandbox-status"' in page
    assert ('id="sandbox-ok"' in page) == sandbox.status().available

    settings.CLAWBOARD_BWRAP = "/nonexistent/bwrap"  # type: ignore[attr-defined]
    page = text_of(viewer.get("/home/live/"))
    assert 'id="sandbox-unavailable"' in page and "/nonexistent/bwrap not found" in page


def test_a_profile_without_the_sandbox_is_shown_in_red(viewer: Client, unsandboxed: None) -> None:
    listing = text_of(viewer.get("/risk-profiles/"))
    assert 'id="sandbox-off-solo"' in listing and 'id="sandbox-off-team"' not in listing

    assert 'id="sandbox-off-warning"' in text_of(viewer.get("/risk-profiles/solo/"))
    assert 'id="sandbox-off-warning"' not in text_of(viewer.get("/risk-profiles/team/"))


def test_every_run_of_an_agent_without_the_sandbox_is_marked(viewer: Client, unsandboxed: None) -> None:
    loner, alpha = make_run("loner"), make_run("alpha")

    assert f'id="sandbox-off-{loner.pk}"' in text_of(viewer.get(f"/runs/{loner.pk}/detail/"))
    assert f'id="sandbox-off-{alpha.pk}"' not in text_of(viewer.get(f"/runs/{alpha.pk}/detail/"))
