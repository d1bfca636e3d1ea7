"""The Django admin writes configuration through the same validation and service as REST."""

from __future__ import annotations

import json
from html import escape
from typing import Any

import pytest
from django.test import Client

from agents_app.models import Agent, ConfigRevision, ModelProvider
from agents_app.selectors import config_snapshot_get
from agents_app.users import user_create_or_update
from policies_app.models import DelegateSettings, RiskProfile
from policies_app.specs import DEFAULT_ALLOWED_COMMANDS, DEFAULT_FORBIDDEN_PATHS
from tests.agents_app.support import config_state

pytestmark = pytest.mark.usefixtures("base_config")

MISSING_PROVIDER = (
    'agents.new.model_provider = "openai.missing" but [providers.models.openai.missing] is not configured'
)


@pytest.fixture
def admin_client(db: None) -> Client:
    user_create_or_update(username="root", role="admin", password="correct horse battery")
    client = Client()
    assert client.login(username="root", password="correct horse battery")
    return client


def form_data(values: dict[str, Any]) -> dict[str, str]:
    """What a browser posts: checked boxes as "on", unchecked ones left out, JSON as text."""
    data: dict[str, str] = {}
    for name, value in values.items():
        if value is False:
            continue
        if value is True:
            data[name] = "on"
        elif isinstance(value, list | dict):
            data[name] = json.dumps(value)
        elif value is None:
            data[name] = ""
        else:
            data[name] = str(value)
    return data


def agent_form(**fields: Any) -> dict[str, str]:
    values: dict[str, Any] = {
        "alias": "new",
        "enabled": True,
        "model_provider": "scripted.demo",
        "risk_profile": "team",
        "runtime_profile": "",
        "system_prompt": "",
        "delegate_same_risk_profile": True,
        "delegates": [],
        "read_memory_from": [],
        "workspace": "",
        "delegable": True,
    }
    values.update(fields)
    return form_data(values)


def agent_change_form(alias: str, /, **fields: Any) -> dict[str, str]:
    agent = Agent.objects.get(alias=alias)
    current = {name: getattr(agent, name) for name in agent_form()}
    return agent_form(**{**current, **fields})


def form_errors(response: Any) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = response.context["adminform"].form.errors
    return {name: list(messages) for name, messages in errors.items()}


def latest_revision() -> ConfigRevision:
    revision = ConfigRevision.objects.select_related("created_by").order_by("-id").first()
    assert revision is not None
    return revision


def test_adding_an_agent_with_an_invalid_model_provider_shows_the_exact_message_and_saves_nothing(
    admin_client: Client,
) -> None:
    before = config_state()
    response = admin_client.post("/admin/agents_app/agent/add/", agent_form(model_provider="openai.missing"))
    assert response.status_code == 200
    assert form_errors(response) == {"model_provider": [MISSING_PROVIDER]}
    assert escape(MISSING_PROVIDER) in response.content.decode()
    assert config_state() == before


def test_changing_an_agent_to_an_invalid_model_provider_shows_the_exact_message_and_saves_nothing(
    admin_client: Client,
) -> None:
    before = config_state()
    pk = Agent.objects.get(alias="beta").pk
    response = admin_client.post(
        f"/admin/agents_app/agent/{pk}/change/", agent_change_form("beta", model_provider="nodots")
    )
    assert response.status_code == 200
    message = 'agents.beta.model_provider must be dotted form <type>.<alias> (got "nodots")'
    assert form_errors(response) == {"model_provider": [message]}
    assert escape(message) in response.content.decode()
    assert config_state() == before


def test_several_admin_errors_are_shown_together(admin_client: Client) -> None:
    before = config_state()
    response = admin_client.post(
        "/admin/agents_app/agent/add/",
        agent_form(model_provider="", risk_profile="ghost", delegates=["ghost"]),
    )
    assert response.status_code == 200
    assert form_errors(response) == {
        "model_provider": [
            'agents.new.model_provider must reference a configured model provider (e.g. "scripted.demo")'
        ],
        "risk_profile": ['agents.new.risk_profile = "ghost" but risk_profiles.ghost is not configured'],
        "delegates": ['agents.new.delegates[0].agent = "ghost" but agents.ghost is not configured'],
    }
    assert config_state() == before


def test_a_delegates_value_of_the_wrong_shape_is_a_form_error(admin_client: Client) -> None:
    before = config_state()
    response = admin_client.post("/admin/agents_app/agent/add/", agent_form(delegates={"agent": "beta"}))
    assert response.status_code == 200
    assert form_errors(response) == {
        "delegates": ["agents.new.delegates must be a list of agent aliases or { agent, mode } tables"]
    }
    assert config_state() == before


def test_adding_agent_default_through_the_admin_is_refused(admin_client: Client) -> None:
    before = config_state()
    response = admin_client.post("/admin/agents_app/agent/add/", agent_form(alias="default"))
    assert response.status_code == 200
    assert form_errors(response) == {"alias": ["alias `default` is reserved and cannot be created"]}
    assert config_state() == before


def test_adding_an_agent_through_the_admin_creates_a_revision(admin_client: Client) -> None:
    count = ConfigRevision.objects.count()
    response = admin_client.post("/admin/agents_app/agent/add/", agent_form(delegates=["beta"]))
    assert response.status_code == 302
    assert ConfigRevision.objects.count() == count + 1
    revision = latest_revision()
    assert revision.summary == "admin: add new"
    assert revision.created_by is not None and revision.created_by.username == "root"
    assert "+[agents.new]\n" in revision.diff
    # A bare alias is written back as an object, like every other way in.
    assert Agent.objects.get(alias="new").delegates == [{"agent": "beta", "mode": "bounded"}]


def test_a_valid_change_through_the_admin_creates_a_revision(admin_client: Client) -> None:
    count = ConfigRevision.objects.count()
    pk = Agent.objects.get(alias="beta").pk
    response = admin_client.post(
        f"/admin/agents_app/agent/{pk}/change/", agent_change_form("beta", system_prompt="checked")
    )
    assert response.status_code == 302
    assert ConfigRevision.objects.count() == count + 1
    revision = latest_revision()
    assert revision.summary == "admin: change beta"
    assert revision.created_by is not None and revision.created_by.username == "root"
    assert '+system_prompt = "checked"\n' in revision.diff
    assert config_snapshot_get().agents["beta"].system_prompt == "checked"


def test_renaming_an_agent_through_the_admin_rewrites_references(admin_client: Client) -> None:
    pk = Agent.objects.get(alias="beta").pk
    response = admin_client.post(
        f"/admin/agents_app/agent/{pk}/change/", agent_change_form("beta", alias="bravo")
    )
    assert response.status_code == 302
    snap = config_snapshot_get()
    assert "beta" not in snap.agents
    assert snap.agents["alpha"].read_memory_from == ("bravo",)
    assert [d.agent for d in snap.agents["gamma"].delegates] == ["bravo"]


def test_deleting_an_agent_through_the_admin_shows_the_plan_and_scrubs_references(
    admin_client: Client,
) -> None:
    pk = Agent.objects.get(alias="beta").pk
    page = admin_client.get(f"/admin/agents_app/agent/{pk}/delete/")
    assert page.status_code == 200
    text = page.content.decode()
    assert escape('remove "beta" from agents.alpha.read_memory_from') in text
    assert escape('remove { agent = "beta", mode = "bounded" } from agents.gamma.delegates') in text

    count = ConfigRevision.objects.count()
    response = admin_client.post(f"/admin/agents_app/agent/{pk}/delete/", {"post": "yes"})
    assert response.status_code == 302
    snap = config_snapshot_get()
    assert "beta" not in snap.agents
    assert snap.agents["alpha"].read_memory_from == ()
    assert snap.agents["gamma"].delegates == ()
    assert ConfigRevision.objects.count() == count + 1
    assert latest_revision().summary == "admin: delete beta"


def test_deleting_several_agents_at_once_is_one_revision(admin_client: Client) -> None:
    pks = [str(Agent.objects.get(alias=a).pk) for a in ("beta", "gamma")]
    count = ConfigRevision.objects.count()
    response = admin_client.post(
        "/admin/agents_app/agent/",
        {"action": "delete_selected", "_selected_action": pks, "post": "yes"},
    )
    assert response.status_code == 302
    snap = config_snapshot_get()
    assert "beta" not in snap.agents and "gamma" not in snap.agents
    assert snap.agents["alpha"].delegates == ()
    assert snap.agents["alpha"].read_memory_from == ()
    assert ConfigRevision.objects.count() == count + 1
    assert latest_revision().summary == "admin: delete beta, gamma"


def test_deleting_a_referenced_risk_profile_through_the_admin_is_refused(admin_client: Client) -> None:
    before = config_state()
    message = 'agents.loner.risk_profile = "solo" but risk_profiles.solo is not configured'
    pk = RiskProfile.objects.get(alias="solo").pk
    page = admin_client.get(f"/admin/policies_app/riskprofile/{pk}/delete/")
    assert page.status_code == 200
    assert escape(message) in page.content.decode()
    response = admin_client.post(f"/admin/policies_app/riskprofile/{pk}/delete/", {"post": "yes"})
    assert response.status_code == 200
    assert escape(message) in response.content.decode()
    assert config_state() == before


def test_a_risk_profile_error_is_shown_under_its_field(admin_client: Client) -> None:
    before = config_state()
    values: dict[str, Any] = {
        "alias": "env",
        "level": "supervised",
        "workspace_only": True,
        "allowed_roots": [],
        "allowed_roots_read_only": [],
        "allowed_roots_write_only": [],
        "forbidden_paths": list(DEFAULT_FORBIDDEN_PATHS),
        "allowed_commands": list(DEFAULT_ALLOWED_COMMANDS),
        "shell_env_passthrough": ["PATH", "BAD-NAME"],
        "block_high_risk_commands": True,
        "require_approval_for_medium_risk": True,
        "allowed_tools": [],
        "excluded_tools": [],
        "auto_approve": [],
        "always_ask": [],
        "delegation_mode": "forbidden",
        "deny_all_tools": False,
        "shell_network": False,
        "sandbox_enabled": True,
        "sandbox_backend": "auto",
        "firejail_args": [],
    }
    response = admin_client.post("/admin/policies_app/riskprofile/add/", form_data(values))
    assert response.status_code == 200
    assert form_errors(response) == {
        "shell_env_passthrough": [
            "risk_profiles.env.shell_env_passthrough[1] is invalid (BAD-NAME); expected [A-Za-z_][A-Za-z0-9_]*"
        ]
    }
    assert config_state() == before


def test_a_provider_without_a_model_is_refused_in_the_admin(admin_client: Client) -> None:
    before = config_state()
    values: dict[str, Any] = {
        "type": "openai",
        "alias": "bare",
        "model": "",
        "uri": "",
        "api_key_env": "",
        "temperature": None,
        "timeout_secs": 60,
        "max_tokens": None,
        "input_per_mtok_cents": 0,
        "output_per_mtok_cents": 0,
        "fallback_models": [],
        "fallback": [],
        "script": [],
    }
    response = admin_client.post("/admin/agents_app/modelprovider/add/", form_data(values))
    assert response.status_code == 200
    assert form_errors(response) == {
        "model": [
            "providers.models.openai.bare.model is empty; a model is required for every provider type except scripted"
        ]
    }
    assert config_state() == before
    response = admin_client.post(
        "/admin/agents_app/modelprovider/add/", form_data({**values, "model": "llama"})
    )
    assert response.status_code == 302
    assert ModelProvider.objects.filter(type="openai", alias="bare").exists()
    assert latest_revision().summary == "admin: add openai.bare"


def test_delegate_settings_of_zero_are_refused_in_the_admin(admin_client: Client) -> None:
    before = config_state()
    values = {"timeout_secs": 0, "agentic_timeout_secs": 300, "max_background": 128, "max_concurrent_runs": 8}
    response = admin_client.post("/admin/policies_app/delegatesettings/add/", form_data(values))
    assert response.status_code == 200
    assert form_errors(response) == {"timeout_secs": ["delegate.timeout_secs must be greater than 0"]}
    assert config_state() == before
    response = admin_client.post(
        "/admin/policies_app/delegatesettings/add/", form_data({**values, "timeout_secs": 90})
    )
    assert response.status_code == 302
    assert config_snapshot_get().delegate.timeout_secs == 90
    assert DelegateSettings.objects.get().timeout_secs == 90


def test_revisions_are_read_only_in_the_admin(admin_client: Client) -> None:
    revision = latest_revision()
    assert admin_client.get("/admin/agents_app/configrevision/add/").status_code == 403
    page = admin_client.get(f"/admin/agents_app/configrevision/{revision.pk}/change/")
    assert page.status_code == 200
    assert 'name="_save"' not in page.content.decode()


def test_a_control_character_gets_the_configuration_message_in_the_admin_too(admin_client: Client) -> None:
    before = config_state()
    agent = Agent.objects.get(alias="beta")
    response = admin_client.post(
        f"/admin/agents_app/agent/{agent.pk}/change/", agent_change_form("beta", system_prompt="a\x00b")
    )
    assert response.status_code == 200
    assert form_errors(response) == {
        "system_prompt": ["agents.beta.system_prompt must not contain control characters (found U+0000)"]
    }
    assert config_state() == before
