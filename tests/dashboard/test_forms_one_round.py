"""Every field error and every configuration error of a form comes back in one round
(issue 17 item 6): a field that fails its own check does not hide what the §2.5 validator says
about the others, and nothing is saved."""

from __future__ import annotations

from django.test import Client

from tests.dashboard.support import error_items, state
from tests.dashboard.test_config_forms import RUNTIME_DEFAULTS, agent_form, risk_form


def test_an_agent_forms_field_and_configuration_errors_come_together(admin: Client) -> None:
    before = state()
    response = admin.post(
        "/agents/new/",
        agent_form(
            "zed",
            model_provider="nodots",
            read_memory_from=["ghost"],
            delegate_agent=["nobody"],
            delegate_mode=["bounded"],
        ),
    )
    assert response.status_code == 400
    assert sorted(error_items(response)) == sorted(
        [
            "Select a valid choice. ghost is not one of the available choices.",
            'agents.zed.model_provider must be dotted form <type>.<alias> (got "nodots")',
            'agents.zed.delegates[0].agent = "nobody" but agents.nobody is not configured',
        ]
    )
    assert state() == before


def test_a_risk_profiles_field_and_configuration_errors_come_together(admin: Client) -> None:
    before = state()
    response = admin.post(
        "/risk-profiles/team/",
        risk_form("team", level="bogus", delegation_mode="allow", shell_env_passthrough="1BAD"),
    )
    assert response.status_code == 400
    assert sorted(error_items(response)) == sorted(
        [
            "Select a valid choice. bogus is not one of the available choices.",
            "risk_profiles.team.shell_env_passthrough[0] is invalid (1BAD); expected [A-Za-z_][A-Za-z0-9_]*",
        ]
    )
    assert state() == before


def test_a_runtime_profiles_field_and_configuration_errors_come_together(admin: Client) -> None:
    before = state()
    response = admin.post(
        "/runtime-profiles/agentic/",
        {
            "alias": "agentic",
            **RUNTIME_DEFAULTS,
            "agentic": "on",
            "max_actions_per_hour": "lots",
            "max_spawn_depth": 9,
        },
    )
    assert response.status_code == 400
    assert sorted(error_items(response)) == sorted(
        [
            "Enter a whole number.",
            "runtime_profiles.agentic.max_spawn_depth must be between 1 and 5 (got 9)",
        ]
    )
    assert state() == before


def test_a_form_with_field_errors_only_shows_them_once(admin: Client) -> None:
    response = admin.post("/agents/new/", agent_form("zed", read_memory_from=["ghost"]))
    assert response.status_code == 400
    assert error_items(response) == ["Select a valid choice. ghost is not one of the available choices."]


def test_the_live_preview_lists_both_kinds_of_error_too(admin: Client) -> None:
    response = admin.post(
        "/agents/preview/",
        agent_form("zed", read_memory_from=["ghost"], delegate_agent=["nobody"], delegate_mode=["bounded"]),
    )
    body = response.content.decode()
    assert "ghost is not one of the available choices." in body
    assert "agents.zed.delegates[0].agent = &quot;nobody&quot; but agents.nobody is not configured" in body
