"""The configuration REST API (SPEC §2, §10): CRUD, validation, roles, roster, tools, the policy
simulator, import/export and revisions, through DRF's APIClient with token authentication."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from agents_app.config_io import export_toml, parse_toml
from agents_app.models import Agent, ConfigRevision
from agents_app.policy_check import policy_check
from agents_app.selectors import config_snapshot_get
from agents_app.services import config_replace
from agents_app.snapshot import AgentSpec, ConfigSnapshot, DelegateEntry, ProviderSpec
from policies_app.models import RiskProfile
from policies_app.specs import (
    DEFAULT_ALLOWED_COMMANDS,
    DEFAULT_FORBIDDEN_PATHS,
    RiskProfileSpec,
    RuntimeProfileSpec,
)
from tests.agents_app.support import BASE_AGENTS, BASE_TOML, agent_json, api_client, config_state

pytestmark = pytest.mark.usefixtures("base_config")

V1 = "/api/v1"
NEW_AGENT: dict[str, Any] = {"alias": "new", "model_provider": "scripted.demo", "risk_profile": "team"}


def errors_of(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"errors": [{"field": field, "message": message} for field, message in pairs]}


def latest_revision() -> ConfigRevision:
    revision = ConfigRevision.objects.select_related("created_by").order_by("-id").first()
    assert revision is not None
    return revision


# --- authentication and roles -------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    ["/agents/", "/agents/alpha/", "/providers/scripted.demo/", "/config/", "/config/revisions/"],
)
def test_anonymous_request_is_refused_with_401(anon_api: APIClient, path: str) -> None:
    response = anon_api.get(V1 + path)
    assert response.status_code == 401
    assert response.json() == {
        "detail": "Authentication credentials were not provided.",
        "code": "not_authenticated",
    }


def test_a_wrong_token_is_refused_with_401(anon_api: APIClient) -> None:
    anon_api.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    response = anon_api.get(f"{V1}/agents/")
    assert response.status_code == 401
    assert response.json() == {"detail": "Invalid token.", "code": "authentication_failed"}


@pytest.mark.parametrize(
    "path",
    [
        "/agents/",
        "/agents/alpha/",
        "/risk-profiles/",
        "/risk-profiles/team/",
        "/runtime-profiles/",
        "/runtime-profiles/agentic/",
        "/providers/",
        "/providers/scripted.demo/",
        "/agents/alpha/roster/",
        "/agents/alpha/tools/",
        "/config/",
        "/config/revisions/",
    ],
)
def test_viewer_can_read_configuration(viewer_api: APIClient, path: str) -> None:
    assert viewer_api.get(V1 + path).status_code == 200


WRITES: list[tuple[str, str, Any]] = [
    ("post", "/agents/", NEW_AGENT),
    ("put", "/agents/beta/", {"model_provider": "scripted.demo", "risk_profile": "team"}),
    ("patch", "/agents/beta/", {"system_prompt": "changed"}),
    ("delete", "/agents/beta/", None),
    ("post", "/risk-profiles/", {"alias": "extra"}),
    ("patch", "/risk-profiles/team/", {"level": "readonly"}),
    ("delete", "/risk-profiles/team/", None),
    ("post", "/runtime-profiles/", {"alias": "extra"}),
    ("patch", "/runtime-profiles/agentic/", {"agentic": False}),
    ("delete", "/runtime-profiles/shallow/", None),
    ("post", "/providers/", {"alias": "extra", "type": "scripted"}),
    ("patch", "/providers/scripted.spare/", {"model": "changed"}),
    ("delete", "/providers/scripted.spare/", None),
    ("post", "/config/", {}),
    ("post", "/config/revisions/1/restore/", None),
]


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_viewer_cannot_change_configuration(viewer_api: APIClient, method: str, path: str, body: Any) -> None:
    before = config_state()
    response = getattr(viewer_api, method)(V1 + path, body, format="json")
    assert response.status_code == 403
    assert response.json() == {
        "detail": "You need the admin role to change configuration.",
        "code": "permission_denied",
    }
    assert config_state() == before


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_operator_cannot_change_configuration(
    operator_api: APIClient, method: str, path: str, body: Any
) -> None:
    before = config_state()
    response = getattr(operator_api, method)(V1 + path, body, format="json")
    assert response.status_code == 403
    assert response.json() == {
        "detail": "You need the admin role to change configuration.",
        "code": "permission_denied",
    }
    assert config_state() == before


def test_viewer_cannot_create_agent(viewer_api: APIClient) -> None:
    response = viewer_api.post(f"{V1}/agents/", NEW_AGENT, format="json")
    assert response.status_code == 403
    assert not Agent.objects.filter(alias="new").exists()


def test_a_user_without_a_role_cannot_read_configuration(db: None) -> None:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model().objects.create_user(username="nobody", password="x" * 12)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=user).key}")
    response = client.get(f"{V1}/agents/")
    assert response.status_code == 403
    assert response.json() == {"detail": "You need at least the viewer role.", "code": "permission_denied"}


# --- agents -------------------------------------------------------------------------------------


def test_agents_are_listed_by_alias_with_every_field(viewer_api: APIClient) -> None:
    response = viewer_api.get(f"{V1}/agents/")
    assert response.status_code == 200
    listed = response.json()
    assert [a["alias"] for a in listed] == list(BASE_AGENTS)
    assert listed[0] == agent_json(
        "alpha",
        model_provider="scripted.demo",
        risk_profile="team",
        runtime_profile="agentic",
        delegates=[{"agent": "gamma", "mode": "independent"}],
        read_memory_from=["beta"],
    )


def test_one_agent_is_read_by_its_alias(viewer_api: APIClient) -> None:
    response = viewer_api.get(f"{V1}/agents/gamma/")
    assert response.status_code == 200
    assert response.json() == agent_json(
        "gamma",
        model_provider="scripted.demo",
        risk_profile="asker",
        delegates=[{"agent": "beta", "mode": "bounded"}],
    )


def test_unknown_agent_is_404(viewer_api: APIClient) -> None:
    response = viewer_api.get(f"{V1}/agents/nobody/")
    assert response.status_code == 404
    assert response.json() == {"detail": "No agent 'nobody'.", "code": "not_found"}


def test_admin_can_create_agent_and_bare_delegates_are_written_as_objects(admin_api: APIClient) -> None:
    body = {**NEW_AGENT, "delegates": ["beta", {"agent": "gamma", "mode": "independent"}]}
    response = admin_api.post(f"{V1}/agents/", body, format="json")
    assert response.status_code == 201
    expected = agent_json(
        "new",
        model_provider="scripted.demo",
        risk_profile="team",
        delegates=[{"agent": "beta", "mode": "bounded"}, {"agent": "gamma", "mode": "independent"}],
    )
    assert response.json() == expected
    assert admin_api.get(f"{V1}/agents/new/").json() == expected
    assert Agent.objects.get(alias="new").delegates == expected["delegates"]


def test_each_saved_change_creates_a_revision_with_who_and_diff(admin_api: APIClient) -> None:
    count = ConfigRevision.objects.count()
    admin_api.post(f"{V1}/agents/", NEW_AGENT, format="json")
    assert ConfigRevision.objects.count() == count + 1
    revision = latest_revision()
    assert revision.created_by is not None and revision.created_by.username == "alice"
    assert revision.summary == "create agents.new"
    assert "+[agents.new]\n" in revision.diff
    assert '+model_provider = "scripted.demo"\n' in revision.diff
    assert revision.toml == export_toml(config_snapshot_get())

    admin_api.patch(f"{V1}/agents/new/", {"system_prompt": "hello"}, format="json")
    revision = latest_revision()
    assert ConfigRevision.objects.count() == count + 2
    assert revision.summary == "update agents.new"
    assert '-system_prompt = ""\n' in revision.diff
    assert '+system_prompt = "hello"\n' in revision.diff

    admin_api.delete(f"{V1}/agents/new/")
    assert ConfigRevision.objects.count() == count + 3
    assert latest_revision().summary == "delete agents.new"
    assert "-[agents.new]\n" in latest_revision().diff


def test_a_save_that_changes_nothing_creates_no_revision(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.patch(f"{V1}/agents/beta/", {"enabled": True}, format="json")
    assert response.status_code == 200
    assert config_state() == before


def test_put_replaces_the_whole_agent(admin_api: APIClient) -> None:
    response = admin_api.put(
        f"{V1}/agents/alpha/",
        {"model_provider": "scripted.spare", "risk_profile": "team", "system_prompt": "fresh"},
        format="json",
    )
    assert response.status_code == 200
    expected = agent_json(
        "alpha", model_provider="scripted.spare", risk_profile="team", system_prompt="fresh"
    )
    assert response.json() == expected
    assert admin_api.get(f"{V1}/agents/alpha/").json() == expected


def test_patch_changes_only_the_given_fields(admin_api: APIClient) -> None:
    response = admin_api.patch(f"{V1}/agents/alpha/", {"system_prompt": "be brief"}, format="json")
    assert response.status_code == 200
    assert response.json() == agent_json(
        "alpha",
        model_provider="scripted.demo",
        risk_profile="team",
        runtime_profile="agentic",
        system_prompt="be brief",
        delegates=[{"agent": "gamma", "mode": "independent"}],
        read_memory_from=["beta"],
    )


def test_renaming_an_agent_via_patch_rewrites_other_agents_references(admin_api: APIClient) -> None:
    response = admin_api.patch(f"{V1}/agents/beta/", {"alias": "bravo"}, format="json")
    assert response.status_code == 200
    assert response.json()["alias"] == "bravo"
    assert admin_api.get(f"{V1}/agents/beta/").status_code == 404
    assert admin_api.get(f"{V1}/agents/alpha/").json()["read_memory_from"] == ["bravo"]
    assert admin_api.get(f"{V1}/agents/gamma/").json()["delegates"] == [{"agent": "bravo", "mode": "bounded"}]
    assert latest_revision().summary == "update agents.beta -> bravo"


def test_renaming_an_agent_rewrites_its_own_memory_reference(admin_api: APIClient) -> None:
    admin_api.patch(f"{V1}/agents/alpha/", {"read_memory_from": ["beta", "alpha"]}, format="json")
    response = admin_api.patch(f"{V1}/agents/alpha/", {"alias": "able"}, format="json")
    assert response.status_code == 200
    assert response.json()["read_memory_from"] == ["beta", "able"]


def test_renaming_an_agent_via_put_keeps_the_body_and_rewrites_references(admin_api: APIClient) -> None:
    response = admin_api.put(
        f"{V1}/agents/gamma/",
        {"alias": "gemma", "model_provider": "scripted.demo", "risk_profile": "asker"},
        format="json",
    )
    assert response.status_code == 200
    assert response.json() == agent_json("gemma", model_provider="scripted.demo", risk_profile="asker")
    assert admin_api.get(f"{V1}/agents/alpha/").json()["delegates"] == [
        {"agent": "gemma", "mode": "independent"}
    ]


def test_renaming_an_agent_onto_an_existing_alias_is_refused(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.patch(f"{V1}/agents/beta/", {"alias": "alpha"}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(("alias", "agent alpha already exists"))
    assert config_state() == before


def test_renaming_an_agent_to_default_is_refused(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.patch(f"{V1}/agents/beta/", {"alias": "default"}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(("alias", "alias `default` is reserved and cannot be created"))
    assert config_state() == before


def test_creating_agent_default_is_refused(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.post(f"{V1}/agents/", {**NEW_AGENT, "alias": "default"}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(("alias", "alias `default` is reserved and cannot be created"))
    assert config_state() == before


def test_an_imported_default_agent_can_be_edited_and_deleted(admin_api: APIClient) -> None:
    doc = parse_toml(
        BASE_TOML + '\n[agents.default]\nmodel_provider = "scripted.demo"\nrisk_profile = "team"\n'
    )
    config_replace(snapshot=doc.snapshot)
    response = admin_api.patch(f"{V1}/agents/default/", {"system_prompt": "still here"}, format="json")
    assert response.status_code == 200
    assert response.json()["system_prompt"] == "still here"
    assert admin_api.delete(f"{V1}/agents/default/").status_code == 204


def test_creating_an_existing_agent_is_refused(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.post(f"{V1}/agents/", {**NEW_AGENT, "alias": "alpha"}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(("alias", "agent alpha already exists"))
    assert config_state() == before


@pytest.mark.parametrize("alias", ["", "Upper", "-dash", "a" * 65, "dot.ted", 7, None])
def test_an_invalid_alias_is_refused(admin_api: APIClient, alias: Any) -> None:
    before = config_state()
    response = admin_api.post(f"{V1}/agents/", {**NEW_AGENT, "alias": alias}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(("alias", "alias must match [a-z0-9][a-z0-9_-]{0,63}"))
    assert config_state() == before


def test_delete_dry_run_returns_the_plan_and_changes_nothing(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.delete(f"{V1}/agents/beta/?dry_run=true")
    assert response.status_code == 200
    assert response.json() == {
        "dry_run": True,
        "plan": [
            'remove "beta" from agents.alpha.read_memory_from',
            'remove { agent = "beta", mode = "bounded" } from agents.gamma.delegates',
        ],
        "errors": [],
    }
    assert config_state() == before


def test_deleting_an_agent_scrubs_it_from_delegates_and_read_memory_from(admin_api: APIClient) -> None:
    response = admin_api.delete(f"{V1}/agents/beta/")
    assert response.status_code == 204
    assert not Agent.objects.filter(alias="beta").exists()
    assert admin_api.get(f"{V1}/agents/alpha/").json()["read_memory_from"] == []
    assert admin_api.get(f"{V1}/agents/gamma/").json()["delegates"] == []


@pytest.mark.parametrize("method", ["put", "patch"])
@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("/agents/Not An Alias/", "No agent 'Not An Alias'."),
        ("/agents/nobody/", "No agent 'nobody'."),
        ("/providers/nodot/", "No model provider 'nodot'."),
    ],
)
def test_updating_an_unknown_entry_is_404(admin_api: APIClient, method: str, path: str, detail: str) -> None:
    before = config_state()
    response = getattr(admin_api, method)(V1 + path, {"system_prompt": "x"}, format="json")
    assert response.status_code == 404
    assert response.json() == {"detail": detail, "code": "not_found"}
    assert config_state() == before


def test_deleting_an_unknown_agent_is_404(admin_api: APIClient) -> None:
    response = admin_api.delete(f"{V1}/agents/nobody/")
    assert response.status_code == 404
    assert response.json() == {"detail": "No agent 'nobody'.", "code": "not_found"}


# Every §2.5 message of an agent, as the whole body of the refusal of one POST.
AGENT_MESSAGES: list[tuple[dict[str, Any], str, str]] = [
    (
        {"model_provider": ""},
        "agents.new.model_provider",
        'agents.new.model_provider must reference a configured model provider (e.g. "scripted.demo")',
    ),
    (
        {"model_provider": "nodots"},
        "agents.new.model_provider",
        'agents.new.model_provider must be dotted form <type>.<alias> (got "nodots")',
    ),
    (
        {"model_provider": "openai.missing"},
        "agents.new.model_provider",
        'agents.new.model_provider = "openai.missing" but [providers.models.openai.missing] is not configured',
    ),
    (
        {"risk_profile": ""},
        "agents.new.risk_profile",
        "agents.new.risk_profile must reference a configured [risk_profiles.<alias>] entry",
    ),
    (
        {"risk_profile": "ghost"},
        "agents.new.risk_profile",
        'agents.new.risk_profile = "ghost" but risk_profiles.ghost is not configured',
    ),
    (
        {"runtime_profile": "ghost"},
        "agents.new.runtime_profile",
        'agents.new.runtime_profile = "ghost" but runtime_profiles.ghost is not configured',
    ),
    (
        {"delegates": [" "]},
        "agents.new.delegates[0].agent",
        "agents.new.delegates[0].agent is empty; remove it or name a configured agent",
    ),
    (
        {"delegates": ["new"]},
        "agents.new.delegates[0].agent",
        'agents.new.delegates[0].agent = "new" names this agent itself; an agent cannot delegate to itself',
    ),
    (
        {"delegates": ["ghost"]},
        "agents.new.delegates[0].agent",
        'agents.new.delegates[0].agent = "ghost" but agents.ghost is not configured',
    ),
    (
        {"delegates": ["beta", {"agent": "beta", "mode": "independent"}]},
        "agents.new.delegates[1].agent",
        'agents.new.delegates[1].agent = "beta" duplicates an earlier delegate target',
    ),
]


@pytest.mark.parametrize(("fields", "field", "message"), AGENT_MESSAGES)
def test_each_agent_validation_message_comes_back_whole_and_nothing_is_saved(
    admin_api: APIClient, fields: dict[str, Any], field: str, message: str
) -> None:
    before = config_state()
    response = admin_api.post(f"{V1}/agents/", {**NEW_AGENT, **fields}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of((field, message))
    assert config_state() == before


@pytest.mark.parametrize(("fields", "field", "message"), AGENT_MESSAGES)
def test_each_agent_validation_message_is_given_for_an_update_too(
    admin_api: APIClient, fields: dict[str, Any], field: str, message: str
) -> None:
    assert admin_api.post(f"{V1}/agents/", NEW_AGENT, format="json").status_code == 201
    before = config_state()
    response = admin_api.patch(f"{V1}/agents/new/", fields, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of((field, message))
    assert config_state() == before


def test_a_disabled_agent_needs_no_risk_profile(admin_api: APIClient) -> None:
    response = admin_api.post(
        f"{V1}/agents/", {"alias": "off", "model_provider": "scripted.demo", "enabled": False}, format="json"
    )
    assert response.status_code == 201
    assert response.json()["risk_profile"] == ""


def test_several_errors_of_one_save_are_reported_together(admin_api: APIClient) -> None:
    before = config_state()
    body = {
        "alias": "new",
        "model_provider": "nodots",
        "risk_profile": "ghost",
        "runtime_profile": "ghost",
        "delegates": ["", "new"],
        "colour": "red",
    }
    response = admin_api.post(f"{V1}/agents/", body, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(
        ("agents.new.colour", "agents.new.colour is not a known field"),
        (
            "agents.new.model_provider",
            'agents.new.model_provider must be dotted form <type>.<alias> (got "nodots")',
        ),
        (
            "agents.new.risk_profile",
            'agents.new.risk_profile = "ghost" but risk_profiles.ghost is not configured',
        ),
        (
            "agents.new.runtime_profile",
            'agents.new.runtime_profile = "ghost" but runtime_profiles.ghost is not configured',
        ),
        (
            "agents.new.delegates[0].agent",
            "agents.new.delegates[0].agent is empty; remove it or name a configured agent",
        ),
        (
            "agents.new.delegates[1].agent",
            'agents.new.delegates[1].agent = "new" names this agent itself; an agent cannot delegate to itself',
        ),
    )
    assert config_state() == before


def test_unknown_fields_are_refused(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.post(f"{V1}/agents/", {**NEW_AGENT, "colour": "red"}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(("agents.new.colour", "agents.new.colour is not a known field"))
    response = admin_api.patch(
        f"{V1}/providers/scripted.spare/", {"pricing": {"per_call_cents": 3}}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "providers.models.scripted.spare.pricing.per_call_cents",
            "providers.models.scripted.spare.pricing.per_call_cents is not a known field",
        )
    )
    assert config_state() == before


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        ({"enabled": "yes"}, "agents.new.enabled", "agents.new.enabled must be a boolean"),
        ({"system_prompt": 5}, "agents.new.system_prompt", "agents.new.system_prompt must be a string"),
        (
            {"read_memory_from": "beta"},
            "agents.new.read_memory_from",
            "agents.new.read_memory_from must be a list of strings",
        ),
        (
            {"delegates": "beta"},
            "agents.new.delegates",
            "agents.new.delegates must be a list of agent aliases or { agent, mode } tables",
        ),
        (
            {"delegates": [{"agent": "beta", "mood": "bounded"}]},
            "agents.new.delegates[0]",
            'agents.new.delegates[0] has unknown field "mood"; expected agent and mode',
        ),
        (
            {"delegates": [{"agent": "beta", "mode": "free"}]},
            "agents.new.delegates[0].mode",
            'agents.new.delegates[0].mode = "free" is not a valid mode; expected one of bounded, independent',
        ),
    ],
)
def test_values_of_the_wrong_shape_are_refused(
    admin_api: APIClient, fields: dict[str, Any], field: str, message: str
) -> None:
    before = config_state()
    response = admin_api.post(f"{V1}/agents/", {**NEW_AGENT, **fields}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of((field, message))
    assert config_state() == before


@pytest.mark.parametrize("body", ["[1, 2]", '"text"', "7", "null", "true"])
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/agents/"),
        ("PUT", "/agents/beta/"),
        ("PATCH", "/agents/beta/"),
        ("POST", "/providers/"),
        ("PATCH", "/risk-profiles/team/"),
        ("POST", "/config/"),
    ],
)
def test_non_object_bodies_are_refused_with_400(
    admin_api: APIClient, method: str, path: str, body: str
) -> None:
    before = config_state()
    response = admin_api.generic(method, V1 + path, body, content_type="application/json")
    assert response.status_code == 400
    expected = (
        "the body must be a TOML document or a JSON object"
        if path == "/config/"
        else "the body must be a JSON object"
    )
    assert response.json() == errors_of(("", expected))
    assert config_state() == before


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[1, 2]", "Invalid data. Expected a dictionary, but got list."),
        ('"text"', "Invalid data. Expected a dictionary, but got str."),
        ("null", "This field may not be null."),
    ],
)
def test_policy_check_with_a_non_object_body_is_400(viewer_api: APIClient, body: str, message: str) -> None:
    response = viewer_api.generic("POST", f"{V1}/policy/check/", body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == errors_of(("", message))


def test_malformed_json_is_a_400(admin_api: APIClient) -> None:
    response = admin_api.generic("POST", f"{V1}/agents/", '{"alias": ', content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "JSON parse error - Expecting value: line 1 column 11 (char 10)",
        "code": "parse_error",
    }


@pytest.mark.parametrize(
    ("path", "method"), [("/agents/", "POST"), ("/config/", "POST"), ("/policy/check/", "POST")]
)
def test_json_nested_too_deeply_is_a_400_not_a_500(admin_api: APIClient, path: str, method: str) -> None:
    body = "[" * 100_000 + "]" * 100_000
    response = admin_api.generic(method, V1 + path, body, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {
        "detail": "JSON parse error - the body nests too deeply",
        "code": "parse_error",
    }


def test_a_form_encoded_body_is_an_unsupported_media_type(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.generic(
        "POST", f"{V1}/agents/", "alias=new", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 415
    assert response.json() == {
        "detail": 'Unsupported media type "application/x-www-form-urlencoded" in request.',
        "code": "unsupported_media_type",
    }
    assert config_state() == before


def test_an_integer_too_large_for_the_database_is_refused(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.post(
        f"{V1}/runtime-profiles/", {"alias": "huge", "max_actions_per_hour": 2**70}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "runtime_profiles.huge.max_actions_per_hour",
            "runtime_profiles.huge.max_actions_per_hour must be at most 2147483647 (got 1180591620717411303424)",
        )
    )
    assert config_state() == before


def test_a_provider_type_longer_than_its_column_is_refused(admin_api: APIClient) -> None:
    ptype = "t" * 33
    response = admin_api.post(f"{V1}/providers/", {"alias": "x", "type": ptype, "model": "m"}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            f"providers.models.{ptype}.x",
            f'providers.models.{ptype}.x: provider type "{ptype}" is longer than 32 characters',
        )
    )


def test_a_json_value_nested_too_deeply_is_a_400(admin_api: APIClient) -> None:
    script: Any = {"say": "x"}
    for _ in range(30):
        script = [script]
    response = admin_api.patch(f"{V1}/providers/scripted.spare/", {"script": script}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(("", "configuration nests deeper than 20 levels"))


def test_a_delegate_entry_written_with_spaces_is_still_reachable(admin_api: APIClient) -> None:
    body = {**NEW_AGENT, "delegate_same_risk_profile": False, "delegates": [" loner "]}
    assert admin_api.post(f"{V1}/agents/", body, format="json").status_code == 201
    response = admin_api.get(f"{V1}/agents/new/roster/")
    assert response.json() == [{"agent": "loner", "mode": "bounded"}]


# --- risk profiles, runtime profiles, providers ---------------------------------------------------


def test_risk_profile_is_created_with_its_defaults(admin_api: APIClient) -> None:
    response = admin_api.post(f"{V1}/risk-profiles/", {"alias": "fresh"}, format="json")
    assert response.status_code == 201
    assert response.json() == {
        "alias": "fresh",
        "level": "supervised",
        "workspace_only": True,
        "allowed_roots": [],
        "allowed_roots_read_only": [],
        "allowed_roots_write_only": [],
        "forbidden_paths": list(DEFAULT_FORBIDDEN_PATHS),
        "allowed_commands": list(DEFAULT_ALLOWED_COMMANDS),
        "shell_env_passthrough": [],
        "block_high_risk_commands": True,
        "require_approval_for_medium_risk": True,
        "allowed_tools": [],
        "excluded_tools": [],
        "auto_approve": ["file_read", "memory_recall"],
        "always_ask": [],
        "deny_all_tools": False,
        "shell_network": False,
        "sandbox_enabled": True,
        "sandbox_backend": "auto",
        "firejail_args": [],
        "delegation_policy": {"mode": "forbidden"},
    }
    assert RiskProfile.objects.get(alias="fresh").delegation_mode == "forbidden"


def test_risk_profile_patch_put_and_delete(admin_api: APIClient) -> None:
    admin_api.post(f"{V1}/risk-profiles/", {"alias": "fresh", "level": "readonly"}, format="json")
    response = admin_api.patch(
        f"{V1}/risk-profiles/fresh/", {"delegation_policy": {"mode": "allow"}}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["delegation_policy"] == {"mode": "allow"}
    assert response.json()["level"] == "readonly"
    response = admin_api.put(f"{V1}/risk-profiles/fresh/", {"always_ask": ["shell"]}, format="json")
    assert response.status_code == 200
    assert response.json()["level"] == "supervised"
    assert response.json()["always_ask"] == ["shell"]
    assert response.json()["delegation_policy"] == {"mode": "forbidden"}
    assert admin_api.delete(f"{V1}/risk-profiles/fresh/").status_code == 204
    assert admin_api.get(f"{V1}/risk-profiles/fresh/").status_code == 404


def test_deleting_a_referenced_risk_profile_is_refused(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.delete(f"{V1}/risk-profiles/solo/")
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "agents.loner.risk_profile",
            'agents.loner.risk_profile = "solo" but risk_profiles.solo is not configured',
        )
    )
    assert config_state() == before


def test_delete_dry_run_of_a_referenced_risk_profile_shows_why_it_would_fail(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.delete(f"{V1}/risk-profiles/solo/?dry_run=1")
    assert response.status_code == 200
    assert response.json() == {
        "dry_run": True,
        "plan": ["remove risk_profiles.solo"],
        **errors_of(
            (
                "agents.loner.risk_profile",
                'agents.loner.risk_profile = "solo" but risk_profiles.solo is not configured',
            )
        ),
    }
    assert config_state() == before


def test_shell_env_passthrough_names_are_checked(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.post(
        f"{V1}/risk-profiles/", {"alias": "env", "shell_env_passthrough": ["HOME", "1BAD"]}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "risk_profiles.env.shell_env_passthrough[1]",
            "risk_profiles.env.shell_env_passthrough[1] is invalid (1BAD); expected [A-Za-z_][A-Za-z0-9_]*",
        )
    )
    assert config_state() == before


def test_runtime_profile_crud(admin_api: APIClient) -> None:
    response = admin_api.post(
        f"{V1}/runtime-profiles/", {"alias": "quick", "max_spawn_depth": 2}, format="json"
    )
    assert response.status_code == 201
    assert response.json() == {
        "alias": "quick",
        "agentic": False,
        "max_tool_iterations": 0,
        "max_actions_per_hour": 20,
        "max_cost_per_day_cents": 500,
        "shell_timeout_secs": 60,
        "max_delegation_depth": 0,
        "delegation_timeout_secs": None,
        "agentic_timeout_secs": None,
        "parallel_tools": False,
        "max_tool_result_chars": 0,
        "tool_call_dedup_exempt": [],
        "max_spawn_depth": 2,
        "max_children_per_run": 5,
        "subagent_timeout_secs": 0,
        "max_output_tokens": 0,
        "shell_max_cpu_secs": 0,
        "shell_max_memory_mb": 0,
        "shell_max_file_size_mb": 0,
        "shell_max_processes": 0,
        "mcp_max_cpu_secs": 0,
        "mcp_max_memory_mb": 0,
        "mcp_max_file_size_mb": 0,
        "mcp_max_processes": 0,
    }
    response = admin_api.patch(
        f"{V1}/runtime-profiles/quick/", {"delegation_timeout_secs": 30}, format="json"
    )
    assert response.json()["delegation_timeout_secs"] == 30
    assert response.json()["max_spawn_depth"] == 2
    response = admin_api.put(f"{V1}/runtime-profiles/quick/", {"agentic": True}, format="json")
    assert response.json()["agentic"] is True
    assert response.json()["max_spawn_depth"] == 1
    assert admin_api.delete(f"{V1}/runtime-profiles/quick/").status_code == 204


def test_runtime_profile_limits_are_checked(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.post(
        f"{V1}/runtime-profiles/",
        {"alias": "wild", "max_spawn_depth": 9, "max_children_per_run": 0},
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "runtime_profiles.wild.max_spawn_depth",
            "runtime_profiles.wild.max_spawn_depth must be between 1 and 5 (got 9)",
        ),
        (
            "runtime_profiles.wild.max_children_per_run",
            "runtime_profiles.wild.max_children_per_run must be between 1 and 20 (got 0)",
        ),
    )
    assert config_state() == before


def test_deleting_a_referenced_runtime_profile_is_refused(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.delete(f"{V1}/runtime-profiles/shallow/")
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "agents.beta.runtime_profile",
            'agents.beta.runtime_profile = "shallow" but runtime_profiles.shallow is not configured',
        )
    )
    assert config_state() == before


def test_provider_is_looked_up_by_type_dot_alias(viewer_api: APIClient) -> None:
    response = viewer_api.get(f"{V1}/providers/scripted.demo/")
    assert response.status_code == 200
    assert response.json() == {
        "type": "scripted",
        "alias": "demo",
        "model": "demo-1",
        "uri": "",
        "api_key_env": "",
        "api_key": "",
        "temperature": None,
        "timeout_secs": 60,
        "max_tokens": None,
        "fallback_models": [],
        "fallback": [],
        "script": [],
        "pricing": {"input_per_mtok_cents": 0.0, "output_per_mtok_cents": 0.0},
    }
    missing = viewer_api.get(f"{V1}/providers/openai.demo/")
    assert missing.status_code == 404
    assert missing.json() == {"detail": "No model provider 'openai.demo'.", "code": "not_found"}


def test_provider_crud(admin_api: APIClient) -> None:
    body = {
        "type": "openai",
        "alias": "local",
        "model": "llama",
        "uri": "http://127.0.0.1:11434/v1",
        "api_key_env": "LOCAL_KEY",
        "pricing": {"input_per_mtok_cents": 10, "output_per_mtok_cents": 30},
        "fallback": ["scripted.spare"],
    }
    response = admin_api.post(f"{V1}/providers/", body, format="json")
    assert response.status_code == 201
    assert response.json()["pricing"] == {"input_per_mtok_cents": 10.0, "output_per_mtok_cents": 30.0}
    assert admin_api.get(f"{V1}/providers/").json()[0]["alias"] == "local"

    response = admin_api.patch(
        f"{V1}/providers/openai.local/", {"pricing": {"input_per_mtok_cents": 5}}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["pricing"] == {"input_per_mtok_cents": 5.0, "output_per_mtok_cents": 30.0}

    response = admin_api.put(f"{V1}/providers/openai.local/", {"model": "qwen"}, format="json")
    assert response.status_code == 200
    assert response.json()["uri"] == ""
    assert response.json()["fallback"] == []
    assert response.json()["model"] == "qwen"

    response = admin_api.patch(f"{V1}/providers/openai.local/", {"alias": "remote"}, format="json")
    assert response.status_code == 200
    assert admin_api.get(f"{V1}/providers/openai.remote/").json()["model"] == "qwen"
    assert admin_api.get(f"{V1}/providers/openai.local/").status_code == 404

    assert admin_api.delete(f"{V1}/providers/openai.remote/").status_code == 204
    assert admin_api.get(f"{V1}/providers/openai.remote/").status_code == 404


def test_a_non_scripted_provider_needs_a_model(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.post(f"{V1}/providers/", {"type": "openai", "alias": "bare"}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "providers.models.openai.bare.model",
            "providers.models.openai.bare.model is empty; a model is required for every provider type except scripted",
        )
    )
    assert config_state() == before


def test_a_provider_without_a_type_is_refused(admin_api: APIClient) -> None:
    response = admin_api.post(f"{V1}/providers/", {"alias": "x"}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(
        ("type", "type must be a provider family such as scripted, openai, ollama, anthropic")
    )


def test_deleting_a_provider_in_use_lists_every_agent_that_uses_it(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.delete(f"{V1}/providers/scripted.demo/")
    assert response.status_code == 400
    assert response.json() == errors_of(
        *[
            (
                f"agents.{alias}.model_provider",
                f'agents.{alias}.model_provider = "scripted.demo" but [providers.models.scripted.demo] is not configured',
            )
            for alias in BASE_AGENTS
        ]
    )
    assert config_state() == before


# --- roster and tools ---------------------------------------------------------------------------


def test_roster_lists_reachable_targets_with_their_modes(viewer_api: APIClient) -> None:
    response = viewer_api.get(f"{V1}/agents/alpha/roster/")
    assert response.status_code == 200
    assert response.json() == [
        {"agent": "beta", "mode": "bounded"},
        {"agent": "gamma", "mode": "independent"},
        {"agent": "picky", "mode": "bounded"},
    ]


def test_roster_is_empty_when_delegation_is_forbidden(viewer_api: APIClient) -> None:
    assert viewer_api.get(f"{V1}/agents/loner/roster/").json() == []


def test_roster_and_tools_of_an_unknown_agent_are_404(viewer_api: APIClient) -> None:
    for suffix in ("roster", "tools"):
        response = viewer_api.get(f"{V1}/agents/nobody/{suffix}/")
        assert response.status_code == 404
        assert response.json() == {"detail": "No agent 'nobody'.", "code": "not_found"}


def test_tools_show_what_the_agent_may_call_and_what_needs_an_operator(viewer_api: APIClient) -> None:
    response = viewer_api.get(f"{V1}/agents/gamma/tools/")
    assert response.status_code == 200
    asked = {"shell", "file_write"}
    assert response.json() == [
        {"tool": name, "allowed": True, "always_ask": name in asked, "auto_approve": name not in asked}
        for name in (
            "file_read",
            "file_write",
            "file_list",
            "shell",
            "memory_store",
            "memory_recall",
            "model_switch",
            "spawn_subagent",
            "delegate",
            "sessions_yield",
        )
    ]
    alpha = {row["tool"]: row for row in viewer_api.get(f"{V1}/agents/alpha/tools/").json()}
    assert alpha["model_switch"] == {
        "tool": "model_switch",
        "allowed": False,
        "always_ask": False,
        "auto_approve": False,
    }


def test_roster_requires_authentication(anon_api: APIClient) -> None:
    assert anon_api.get(f"{V1}/agents/alpha/roster/").status_code == 401
    assert (
        anon_api.post(f"{V1}/policy/check/", {"caller": "alpha", "target": "beta"}, format="json").status_code
        == 401
    )


# --- policy simulator (SPEC §6.1 checks 2-7) -----------------------------------------------------

PASSED = (
    "known_agent",
    "depth",
    "delegation_policy",
    "reachability",
    "independent_always_ask",
    "agentic_risk_profile",
)


def check(client: APIClient, **body: Any) -> dict[str, Any]:
    response = client.post(f"{V1}/policy/check/", body, format="json")
    assert response.status_code == 200, response.content
    result: dict[str, Any] = response.json()
    return result


def test_policy_check_of_a_pair_that_passes(viewer_api: APIClient) -> None:
    assert check(viewer_api, caller="alpha", target="picky") == {
        "caller": "alpha",
        "target": "picky",
        "mode": "bounded",
        "allowed": True,
        "refusal": None,
        "gates": [{"gate": g, "passed": True, "message": ""} for g in (*PASSED, "budget")],
        "child_tools": [
            "file_read",
            "file_write",
            "file_list",
            "shell",
            "memory_store",
            "memory_recall",
            "spawn_subagent",
            "sessions_yield",
        ],
    }


def test_policy_check_of_a_non_agentic_target_gives_no_child_tools(viewer_api: APIClient) -> None:
    result = check(viewer_api, caller="alpha", target="beta")
    assert result["allowed"] is True
    assert result["child_tools"] == []


def assert_refused(result: dict[str, Any], gate: str, message: str) -> None:
    """Refused at `gate` with `message`, every earlier gate passed, no later gate evaluated."""
    order = list(PASSED)
    expected = [{"gate": g, "passed": True, "message": ""} for g in order[: order.index(gate)]]
    expected.append({"gate": gate, "passed": False, "message": message})
    assert result["gates"] == expected
    assert result["allowed"] is False
    assert result["refusal"] == message
    assert result["child_tools"] == []


def test_policy_check_unknown_agent_lists_the_callers_roster(viewer_api: APIClient) -> None:
    assert_refused(
        check(viewer_api, caller="alpha", target="nobody"),
        "known_agent",
        "Unknown agent 'nobody'. Available agents: beta, gamma, picky",
    )
    assert_refused(
        check(viewer_api, caller="picky", target=" nobody "),
        "known_agent",
        "Unknown agent 'nobody'. Available agents: (none configured)",
    )


def test_policy_check_depth_uses_the_callers_runtime_profile(viewer_api: APIClient) -> None:
    assert_refused(
        check(viewer_api, caller="alpha", target="beta", depth=3),
        "depth",
        "Delegation depth limit reached (3/3). Cannot delegate further to prevent infinite loops.",
    )
    assert_refused(
        check(viewer_api, caller="beta", target="alpha", depth=2),
        "depth",
        "Delegation depth limit reached (2/2). Cannot delegate further to prevent infinite loops.",
    )
    assert_refused(
        check(viewer_api, caller="alpha", target="beta", depth=3, background=True),
        "depth",
        "Delegation depth limit reached (3/3).",
    )
    assert check(viewer_api, caller="alpha", target="beta", depth=2)["allowed"] is True


def test_policy_check_forbidden_delegation_policy(viewer_api: APIClient) -> None:
    assert_refused(
        check(viewer_api, caller="loner", target="beta"),
        "delegation_policy",
        'delegation is forbidden for caller "loner" by risk profile "solo" delegation_policy; '
        'set [risk_profiles.solo].delegation_policy mode = "allow"',
    )


@pytest.mark.parametrize(
    ("caller", "target", "message"),
    [
        (
            "alpha",
            "sleeper",
            'delegate target "sleeper" is not reachable from "alpha": the target agent is disabled',
        ),
        (
            "alpha",
            "verifier",
            'delegate target "verifier" is not reachable from "alpha": the target agent is not delegable',
        ),
        (
            "alpha",
            "loner",
            'delegate target "loner" is not reachable from "alpha": different risk profile (caller uses "team", '
            'target uses "solo"). delegate_same_risk_profile only reaches agents with the same risk profile; '
            "add an explicit [agents.alpha].delegates entry with the intended mode, or change one agent's "
            "risk_profile.",
        ),
        (
            "picky",
            "beta",
            'delegate target "beta" is not reachable from "picky": delegate_same_risk_profile is disabled and '
            "the target is not listed in [agents.picky].delegates",
        ),
        (
            "alpha",
            "alpha",
            'delegate target "alpha" is not reachable from "alpha"; add it to [agents.alpha].delegates or share '
            "a risk profile with delegate_same_risk_profile enabled",
        ),
    ],
)
def test_policy_check_reachability_diagnostics(
    viewer_api: APIClient, caller: str, target: str, message: str
) -> None:
    assert_refused(check(viewer_api, caller=caller, target=target), "reachability", message)


def test_an_unknown_target_is_refused_before_reachability_is_asked(viewer_api: APIClient) -> None:
    # §3.3's first diagnostic ("no agent with that alias exists") is shadowed by §6.1 check 2
    # in admission; tests/agents_app/test_reachability.py covers it on the pure function.
    result = check(viewer_api, caller="alpha", target="ghost")
    assert [g["gate"] for g in result["gates"]] == ["known_agent"]


def test_policy_check_independent_target_with_always_ask(viewer_api: APIClient) -> None:
    assert_refused(
        check(viewer_api, caller="alpha", target="gamma"),
        "independent_always_ask",
        'delegate target "gamma" cannot run in independent mode from "alpha": risk profile "asker" has '
        'always_ask entries (shell, file_write). See the documentation, "Delegation & SubAgents" > '
        '"What\'s not supported".',
    )


def test_policy_check_mode_overrides_the_roster_mode(viewer_api: APIClient) -> None:
    result = check(viewer_api, caller="alpha", target="gamma", mode="bounded")
    assert result["allowed"] is True
    assert result["mode"] == "bounded"


def test_policy_check_agentic_target_without_a_configured_risk_profile() -> None:
    # Check 7 cannot be reached from a validated configuration (an enabled agent needs a
    # configured risk profile), so it is exercised on the simulator over a raw snapshot.
    snapshot = ConfigSnapshot(
        providers={"scripted.demo": ProviderSpec(type="scripted", alias="demo")},
        risk_profiles={"team": RiskProfileSpec(alias="team", delegation_mode="allow")},
        runtime_profiles={"agentic": RuntimeProfileSpec(alias="agentic", agentic=True)},
        agents={
            "caller": AgentSpec(alias="caller", risk_profile="team", delegates=(DelegateEntry("target"),)),
            "target": AgentSpec(alias="target", risk_profile="ghost", runtime_profile="agentic"),
        },
    )
    result = policy_check(snapshot, caller="caller", target="target", mode=None, depth=0, background=False)
    assert_refused(
        result, "agentic_risk_profile", "Agent 'target' is agentic but risk_profile 'ghost' is not configured"
    )


def test_policy_check_of_a_read_only_caller_refuses_at_the_budget(admin_api: APIClient) -> None:
    admin_api.patch(f"{V1}/risk-profiles/team/", {"level": "readonly"}, format="json")
    result = check(admin_api, caller="alpha", target="beta")
    assert result["gates"][-1] == {
        "gate": "budget",
        "passed": False,
        "message": "Security policy: read-only mode, cannot perform 'delegate'",
    }
    assert result["refusal"] == "Security policy: read-only mode, cannot perform 'delegate'"


def test_policy_check_of_an_unknown_caller_is_404(viewer_api: APIClient) -> None:
    response = viewer_api.post(f"{V1}/policy/check/", {"caller": "nobody", "target": "beta"}, format="json")
    assert response.status_code == 404
    assert response.json() == {"detail": "No agent 'nobody'.", "code": "not_found"}


def test_policy_check_input_is_validated(viewer_api: APIClient) -> None:
    response = viewer_api.post(f"{V1}/policy/check/", {"mode": "sideways"}, format="json")
    assert response.status_code == 400
    assert response.json() == errors_of(
        ("caller", "This field is required."),
        ("target", "This field is required."),
        ("mode", '"sideways" is not a valid choice.'),
    )


# --- import / export ------------------------------------------------------------------------------


def test_config_get_returns_the_json_document(viewer_api: APIClient) -> None:
    response = viewer_api.get(f"{V1}/config/")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    doc = response.json()
    assert list(doc) == [
        "delegate",
        "providers",
        "risk_profiles",
        "runtime_profiles",
        "agents",
        "mcp",
        "mcp_bundles",
    ]
    assert doc["delegate"] == {
        "timeout_secs": 120,
        "agentic_timeout_secs": 300,
        "max_background": 128,
        "max_concurrent_runs": 8,
    }
    assert list(doc["providers"]["models"]["scripted"]) == ["demo", "spare"]
    assert list(doc["agents"]) == list(BASE_AGENTS)
    assert doc["agents"]["gamma"]["delegates"] == [{"agent": "beta", "mode": "bounded"}]
    assert doc["risk_profiles"]["team"]["delegation_policy"] == {"mode": "allow"}


@pytest.mark.parametrize(
    ("query", "headers"),
    [("?format=toml", {}), ("", {"HTTP_ACCEPT": "application/toml"})],
)
def test_config_get_returns_toml_on_request(
    viewer_api: APIClient, query: str, headers: dict[str, str]
) -> None:
    response = viewer_api.get(f"{V1}/config/{query}", **headers)  # type: ignore[arg-type]
    assert response.status_code == 200
    assert response["Content-Type"] == "application/toml; charset=utf-8"
    text = response.content.decode()
    assert text == export_toml(config_snapshot_get())
    assert text.startswith("[delegate]\ntimeout_secs = 120\n")
    assert '\n[agents.alpha]\nenabled = true\nmodel_provider = "scripted.demo"\n' in text
    assert parse_toml(text).snapshot == parse_toml(BASE_TOML).snapshot


def test_an_error_asked_for_as_toml_comes_back_as_toml(anon_api: APIClient) -> None:
    response = anon_api.get(f"{V1}/config/?format=toml")
    assert response.status_code == 401
    assert response.content.decode() == (
        'detail = "Authentication credentials were not provided."\ncode = "not_authenticated"\n'
    )


CHANGED_TOML = BASE_TOML.replace(
    '[agents.beta]\nmodel_provider = "scripted.demo"', '[agents.beta]\nmodel_provider = "scripted.spare"'
).replace(
    "[agents.verifier]",
    '[agents.zeta]\nmodel_provider = "scripted.demo"\nrisk_profile = "team"\n\n[agents.verifier]',
)


def post_toml(client: APIClient, text: str | bytes, query: str = "") -> Any:
    body: Any = text.encode() if isinstance(text, str) else text  # the stubs say str; bytes work too
    return client.generic("POST", f"{V1}/config/{query}", body, content_type="application/toml")


def test_config_import_dry_run_returns_the_diff_and_changes_nothing(admin_api: APIClient) -> None:
    before = config_state()
    response = post_toml(admin_api, CHANGED_TOML, "?dry_run=true")
    assert response.status_code == 200
    body = response.json()
    assert body["dry_run"] is True
    assert body["warnings"] == []
    assert body["changes"] == ["~ agents.beta: model_provider", "+ agents.zeta"]
    assert '-model_provider = "scripted.demo"\n+model_provider = "scripted.spare"\n' in body["diff"]
    assert "+[agents.zeta]\n" in body["diff"]
    assert body["diff"].startswith("--- current\n+++ new\n")
    assert "revision" not in body
    assert config_state() == before


def test_config_import_applies_the_whole_file_with_a_revision(admin_api: APIClient) -> None:
    count = ConfigRevision.objects.count()
    response = post_toml(admin_api, CHANGED_TOML)
    assert response.status_code == 200
    body = response.json()
    assert body["dry_run"] is False
    assert body["changes"] == ["~ agents.beta: model_provider", "+ agents.zeta"]
    revision = latest_revision()
    assert body["revision"] == revision.pk
    assert ConfigRevision.objects.count() == count + 1
    assert revision.summary == "import"
    assert revision.created_by is not None and revision.created_by.username == "alice"
    assert config_snapshot_get() == parse_toml(CHANGED_TOML).snapshot


def test_config_import_of_the_same_configuration_creates_no_revision(admin_api: APIClient) -> None:
    before = config_state()
    response = post_toml(admin_api, BASE_TOML)
    assert response.status_code == 200
    assert response.json()["revision"] is None
    assert response.json()["changes"] == []
    assert response.json()["diff"] == ""
    assert config_state() == before


def test_config_import_accepts_a_json_document(admin_api: APIClient) -> None:
    doc = admin_api.get(f"{V1}/config/").json()
    doc["agents"]["beta"]["system_prompt"] = "from json"
    response = admin_api.post(f"{V1}/config/", doc, format="json")
    assert response.status_code == 200
    assert response.json()["changes"] == ["~ agents.beta: system_prompt"]
    assert config_snapshot_get().agents["beta"].system_prompt == "from json"


def test_config_import_lists_skipped_zeroclaw_keys_as_warnings(admin_api: APIClient) -> None:
    text = "schema_version = 2\n[gateway]\nport = 1\n" + BASE_TOML.replace(
        "[agents.loner]\n", '[agents.loner]\ncolour = "red"\n'
    )
    response = post_toml(admin_api, text)
    assert response.status_code == 200
    assert response.json()["warnings"] == [
        'skipped unknown key "schema_version"',
        'skipped unknown key "gateway"',
        'skipped unknown field "agents.loner.colour"',
    ]


def test_malformed_toml_gives_line_and_column(admin_api: APIClient) -> None:
    before = config_state()
    response = post_toml(admin_api, "[agents.a]\nmodel provider = 1\n")
    assert response.status_code == 400
    assert response.json() == errors_of(
        ("", "invalid TOML: Expected '=' after a key in a key/value pair (at line 2, column 7)")
    )
    assert config_state() == before


def test_a_toml_body_that_is_not_utf8_is_a_400(admin_api: APIClient) -> None:
    response = post_toml(admin_api, b'[agents.a]\nsystem_prompt = "\xff"\n')
    assert response.status_code == 400
    assert response.json() == {"detail": "the TOML body is not valid UTF-8", "code": "parse_error"}


def test_an_invalid_configuration_is_refused_whole_with_no_partial_write(admin_api: APIClient) -> None:
    before = config_state()
    text = CHANGED_TOML + (
        '\n[providers.models.scripted.brand-new]\nmodel = "x"\n'
        '\n[agents.broken]\nmodel_provider = "scripted.nope"\nrisk_profile = "team"\n'
        '\n[risk_profiles.env]\nshell_env_passthrough = ["OK", "no-dash"]\n'
    )
    response = post_toml(admin_api, text)
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "agents.broken.model_provider",
            'agents.broken.model_provider = "scripted.nope" but [providers.models.scripted.nope] is not configured',
        ),
        (
            "risk_profiles.env.shell_env_passthrough[1]",
            "risk_profiles.env.shell_env_passthrough[1] is invalid (no-dash); expected [A-Za-z_][A-Za-z0-9_]*",
        ),
    )
    assert config_state() == before


def test_a_configuration_with_values_of_the_wrong_type_is_refused(admin_api: APIClient) -> None:
    before = config_state()
    response = post_toml(admin_api, '[delegate]\ntimeout_secs = "soon"\n[agents.a]\nenabled = 1\n')
    assert response.status_code == 400
    assert response.json() == errors_of(
        ("delegate.timeout_secs", "delegate.timeout_secs must be an integer"),
        ("agents.a.enabled", "agents.a.enabled must be a boolean"),
    )
    assert config_state() == before


def test_a_zero_delegate_timeout_is_refused_with_its_message(admin_api: APIClient) -> None:
    response = post_toml(admin_api, "[delegate]\ntimeout_secs = 0\nagentic_timeout_secs = 0\n")
    assert response.status_code == 400
    assert response.json() == errors_of(
        ("delegate.timeout_secs", "delegate.timeout_secs must be greater than 0"),
        ("delegate.agentic_timeout_secs", "delegate.agentic_timeout_secs must be greater than 0"),
    )


def test_export_import_export_is_byte_identical_through_the_api(admin_api: APIClient) -> None:
    first = admin_api.get(f"{V1}/config/?format=toml").content
    assert post_toml(admin_api, "[delegate]\n", "?prune=true").status_code == 200
    assert Agent.objects.count() == 0
    assert admin_api.get(f"{V1}/config/?format=toml").content != first
    assert post_toml(admin_api, first).status_code == 200
    assert admin_api.get(f"{V1}/config/?format=toml").content == first


# --- revisions ------------------------------------------------------------------------------------


def test_revisions_are_listed_newest_first_with_who_and_what(
    admin_api: APIClient, viewer_api: APIClient
) -> None:
    admin_api.post(f"{V1}/agents/", NEW_AGENT, format="json")
    admin_api.delete(f"{V1}/agents/new/")
    response = viewer_api.get(f"{V1}/config/revisions/")
    assert response.status_code == 200
    listed = response.json()
    assert [(r["summary"], r["created_by"]) for r in listed] == [
        ("delete agents.new", "alice"),
        ("create agents.new", "alice"),
        ("base", None),
    ]
    assert [r["id"] for r in listed] == sorted((r["id"] for r in listed), reverse=True)
    assert set(listed[0]) == {"id", "created_at", "created_by", "summary"}


def test_revision_detail_has_the_toml_and_the_diff(admin_api: APIClient) -> None:
    admin_api.patch(f"{V1}/agents/beta/", {"system_prompt": "hi"}, format="json")
    revision = latest_revision()
    response = admin_api.get(f"{V1}/config/revisions/{revision.pk}/")
    assert response.status_code == 200
    body = response.json()
    assert body["id"] == revision.pk
    assert body["summary"] == "update agents.beta"
    assert body["created_by"] == "alice"
    assert body["toml"] == export_toml(config_snapshot_get())
    assert '+system_prompt = "hi"\n' in body["diff"]


def test_restoring_a_revision_brings_its_configuration_back(admin_api: APIClient) -> None:
    base = latest_revision()
    admin_api.delete(f"{V1}/agents/beta/")
    assert not Agent.objects.filter(alias="beta").exists()
    response = admin_api.post(f"{V1}/config/revisions/{base.pk}/restore/")
    assert response.status_code == 200
    restored = latest_revision()
    assert response.json() == {"restored": base.pk, "revision": restored.pk}
    assert restored.summary == f"restore revision {base.pk}"
    assert restored.created_by is not None and restored.created_by.username == "alice"
    assert export_toml(config_snapshot_get()) == base.toml
    assert admin_api.get(f"{V1}/agents/alpha/").json()["read_memory_from"] == ["beta"]


def test_restoring_the_current_revision_changes_nothing(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.post(f"{V1}/config/revisions/{latest_revision().pk}/restore/")
    assert response.status_code == 200
    assert response.json()["revision"] is None
    assert config_state() == before


def test_unknown_revision_is_404(admin_api: APIClient) -> None:
    for response in (
        admin_api.get(f"{V1}/config/revisions/9999/"),
        admin_api.post(f"{V1}/config/revisions/9999/restore/"),
    ):
        assert response.status_code == 404
        assert response.json() == {"detail": "No revision 9999.", "code": "not_found"}


# --- OpenAPI ----------------------------------------------------------------------------------------


def test_schema_and_docs_are_served_to_a_viewer(db: None) -> None:
    client = api_client("viewer", "reader")
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    assert "/api/v1/agents/{key}/" in paths
    assert paths["/api/v1/agents/"]["get"]["operationId"] == "agents_list"
    assert paths["/api/v1/providers/{key}/"]["get"]["operationId"] == "providers_retrieve"
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()
