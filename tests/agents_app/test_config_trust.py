"""Configuration you can trust (issue 16): no silent weakening, no silent loss, secrets kept,
ZeroClaw files that come across whole. One section per item of the issue."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from agents_app import secrets
from agents_app.config_io import MAX_DOCUMENT_BYTES, diff_texts, export_toml, parse_toml
from agents_app.models import ConfigRevision, ModelProvider
from agents_app.selectors import config_snapshot_forget, config_snapshot_get
from agents_app.users import user_create_or_update
from policies_app.models import RiskProfile
from policies_app.specs import DEFAULT_ALLOWED_COMMANDS, RiskProfileSpec
from tests.agents_app.support import BASE_TOML, config_state

pytestmark = pytest.mark.usefixtures("base_config")

V1 = "/api/v1"
KNOWN = (
    "delegate, file_list, file_read, file_write, memory_recall, memory_store, model_switch, "
    "sessions_yield, shell, spawn_subagent"
)


def errors_of(*pairs: tuple[str, str]) -> dict[str, Any]:
    return {"errors": [{"field": f, "message": m} for f, m in pairs]}


def post_toml(client: APIClient, text: str, query: str = "") -> Any:
    body: Any = text.encode()  # the stubs say str; bytes work too
    return client.generic("POST", f"{V1}/config/{query}", body, content_type="application/toml")


def patch(client: APIClient, path: str, body: dict[str, Any]) -> Any:
    return client.patch(f"{V1}/{path}", body, format="json")


@pytest.fixture
def admin_page(db: None) -> Client:
    user_create_or_update(username="root", role="admin", password="correct horse battery")
    client = Client()
    assert client.login(username="root", password="correct horse battery")
    return client


# --- 1. names are checked ----------------------------------------------------------------------


def test_a_misspelt_always_ask_tool_is_refused_with_the_known_tools_and_a_suggestion(
    admin_api: APIClient,
) -> None:
    before = config_state()
    response = patch(admin_api, "risk-profiles/team/", {"always_ask": ["shel"]})
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "risk_profiles.team.always_ask",
            f'unknown tool "shel" in always_ask; known tools: {KNOWN} (did you mean "shell"?)',
        )
    )
    assert config_state() == before


@pytest.mark.parametrize("field", ["allowed_tools", "excluded_tools", "auto_approve", "always_ask"])
def test_every_tool_list_of_a_risk_profile_is_checked(admin_api: APIClient, field: str) -> None:
    response = patch(admin_api, "risk-profiles/team/", {field: ["frobnicate"]})
    assert response.status_code == 400
    assert response.json() == errors_of(
        (f"risk_profiles.team.{field}", f'unknown tool "frobnicate" in {field}; known tools: {KNOWN}')
    )


def test_the_wildcard_is_a_name_only_where_the_field_allows_it(admin_api: APIClient) -> None:
    assert (
        patch(admin_api, "risk-profiles/team/", {"always_ask": ["*"], "auto_approve": ["*"]}).status_code
        == 200
    )
    response = patch(admin_api, "risk-profiles/team/", {"allowed_tools": ["*"]})
    assert response.json() == errors_of(
        ("risk_profiles.team.allowed_tools", f'unknown tool "*" in allowed_tools; known tools: {KNOWN}')
    )


def test_tool_call_dedup_exempt_is_checked_too(admin_api: APIClient) -> None:
    response = patch(admin_api, "runtime-profiles/agentic/", {"tool_call_dedup_exempt": ["memory_recal"]})
    assert response.json() == errors_of(
        (
            "runtime_profiles.agentic.tool_call_dedup_exempt",
            f'unknown tool "memory_recal" in tool_call_dedup_exempt; known tools: {KNOWN} '
            '(did you mean "memory_recall"?)',
        )
    )


def test_through_rest_a_zeroclaw_tool_name_is_an_unknown_tool(admin_api: APIClient) -> None:
    response = patch(admin_api, "risk-profiles/team/", {"auto_approve": ["web_fetch"]})
    assert response.json() == errors_of(
        ("risk_profiles.team.auto_approve", f'unknown tool "web_fetch" in auto_approve; known tools: {KNOWN}')
    )


def test_an_import_leaves_out_zeroclaw_tools_with_one_warning_but_refuses_a_near_miss(
    admin_api: APIClient,
) -> None:
    text = BASE_TOML.replace(
        '[risk_profiles.team]\nexcluded_tools = ["model_switch"]\n',
        '[risk_profiles.team]\nexcluded_tools = ["model_switch"]\n'
        'auto_approve = ["web_fetch", "file_read", "browser", "github__create_issue"]\n',
    )
    response = post_toml(admin_api, text, "?dry_run=true")
    assert response.status_code == 200
    assert response.json()["warnings"] == [
        'risk_profiles.team.auto_approve: left out "web_fetch", "browser" '
        "(ZeroClaw tools that Clawboard does not provide)",
        'risk_profiles.team.auto_approve: left out "github__create_issue" '
        "(tools of MCP servers this file does not configure)",
    ]
    typo = BASE_TOML.replace('excluded_tools = ["model_switch"]', 'excluded_tools = ["model_swich"]')
    response = post_toml(admin_api, typo)
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "risk_profiles.team.excluded_tools",
            f'unknown tool "model_swich" in excluded_tools; known tools: {KNOWN} (did you mean "model_switch"?)',
        )
    )


def test_the_command_line_refuses_an_unknown_tool(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(BASE_TOML.replace('always_ask = [" shell ", "", "file_write"]', 'always_ask = ["shel"]'))
    with pytest.raises(CommandError) as refused:
        call_command("clawboard_config", "import", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert (
        str(refused.value)
        == f'unknown tool "shel" in always_ask; known tools: {KNOWN} (did you mean "shell"?)'
    )


def test_the_dashboard_refuses_an_unknown_tool_and_shows_saved_unknown_entries(admin_page: Client) -> None:
    # A name saved before names were checked (an old revision may hold one) is shown, never hidden.
    RiskProfile.objects.filter(alias="solo").update(always_ask=["shel"])
    config_snapshot_forget()  # a write without a revision, as an older version's row
    page = admin_page.get("/risk-profiles/solo/").content.decode()
    assert 'name="ask__shel" checked' in page
    assert "shel (unknown)" in page
    form = {
        "alias": "solo",
        "level": "supervised",
        "workspace_only": "on",
        "delegation_mode": "forbidden",
        "ask__shel": "on",
    }
    response = admin_page.post("/risk-profiles/solo/", form)
    assert response.status_code == 400
    assert (
        f"unknown tool &quot;shel&quot; in always_ask; known tools: {KNOWN} (did you mean &quot;shell&quot;?)"
        in (response.content.decode())
    )


def test_the_admin_refuses_an_unknown_tool(admin_page: Client) -> None:
    profile = RiskProfile.objects.get(alias="solo")
    url = f"/admin/policies_app/riskprofile/{profile.pk}/change/"
    page = admin_page.get(url)
    assert page.status_code == 200
    data = {
        "alias": "solo",
        "level": "supervised",
        "workspace_only": "on",
        "allowed_roots": "[]",
        "allowed_roots_read_only": "[]",
        "allowed_roots_write_only": "[]",
        "forbidden_paths": "[]",
        "allowed_commands": "[]",
        "shell_env_passthrough": "[]",
        "block_high_risk_commands": "on",
        "allowed_tools": "[]",
        "excluded_tools": "[]",
        "auto_approve": "[]",
        "always_ask": '["shel"]',
        "delegation_mode": "forbidden",
        "sandbox_enabled": "on",
        "sandbox_backend": "auto",
        "firejail_args": "[]",
    }
    response = admin_page.post(url, data)
    assert response.status_code == 200  # the form again, with the error
    assert "unknown tool &quot;shel&quot; in always_ask" in response.content.decode()
    assert RiskProfile.objects.get(alias="solo").always_ask == []


# --- 2. imports never lose anything silently -------------------------------------------------------


@pytest.mark.parametrize("value", ["maybe", "null", "", "yes", "on"])
def test_dry_run_accepts_only_true_false_1_0(admin_api: APIClient, value: str) -> None:
    before = config_state()
    response = post_toml(admin_api, "[delegate]\ntimeout_secs = 7\n", f"?dry_run={value}")
    assert response.status_code == 400
    assert response.json() == errors_of(
        ("dry_run", f'dry_run must be one of true, false, 1, 0 (got "{value}")')
    )
    assert config_state() == before


def test_the_delete_dry_run_and_prune_are_checked_the_same_way(admin_api: APIClient) -> None:
    before = config_state()
    response = admin_api.delete(f"{V1}/agents/beta/?dry_run=maybe")
    assert response.json() == errors_of(("dry_run", 'dry_run must be one of true, false, 1, 0 (got "maybe")'))
    response = post_toml(admin_api, "[delegate]\n", "?prune=null")
    assert response.json() == errors_of(("prune", 'prune must be one of true, false, 1, 0 (got "null")'))
    assert config_state() == before


def test_a_file_with_only_delegate_keeps_every_entry_and_lists_them(admin_api: APIClient) -> None:
    before = config_snapshot_get()
    response = post_toml(admin_api, "[delegate]\ntimeout_secs = 7\n", "?dry_run=0")
    assert response.status_code == 200
    body = response.json()
    assert body["changes"] == ["~ delegate: timeout_secs"]
    assert "agents.alpha" in body["kept"] and "providers.models.scripted.demo" in body["kept"]
    assert "= agents.alpha (not in the file: kept; prune=true deletes it)" in body["summary"]
    after = config_snapshot_get()
    assert after.agents == before.agents and after.providers == before.providers
    assert after.delegate.timeout_secs == 7


def test_prune_deletes_what_the_file_lacks_and_the_dry_run_shows_it(admin_api: APIClient) -> None:
    text = BASE_TOML.replace("[agents.verifier]\n", "[agents.gone]\n")
    text = text.split("[agents.gone]")[0]
    dry = post_toml(admin_api, text, "?dry_run=true&prune=true").json()
    assert "- agents.verifier" in dry["changes"]
    assert dry["kept"] == []
    assert "verifier" in config_snapshot_get().agents
    assert post_toml(admin_api, text, "?prune=1").status_code == 200
    assert "verifier" not in config_snapshot_get().agents


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("", "(none)"),
        ('[gateway]\nport = 1\n[memory]\nbackend = "sqlite"\n', "gateway, memory"),
        ("schema_version = 3\n[cost]\nenabled = true\n", "schema_version, cost"),
    ],
)
def test_a_file_in_which_nothing_is_recognised_is_refused(admin_api: APIClient, text: str, seen: str) -> None:
    before = config_state()
    response = post_toml(admin_api, text)
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "",
            f"nothing in this file was recognised as Clawboard or ZeroClaw configuration; sections seen: {seen}",
        )
    )
    assert config_state() == before


def test_the_command_line_keeps_what_the_file_lacks_and_prunes_on_request(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("[delegate]\ntimeout_secs = 9\n")
    out = io.StringIO()
    call_command("clawboard_config", "import", str(path), stdout=out, stderr=io.StringIO())
    lines = out.getvalue().splitlines()
    assert lines[0] == "~ delegate: timeout_secs"
    assert "= agents.alpha (not in the file: kept; prune=true deletes it)" in lines
    assert lines[-1].startswith("imported: revision ")
    assert "alpha" in config_snapshot_get().agents
    call_command(
        "clawboard_config", "import", str(path), "--prune", stdout=io.StringIO(), stderr=io.StringIO()
    )
    assert config_snapshot_get().agents == {}


def test_the_dashboard_import_keeps_what_the_file_lacks(admin_page: Client) -> None:
    response = admin_page.post("/config/import/preview/", {"toml": "[delegate]\ntimeout_secs = 9\n"})
    body = response.content.decode()
    assert '<ul id="import-kept">' in body and "agents.alpha" in body
    assert admin_page.post("/config/import/", {"toml": "[delegate]\ntimeout_secs = 9\n"}).status_code == 302
    assert "alpha" in config_snapshot_get().agents


# --- 3. every revision can be restored ----------------------------------------------------------


def test_a_prompt_longer_than_its_cap_is_refused_at_the_field(admin_api: APIClient) -> None:
    response = patch(admin_api, "agents/alpha/", {"system_prompt": "x" * 1_500_000})
    assert response.status_code == 400
    assert response.json() == errors_of(
        ("agents.alpha.system_prompt", "agents.alpha.system_prompt is longer than 262144 characters")
    )


def test_a_configuration_that_would_not_import_again_is_refused(admin_api: APIClient) -> None:
    before = config_state()
    for alias in ("alpha", "beta", "gamma"):
        assert patch(admin_api, f"agents/{alias}/", {"system_prompt": "p" * 262_000}).status_code == 200
    response = patch(admin_api, "agents/loner/", {"system_prompt": "p" * 262_000})
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["field"] == ""
    assert error["message"].startswith("the configuration would be ")
    assert error["message"].endswith(
        f" bytes as TOML, more than the 1 MiB ({MAX_DOCUMENT_BYTES} bytes) an import accepts"
    )
    assert len(export_toml(config_snapshot_get()).encode()) <= MAX_DOCUMENT_BYTES
    assert config_state()["revisions"] == before["revisions"] + 3


def test_restoring_a_revision_that_cannot_be_read_is_a_400_with_the_reason(admin_api: APIClient) -> None:
    big = ConfigRevision.objects.create(
        summary="old", toml="[delegate]\n# " + "x" * MAX_DOCUMENT_BYTES + "\n"
    )
    response = admin_api.post(f"{V1}/config/revisions/{big.pk}/restore/")
    assert response.status_code == 400
    size = len(big.toml.encode())
    assert response.json() == errors_of(
        ("", f"revision {big.pk} cannot be read: configuration file is larger than 1 MiB ({size} bytes)")
    )
    typo = ConfigRevision.objects.create(summary="old", toml='[risk_profiles.x]\nalways_ask = ["shel"]\n')
    response = admin_api.post(f"{V1}/config/revisions/{typo.pk}/restore/")
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "risk_profiles.x.always_ask",
            f'unknown tool "shel" in always_ask; known tools: {KNOWN} (did you mean "shell"?)',
        )
    )


def test_every_revision_saved_restores(admin_api: APIClient) -> None:
    patch(admin_api, "agents/alpha/", {"system_prompt": "one"})
    patch(admin_api, "agents/alpha/", {"system_prompt": "two"})
    for revision in ConfigRevision.objects.all():
        response = admin_api.post(f"{V1}/config/revisions/{revision.pk}/restore/")
        assert response.status_code == 200, (revision.summary, response.json())


# --- 4. large input is bounded and fast --------------------------------------------------------


def test_a_list_over_its_cap_is_refused_before_any_other_work(admin_api: APIClient) -> None:
    before = config_state()
    response = patch(
        admin_api, "risk-profiles/team/", {"allowed_commands": [f"c{i}" for i in range(100_000)]}
    )
    assert response.status_code == 400
    assert response.json() == errors_of(
        (
            "risk_profiles.team.allowed_commands",
            "risk_profiles.team.allowed_commands has 100000 entries; at most 1000 are allowed",
        )
    )
    response = patch(admin_api, "risk-profiles/team/", {"forbidden_paths": ["/" + "a" * 5000]})
    assert response.json() == errors_of(
        (
            "risk_profiles.team.forbidden_paths[0]",
            "risk_profiles.team.forbidden_paths[0] is longer than 4096 characters",
        )
    )
    assert config_state() == before


@pytest.mark.django_db(transaction=True)  # no test transaction around it: in_atomic_block tells
def test_the_diff_and_summary_are_worked_out_before_the_write_transaction(
    admin_api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agents_app.services as services

    seen: list[bool] = []
    real = services.diff_texts

    def spy(before: str, after: str) -> str:
        seen.append(connection.in_atomic_block)
        return real(before, after)

    monkeypatch.setattr(services, "diff_texts", spy)
    assert (
        patch(
            admin_api, "risk-profiles/team/", {"allowed_commands": [f"c{i}" for i in range(1000)]}
        ).status_code
        == 200
    )
    assert seen and not any(seen)


def test_a_large_diff_is_correct_and_shows_only_what_changed() -> None:
    before = "".join(f'    "cmd{i}",\n' for i in range(20_000))
    after = before.replace('    "cmd1234",\n', "").replace('    "cmd19000",\n', '    "other",\n')
    diff = diff_texts(before, after)
    removed = [line for line in diff.splitlines() if line.startswith("-") and not line.startswith("---")]
    added = [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert removed == ['-    "cmd1234",', '-    "cmd19000",']
    assert added == ['+    "other",']
    assert diff.count("@@ -") == 2


def test_a_maximal_profile_is_saved(admin_api: APIClient) -> None:
    lists = {
        name: [f"/srv/{name}/{i:04d}" for i in range(1000)]
        for name in ("allowed_roots", "forbidden_paths", "allowed_commands")
    }
    response = patch(admin_api, "risk-profiles/team/", lists)
    assert response.status_code == 200, response.json()
    assert len(config_snapshot_get().risk_profiles["team"].allowed_commands) == 1000


# --- 5. text is clean everywhere ---------------------------------------------------------------


def test_control_characters_are_refused_with_one_message(admin_api: APIClient) -> None:
    before = config_state()
    response = patch(admin_api, "agents/alpha/", {"system_prompt": "hello\x00world"})
    assert response.json() == errors_of(
        (
            "agents.alpha.system_prompt",
            "agents.alpha.system_prompt must not contain control characters (found U+0000)",
        )
    )
    response = patch(
        admin_api, "risk-profiles/team/", {"forbidden_paths": ["/etc\x00"], "allowed_roots": ["/srv\t"]}
    )
    assert response.json() == errors_of(
        (
            "risk_profiles.team.allowed_roots[0]",
            "risk_profiles.team.allowed_roots[0] must not contain control characters (found U+0009)",
        ),
        (
            "risk_profiles.team.forbidden_paths[0]",
            "risk_profiles.team.forbidden_paths[0] must not contain control characters (found U+0000)",
        ),
    )
    assert config_state() == before


def test_tabs_and_newlines_are_fine_in_prompts(admin_api: APIClient) -> None:
    response = patch(admin_api, "agents/alpha/", {"system_prompt": "one\n\ttwo\r\nthree"})
    assert response.status_code == 200
    assert config_snapshot_get().agents["alpha"].system_prompt == "one\n\ttwo\r\nthree"


def test_a_toml_import_with_a_nul_is_refused_with_the_same_message(admin_api: APIClient) -> None:
    text = BASE_TOML.replace("[agents.loner]\n", '[agents.loner]\nsystem_prompt = "a\\u0000b"\n')
    response = post_toml(admin_api, text)
    assert response.json() == errors_of(
        (
            "agents.loner.system_prompt",
            "agents.loner.system_prompt must not contain control characters (found U+0000)",
        )
    )


def test_the_dashboard_form_refuses_a_nul_and_reads_crlf_as_newlines(admin_page: Client) -> None:
    form = {
        "alias": "loner",
        "enabled": "on",
        "model_provider": "scripted.demo",
        "risk_profile": "solo",
        "runtime_profile": "",
        "delegate_same_risk_profile": "on",
        "workspace": "",
        "delegable": "on",
        "delegate_agent": [""],
        "delegate_mode": ["bounded"],
    }
    response = admin_page.post("/agents/loner/", {**form, "system_prompt": "a\x00b"})
    assert response.status_code == 400
    assert (
        "agents.loner.system_prompt must not contain control characters (found U+0000)"
        in response.content.decode()
    )
    assert admin_page.post("/agents/loner/", {**form, "system_prompt": "a\r\nb"}).status_code == 302
    assert config_snapshot_get().agents["loner"].system_prompt == "a\nb"


# --- 6. what runs is what was validated ----------------------------------------------------------

BASE = "providers.models.scripted.demo"


@pytest.mark.parametrize(
    ("script", "path", "message"),
    [
        (
            [{"match": "(", "turns": [{"say": "x"}]}],
            f"{BASE}.script[0].match",
            f"{BASE}.script[0].match is not a valid regular expression "
            "(missing ), unterminated subpattern at position 0)",
        ),
        (
            [{"turns": [5]}],
            f"{BASE}.script[0].turns[0]",
            f"{BASE}.script[0].turns[0] must be a table with one of say, tool_calls, error, sleep_ms",
        ),
        (
            [{"turns": [{"sleep_ms": 1e30}]}],
            f"{BASE}.script[0].turns[0].sleep_ms",
            f"{BASE}.script[0].turns[0].sleep_ms must be an integer from 0 to 600000 (got 1e+30)",
        ),
        (
            [{"turns": [{"sleep_ms": -1}]}],
            f"{BASE}.script[0].turns[0].sleep_ms",
            f"{BASE}.script[0].turns[0].sleep_ms must be an integer from 0 to 600000 (got -1)",
        ),
        (
            [{"turns": [{"say": "hi {{promt}}"}]}],
            f"{BASE}.script[0].turns[0].say",
            f"{BASE}.script[0].turns[0].say uses unknown placeholder {{{{promt}}}}; "
            "known placeholders: {{agent}}, {{prompt}}, {{tool_results}}",
        ),
        (
            [{"turns": []}],
            f"{BASE}.script[0].turns",
            f"{BASE}.script[0].turns must be a non-empty list of turns",
        ),
        (
            [{"turns": [{"say": "a", "error": "b"}]}],
            f"{BASE}.script[0].turns[0]",
            f"{BASE}.script[0].turns[0] must have exactly one of say, tool_calls, error, sleep_ms",
        ),
    ],
)
def test_scripts_are_compiled_when_saved(admin_api: APIClient, script: Any, path: str, message: str) -> None:
    response = patch(admin_api, "providers/scripted.demo/", {"script": script})
    assert response.status_code == 400
    assert response.json() == errors_of((path, message))


def test_a_script_number_json_cannot_hold_is_refused(admin_api: APIClient) -> None:
    text = BASE_TOML.replace(
        '[providers.models.scripted.spare]\nmodel = "spare-1"\n',
        '[providers.models.scripted.spare]\nmodel = "spare-1"\n'
        'script = [{ turns = [{ tool_calls = [{ name = "shell", arguments = { n = inf } }] }] }]\n',
    )
    response = post_toml(admin_api, text)
    path = "providers.models.scripted.spare.script[0].turns[0].tool_calls[0].arguments.n"
    assert response.json() == errors_of((path, f"{path} must be a finite number (got inf)"))


def test_prices_are_bounded(admin_api: APIClient) -> None:
    response = patch(admin_api, "providers/scripted.demo/", {"pricing": {"input_per_mtok_cents": 1e308}})
    assert response.json() == errors_of(
        (
            f"{BASE}.pricing.input_per_mtok_cents",
            f"{BASE}.pricing.input_per_mtok_cents must be a number from 0 to 10000 (got 1e+308)",
        )
    )
    ok = patch(admin_api, "providers/scripted.demo/", {"pricing": {"input_per_mtok_cents": 10000}})
    assert ok.status_code == 200


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 0 31 2 *", 'cron expression "0 0 31 2 *" never fires: day 31 does not occur in February'),
        (
            "0 0 30,31 2 *",
            'cron expression "0 0 30,31 2 *" never fires: day 30,31 does not occur in February',
        ),
        (
            "0 0 * * * *",
            'cron expression "0 0 * * * *" must have five fields (minute hour day-of-month month day-of-week); got 6',
        ),
        (
            "@daily",
            'cron expression "@daily" must have five fields (minute hour day-of-month month day-of-week); got 1',
        ),
        ("61 * * * *", 'cron expression "61 * * * *" is not valid'),
    ],
)
def test_a_cron_that_cannot_fire_or_is_not_five_fields_is_refused(cron: str, message: str) -> None:
    operator = APIClient()
    _, _, token = user_create_or_update(username="sched", role="operator")
    operator.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = operator.post(
        f"{V1}/schedules/", {"name": "n", "agent": "alpha", "prompt": "p", "cron": cron}, format="json"
    )
    assert response.status_code == 400
    assert response.json() == errors_of(("cron", message))
    fine = operator.post(
        f"{V1}/schedules/",
        {"name": "n", "agent": "alpha", "prompt": "p", "cron": "0 0 29 2 *"},
        format="json",
    )
    assert fine.status_code == 201


# --- 7. secrets are kept, encrypted, and never shown ---------------------------------------------

OPENAI = {"type": "openai", "alias": "keyed", "model": "gpt-4o-mini", "api_key": "sk-very-secret"}


def test_an_api_key_is_stored_encrypted_and_never_shown(admin_api: APIClient) -> None:
    response = admin_api.post(f"{V1}/providers/", OPENAI, format="json")
    assert response.status_code == 201
    assert response.json()["api_key"] == "********"
    row = ModelProvider.objects.get(type="openai", alias="keyed")
    assert "sk-very-secret" not in row.api_key
    assert secrets.decrypt(row.api_key) == "sk-very-secret"
    shown = [
        admin_api.get(f"{V1}/providers/openai.keyed/").content.decode(),
        admin_api.get(f"{V1}/config/").content.decode(),
        admin_api.get(f"{V1}/config/?format=toml").content.decode(),
        ConfigRevision.objects.order_by("-id")[0].toml,
        ConfigRevision.objects.order_by("-id")[0].diff,
    ]
    assert all("sk-very-secret" not in text and row.api_key not in text for text in shown)
    assert 'api_key = "********"' in shown[2]


def test_sending_the_mask_back_keeps_the_key_and_changes_nothing(admin_api: APIClient) -> None:
    admin_api.post(f"{V1}/providers/", OPENAI, format="json")
    token = ModelProvider.objects.get(alias="keyed").api_key
    revisions = ConfigRevision.objects.count()
    assert patch(admin_api, "providers/openai.keyed/", {"api_key": "********"}).status_code == 200
    assert patch(admin_api, "providers/openai.keyed/", {"api_key": "sk-very-secret"}).status_code == 200
    assert ModelProvider.objects.get(alias="keyed").api_key == token
    assert ConfigRevision.objects.count() == revisions
    export = admin_api.get(f"{V1}/config/?format=toml").content.decode()
    response = post_toml(admin_api, export)
    assert response.status_code == 200 and response.json()["changes"] == []
    assert ModelProvider.objects.get(alias="keyed").api_key == token
    changed = post_toml(
        admin_api, export.replace('api_key = "********"', 'api_key = "sk-new"'), "?dry_run=true"
    )
    assert changed.json()["changes"] == ["~ providers.models.openai.keyed: api_key"]
    assert "sk-new" not in changed.content.decode()


def test_the_mask_without_a_stored_key_is_refused(admin_api: APIClient) -> None:
    response = admin_api.post(f"{V1}/providers/", {**OPENAI, "api_key": "********"}, format="json")
    path = "providers.models.openai.keyed.api_key"
    assert response.json() == errors_of(
        (
            path,
            f'{path} = "********" stands for the stored key, but no key is stored for this provider; '
            "give the key itself, or leave api_key out",
        )
    )


def test_a_zeroclaw_api_key_imports_and_the_provider_uses_it(
    admin_api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (
        BASE_TOML
        + '\n[providers.models.openai.zc]\nmodel = "gpt-4o"\napi_key = "sk-zc"\napi_key_env = "ZC_KEY"\n'
    )
    assert post_toml(admin_api, text).status_code == 200
    spec = config_snapshot_get().providers["openai.zc"]
    monkeypatch.delenv("ZC_KEY", raising=False)
    assert secrets.provider_api_key(spec) == "sk-zc"
    monkeypatch.setenv("ZC_KEY", "sk-from-env")
    assert secrets.provider_api_key(spec) == "sk-from-env"  # api_key_env wins when it is set

    from runs_app.engine.providers.openai_compat import api_key_for

    assert api_key_for(spec) == "sk-from-env"


def test_a_zeroclaw_encrypted_key_is_left_out_with_a_warning(admin_api: APIClient) -> None:
    text = BASE_TOML + '\n[providers.models.openai.zc]\nmodel = "gpt-4o"\napi_key = "enc2:abcdef"\n'
    response = post_toml(admin_api, text, "?dry_run=true")
    assert response.json()["warnings"] == [
        "providers.models.openai.zc.api_key is encrypted with ZeroClaw's secret store; left out "
        "(give the key itself, or use api_key_env)"
    ]


def test_embedded_mode_generates_a_private_key_file(tmp_path: Path, settings: Any) -> None:
    settings.DATA_DIR = tmp_path
    settings.CLAWBOARD_ENCRYPTION_KEY = ""
    token = secrets.encrypt("k")
    path = tmp_path / "encryption-key.txt"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert secrets.decrypt(token) == "k"


def test_scale_out_without_a_key_refuses_to_store_one(admin_api: APIClient, settings: Any) -> None:
    settings.CLAWBOARD_ENCRYPTION_KEY = ""
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:6379/0"
    response = admin_api.post(f"{V1}/providers/", OPENAI, format="json")
    path = "providers.models.openai.keyed.api_key"
    assert response.json() == errors_of(
        (
            path,
            f"{path} cannot be stored: CLAWBOARD_ENCRYPTION_KEY is not set; a scale-out deployment "
            "needs it to keep provider keys",
        )
    )


def test_key_rotation_re_encrypts_every_stored_key(
    admin_api: APIClient, tmp_path: Path, settings: Any
) -> None:
    settings.DATA_DIR = tmp_path
    settings.CLAWBOARD_ENCRYPTION_KEY = ""
    admin_api.post(f"{V1}/providers/", OPENAI, format="json")
    old_token = ModelProvider.objects.get(alias="keyed").api_key
    old_key = (tmp_path / "encryption-key.txt").read_text().strip()
    out = io.StringIO()
    call_command("clawboard_rotate_key", "--new-key", "--drop-old", stdout=out)
    assert out.getvalue().strip() == "re-encrypted 1 provider key(s) and 0 MCP secret(s) with the current key"
    new_key = (tmp_path / "encryption-key.txt").read_text().strip()
    assert new_key != old_key and "\n" not in new_key
    row = ModelProvider.objects.get(alias="keyed")
    assert row.api_key != old_token
    assert secrets.decrypt(row.api_key) == "sk-very-secret"


def test_the_dashboard_form_shows_the_mask_and_keeps_the_key(
    admin_page: Client, admin_api: APIClient
) -> None:
    admin_api.post(f"{V1}/providers/", OPENAI, format="json")
    token = ModelProvider.objects.get(alias="keyed").api_key
    page = admin_page.get("/providers/openai.keyed/").content.decode()
    assert 'type="password" name="api_key" value="********"' in page
    assert "sk-very-secret" not in page and token not in page


# --- 8. ZeroClaw files come across whole ----------------------------------------------------------


def test_the_zeroclaw_defaults() -> None:
    spec = RiskProfileSpec(alias="x")
    assert DEFAULT_ALLOWED_COMMANDS == tuple(
        "git npm cargo ls cat grep find echo pwd wc head tail date df du uname uptime hostname python "
        "python3 pip node free".split()
    )
    assert spec.allowed_commands == DEFAULT_ALLOWED_COMMANDS
    assert spec.auto_approve == ("file_read", "memory_recall")
    read = parse_toml('[risk_profiles.p]\nauto_approve = ["shell"]\n').snapshot.risk_profiles["p"]
    assert read.auto_approve == ("shell", "file_read", "memory_recall")


def test_a_provider_without_model_takes_its_family_default(admin_api: APIClient) -> None:
    text = BASE_TOML + "\n[providers.models.openai.nomodel]\n"
    response = post_toml(admin_api, text)
    assert response.status_code == 200
    assert response.json()["warnings"] == [
        'providers.models.openai.nomodel.model is not set; using the openai default "gpt-4o-mini"'
    ]
    assert config_snapshot_get().providers["openai.nomodel"].model == "gpt-4o-mini"
    response = post_toml(admin_api, BASE_TOML + "\n[providers.models.vllm.nomodel]\n")
    base = "providers.models.vllm.nomodel"
    assert response.json() == errors_of(
        (
            f"{base}.model",
            f"{base}.model is empty; a model is required for every provider type except scripted",
        )
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("4", "schema_version 4 is newer than Clawboard can import (ZeroClaw schema versions 1 to 3)"),
        ('"two"', "schema_version must be a positive integer (got 'two')"),
        ("0", "schema_version must be a positive integer (got 0)"),
    ],
)
def test_a_schema_version_clawboard_cannot_read_is_refused_naming_it(
    admin_api: APIClient, value: str, message: str
) -> None:
    response = post_toml(admin_api, f"schema_version = {value}\n" + BASE_TOML)
    assert response.status_code == 400
    assert response.json() == errors_of(("schema_version", message))


V1_FILE = """\
api_key = "sk-example"
default_provider = "myprovider"
default_model = "my-model"
default_temperature = 0.7

[model_providers.myprovider]
base_url = "https://api.myprovider.example.com/v1"
api_path = "/chat/completions"
timeout_secs = 120

[agent]
max_tool_iterations = 12
parallel_tools = true
compact_context = true

[autonomy]
level = "supervised"
allowed_commands = ["git", "cargo"]
auto_approve = ["read_file", "list_directory", "web_fetch"]
max_actions_per_hour = 100
non_cli_excluded_tools = []

[gateway]
port = 3000
"""


def test_a_v1_zeroclaw_file_is_migrated_and_says_what_was_left_out(admin_api: APIClient) -> None:
    response = post_toml(admin_api, V1_FILE, "?prune=true")
    assert response.status_code == 200, response.json()
    assert response.json()["warnings"] == [
        "read a ZeroClaw schema 1 file and moved it to the current layout",
        "model_providers.myprovider -> providers.models.myprovider.default",
        "top-level api_key, default_model, default_temperature -> providers.models.myprovider.default",
        'autonomy.auto_approve: read v1 tool name "read_file" as "file_read"',
        'autonomy.auto_approve: read v1 tool name "list_directory" as "file_list"',
        "autonomy -> risk_profiles.default and runtime_profiles.default",
        "agent -> runtime_profiles.default",
        "the main agent -> agents.default (model_provider = myprovider.default)",
        'skipped unknown field "model_providers.myprovider.api_path"',
        'skipped unknown field "autonomy.non_cli_excluded_tools"',
        'skipped unknown field "agent.compact_context"',
        'skipped unknown key "gateway"',
        'risk_profiles.default.auto_approve: left out "web_fetch" (ZeroClaw tools that Clawboard does not provide)',
    ]
    snap = config_snapshot_get()
    provider = snap.providers["myprovider.default"]
    assert (provider.model, provider.uri, provider.temperature, provider.timeout_secs) == (
        "my-model",
        "https://api.myprovider.example.com/v1",
        0.7,
        120,
    )
    assert secrets.decrypt(provider.api_key) == "sk-example"
    risk = snap.risk_profiles["default"]
    assert risk.allowed_commands == ("git", "cargo")
    assert risk.auto_approve == ("file_read", "file_list", "memory_recall")
    runtime = snap.runtime_profiles["default"]
    assert (runtime.max_tool_iterations, runtime.parallel_tools, runtime.max_actions_per_hour) == (
        12,
        True,
        100,
    )
    agent = snap.agents["default"]
    assert (agent.model_provider, agent.risk_profile, agent.runtime_profile) == (
        "myprovider.default",
        "default",
        "default",
    )


def test_a_legacy_file_whose_sections_are_all_skipped_is_refused(admin_api: APIClient) -> None:
    response = post_toml(admin_api, "schema_version = 2\n[gateway]\nport = 1\n[cost]\nenabled = true\n")
    assert response.json() == errors_of(
        (
            "",
            "nothing in this file was recognised as Clawboard or ZeroClaw configuration; "
            "sections seen: schema_version, gateway, cost",
        )
    )


# --- 10. REST query parameters are validated as documented -----------------------------------------


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ("limit=0", "limit", 'limit must be an integer from 1 to 500 (got "0")'),
        ("limit=501", "limit", 'limit must be an integer from 1 to 500 (got "501")'),
        ("limit=ten", "limit", 'limit must be an integer from 1 to 500 (got "ten")'),
        ("offset=-1", "offset", 'offset must be an integer of 0 or more (got "-1")'),
        ("format=", "format", 'format must be one of json, api (got "")'),
        ("format=xml", "format", 'format must be one of json, api (got "xml")'),
    ],
)
def test_run_list_query_parameters_are_field_errors(
    viewer_api: APIClient, query: str, field: str, message: str
) -> None:
    response = viewer_api.get(f"{V1}/runs/?{query}")
    assert response.status_code == 400
    assert response.json() == errors_of((field, message))


def test_limit_and_offset_errors_come_together_and_unknown_status_too(viewer_api: APIClient) -> None:
    response = viewer_api.get(f"{V1}/runs/?limit=0&offset=-2")
    assert response.json() == errors_of(
        ("limit", 'limit must be an integer from 1 to 500 (got "0")'),
        ("offset", 'offset must be an integer of 0 or more (got "-2")'),
    )
    assert viewer_api.get(f"{V1}/runs/?status=bogus").status_code == 400
    assert viewer_api.get(f"{V1}/runs/?limit=500&offset=0").status_code == 200


def test_an_unknown_export_format_is_a_field_error(viewer_api: APIClient) -> None:
    response = viewer_api.get(f"{V1}/config/?format=yaml")
    assert response.status_code == 400
    assert response.json() == errors_of(("format", 'format must be one of json, api, toml (got "yaml")'))


def test_zeroclaws_own_template_imports_its_ollama_provider_and_main_agent(admin_api: APIClient) -> None:
    # The shape of ZeroClaw's dev/config.template.toml: a v1 file whose api_key is Ollama's URL.
    text = (
        'workspace_dir = "/zeroclaw-data/workspace"\n'
        'api_key = "http://host.docker.internal:11434"\n'
        'default_provider = "ollama"\ndefault_model = "llama3.2"\ndefault_temperature = 0.7\n'
        "[gateway]\nport = 42617\n"
    )
    response = post_toml(admin_api, text, "?prune=true")
    assert response.status_code == 200, response.json()
    assert "providers.models.ollama.default: api_key holds a URL; read as uri" in response.json()["warnings"]
    changes = response.json()["changes"]
    assert {"+ providers.models.ollama.default", "+ risk_profiles.default", "+ agents.default"} <= set(
        changes
    )
    ollama = config_snapshot_get().providers["ollama.default"]
    assert (ollama.model, ollama.uri, ollama.temperature, ollama.api_key) == (
        "llama3.2",
        "http://host.docker.internal:11434",
        0.7,
        "",
    )
    assert config_snapshot_get().agents["default"].model_provider == "ollama.default"
