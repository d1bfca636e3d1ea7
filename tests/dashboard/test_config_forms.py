"""Admins edit the configuration through the dashboard forms: §2.5 messages inline and exact,
the tool permission grid, presets, dry-run delete, import preview and revisions."""

from __future__ import annotations

import html
import re
from typing import Any

from django.test import Client

from agents_app.config_io import export_toml
from agents_app.models import ConfigRevision
from agents_app.selectors import config_snapshot_get
from tests.dashboard.support import error_items, state, text_of


def agent_form(alias: str, **fields: Any) -> dict[str, Any]:
    """The POST body of the agent form, as the browser sends it (checkboxes: present = on)."""
    data: dict[str, Any] = {
        "alias": alias,
        "enabled": "on",
        "model_provider": "scripted.demo",
        "risk_profile": "team",
        "runtime_profile": "",
        "system_prompt": "",
        "delegate_same_risk_profile": "on",
        "workspace": "",
        "delegable": "on",
        "delegate_agent": [""],
        "delegate_mode": ["bounded"],
    }
    data.update(fields)
    return {k: v for k, v in data.items() if v is not None}


def risk_form(alias: str, **fields: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "alias": alias,
        "level": "supervised",
        "workspace_only": "on",
        "block_high_risk_commands": "on",
        "require_approval_for_medium_risk": "on",
        "sandbox_enabled": "on",
        "delegation_mode": "forbidden",
        "allowed_commands": "git\nls",
    }
    data.update(fields)
    return {k: v for k, v in data.items() if v is not None}


RUNTIME_DEFAULTS: dict[str, Any] = {
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


def text_of_html(fragment: str) -> str:
    return html.unescape(fragment)


# -- agents ------------------------------------------------------------------------------------


def test_an_admin_creates_an_agent_through_the_form(admin: Client) -> None:
    response = admin.post(
        "/agents/new/",
        agent_form(
            "writer",
            runtime_profile="agentic",
            system_prompt="You write.",
            delegate_agent=["gamma", "beta", ""],
            delegate_mode=["independent", "bounded", "bounded"],
            read_memory_from=["alpha"],
        ),
    )
    assert response.status_code == 302
    assert response["Location"] == "/agents/writer/"
    spec = config_snapshot_get().agents["writer"]
    assert spec.runtime_profile == "agentic"
    assert spec.system_prompt == "You write."
    assert [(d.agent, d.mode) for d in spec.delegates] == [("gamma", "independent"), ("beta", "bounded")]
    assert spec.read_memory_from == ("alpha",)
    page = text_of(admin.get("/agents/writer/"))
    assert "Agent writer saved." in page
    assert ConfigRevision.objects.order_by("-pk").first().summary == "create agents.writer"  # type: ignore[union-attr]


def test_an_admin_edits_an_agent_and_sees_its_roster_preview(admin: Client) -> None:
    response = admin.post("/agents/loner/", agent_form("loner", risk_profile="team", delegable=None))
    assert response.status_code == 302
    spec = config_snapshot_get().agents["loner"]
    assert spec.risk_profile == "team"
    assert spec.delegable is False
    preview = text_of(admin.post("/agents/loner/preview/", agent_form("loner", risk_profile="team")))
    assert re.search(r'<ul id="preview-roster">.*<li>alpha <span class="badge">bounded</span>', preview, re.S)


def test_renaming_an_agent_rewrites_the_references_to_it(admin: Client) -> None:
    response = admin.post(
        "/agents/beta/", agent_form("bravo", delegate_agent=[""], delegate_mode=["bounded"])
    )
    assert response.status_code == 302
    assert response["Location"] == "/agents/bravo/"
    snap = config_snapshot_get()
    assert "beta" not in snap.agents
    assert [d.agent for d in snap.agents["gamma"].delegates] == ["bravo"]
    assert snap.agents["alpha"].read_memory_from == ("bravo",)


def test_every_validation_error_is_shown_inline_with_the_exact_message(admin: Client) -> None:
    before = state()
    response = admin.post(
        "/agents/new/",
        agent_form(
            "zed",
            model_provider="nodots",
            risk_profile="",
            delegate_agent=["zed", "nobody", "beta", "beta"],
            delegate_mode=["bounded", "bounded", "bounded", "independent"],
        ),
    )
    assert response.status_code == 400
    assert error_items(response) == [
        'agents.zed.model_provider must be dotted form <type>.<alias> (got "nodots")',
        "agents.zed.risk_profile must reference a configured [risk_profiles.<alias>] entry",
        'agents.zed.delegates[0].agent = "zed" names this agent itself; an agent cannot delegate to itself',
        'agents.zed.delegates[1].agent = "nobody" but agents.nobody is not configured',
        'agents.zed.delegates[3].agent = "beta" duplicates an earlier delegate target',
    ]
    assert state() == before


def test_missing_and_unknown_references_get_their_own_messages(admin: Client) -> None:
    response = admin.post("/agents/new/", agent_form("zed", model_provider="", runtime_profile="ghost"))
    assert error_items(response) == [
        'agents.zed.model_provider must reference a configured model provider (e.g. "scripted.demo")',
        'agents.zed.runtime_profile = "ghost" but runtime_profiles.ghost is not configured',
    ]
    response = admin.post(
        "/agents/new/", agent_form("zed", model_provider="openai.gone", risk_profile="ghost")
    )
    assert error_items(response) == [
        'agents.zed.model_provider = "openai.gone" but [providers.models.openai.gone] is not configured',
        'agents.zed.risk_profile = "ghost" but risk_profiles.ghost is not configured',
    ]


def test_blank_delegate_rows_are_dropped(admin: Client) -> None:
    """The form always shows one empty row to add a delegate; blank rows are not entries."""
    response = admin.post(
        "/agents/alpha/",
        agent_form(
            "alpha",
            runtime_profile="agentic",
            read_memory_from=["beta"],
            delegate_agent=["", "gamma", " "],
            delegate_mode=["bounded", "independent", "bounded"],
        ),
    )
    assert response.status_code == 302
    assert [(d.agent, d.mode) for d in config_snapshot_get().agents["alpha"].delegates] == [
        ("gamma", "independent")
    ]


def test_the_alias_default_is_reserved(admin: Client) -> None:
    before = state()
    response = admin.post("/agents/new/", agent_form("default"))
    assert response.status_code == 400
    assert error_items(response) == ["alias `default` is reserved and cannot be created"]
    assert state() == before


def test_an_admin_deletes_an_agent_after_seeing_the_dry_run_plan(admin: Client) -> None:
    before = state()
    page = admin.get("/agents/beta/delete/")
    plan = re.findall(r'<li class="mono">(.*?)</li>', page.content.decode())
    assert [text_of_html(x) for x in plan] == [
        "remove agents.beta",
        'remove "beta" from agents.alpha.read_memory_from',
        'remove { agent = "beta", mode = "bounded" } from agents.gamma.delegates',
        'remove { agent = "beta", mode = "bounded" } from agents.loner.delegates',
    ]
    assert state() == before  # the plan is a dry run
    response = admin.post("/agents/beta/delete/", {"confirm": "yes"})
    assert response.status_code == 302
    snap = config_snapshot_get()
    assert "beta" not in snap.agents
    assert snap.agents["gamma"].delegates == ()
    assert snap.agents["alpha"].read_memory_from == ()
    assert "Agent beta deleted." in text_of(admin.get("/agents/"))


def test_a_profile_still_in_use_cannot_be_deleted(admin: Client) -> None:
    before = state()
    page = admin.get("/risk-profiles/solo/delete/")
    assert "agents.loner.risk_profile must reference" not in text_of(page)
    assert 'agents.loner.risk_profile = "solo" but risk_profiles.solo is not configured' in error_items(page)
    assert 'id="confirm-delete"' not in page.content.decode()
    response = admin.post("/risk-profiles/solo/delete/", {"confirm": "yes"})
    assert response.status_code == 200
    assert state() == before


# -- risk profiles -------------------------------------------------------------------------------


def test_an_admin_creates_edits_renames_and_deletes_a_risk_profile(admin: Client) -> None:
    assert admin.post("/risk-profiles/new/", risk_form("careful")).status_code == 302
    assert config_snapshot_get().risk_profiles["careful"].allowed_commands == ("git", "ls")
    response = admin.post("/risk-profiles/careful/", risk_form("careful", level="readonly"))
    assert response.status_code == 302
    assert config_snapshot_get().risk_profiles["careful"].level == "readonly"
    response = admin.post("/risk-profiles/careful/", risk_form("cautious", level="readonly"))
    assert response["Location"] == "/risk-profiles/cautious/"
    snap = config_snapshot_get()
    assert "careful" not in snap.risk_profiles and snap.risk_profiles["cautious"].level == "readonly"
    assert admin.post("/risk-profiles/cautious/delete/", {"confirm": "yes"}).status_code == 302
    assert "cautious" not in config_snapshot_get().risk_profiles


def test_an_invalid_env_name_is_shown_inline_and_nothing_is_saved(admin: Client) -> None:
    before = state()
    response = admin.post(
        "/risk-profiles/team/",
        risk_form("team", delegation_mode="allow", shell_env_passthrough="HOME\n1BAD\nOK_2\nbad-name"),
    )
    assert response.status_code == 400
    assert error_items(response) == [
        "risk_profiles.team.shell_env_passthrough[1] is invalid (1BAD); expected [A-Za-z_][A-Za-z0-9_]*",
        "risk_profiles.team.shell_env_passthrough[3] is invalid (bad-name); expected [A-Za-z_][A-Za-z0-9_]*",
    ]
    # the messages sit next to the field they are about
    body = response.content.decode()
    assert body.index('id="error-shell_env_passthrough"') > body.index('name="shell_env_passthrough"')
    assert state() == before


def test_the_tool_permission_grid_round_trips(admin: Client) -> None:
    grid = {
        "allow__shell": "on",
        "allow__file_read": "on",
        "allow__delegate": "on",
        "exclude__delegate": "on",
        "ask__shell": "on",
        "auto__*": "on",
    }
    response = admin.post("/risk-profiles/team/", {**risk_form("team", delegation_mode="allow"), **grid})
    assert response.status_code == 302
    spec = config_snapshot_get().risk_profiles["team"]
    assert spec.allowed_tools == ("file_read", "shell", "delegate")
    assert spec.excluded_tools == ("delegate",)
    assert spec.always_ask == ("shell",)
    assert spec.auto_approve == ("*", "file_read", "memory_recall")  # these two are always merged in
    page = admin.get("/risk-profiles/team/").content.decode()
    checked = set(re.findall(r'<input type="checkbox" name="([a-z_]+__[a-z_*]+)" checked', page))
    assert checked == set(grid) | {"auto__file_read", "auto__memory_recall"}
    # saving the page as it is shown changes nothing: no new revision
    revisions = ConfigRevision.objects.count()
    config = export_toml(config_snapshot_get())
    assert (
        admin.post("/risk-profiles/team/", {**risk_form("team", delegation_mode="allow"), **grid}).status_code
        == 302
    )
    assert export_toml(config_snapshot_get()) == config
    assert ConfigRevision.objects.count() == revisions
    # and the preview shows the effective result of each row
    preview = text_of(admin.post("/risk-profiles/team/preview/", {**risk_form("team"), **grid}))
    rows = dict(
        re.findall(r"<tr><td>([a-z_]+)</td><td><span class=\"badge [^\"]+\">([a-z -]+)</span>", preview)
    )
    assert rows["shell"] == "always ask"
    assert rows["file_read"] == "auto-approve"
    assert rows["delegate"] == "denied"
    assert rows["file_write"] == "denied"


def test_presets_prefill_the_new_risk_profile_form(admin: Client) -> None:
    balanced = admin.get("/risk-profiles/new/?preset=balanced").content.decode()
    assert re.search(r'<option value="allow" selected>allow</option>', balanced)
    assert re.search(r'<textarea name="allowed_commands"[^>]*>\s*\*</textarea>', balanced)
    assert (
        'name="require_approval_for_medium_risk" id="id_require_approval_for_medium_risk" checked'
        not in balanced
    )
    assert 'name="block_high_risk_commands" id="id_block_high_risk_commands" checked' in balanced

    readonly = admin.get("/risk-profiles/new/?preset=read_only_role").content.decode()
    assert '<option value="readonly" selected>readonly</option>' in readonly
    excluded = set(re.findall(r'<input type="checkbox" name="exclude__([a-z_]+)" checked', readonly))
    assert excluded == {"file_write", "shell", "memory_store", "spawn_subagent", "delegate"}

    locked = admin.get("/risk-profiles/new/?preset=locked_down").content.decode()
    assert '<option value="forbidden" selected>forbidden</option>' in locked
    assert (
        'name="require_approval_for_medium_risk" id="id_require_approval_for_medium_risk" checked' in locked
    )

    # the prefilled form saves as the preset's values
    response = admin.post(
        "/risk-profiles/new/",
        risk_form("ro", level="readonly", **{f"exclude__{t}": "on" for t in excluded}),
    )
    assert response.status_code == 302
    assert set(config_snapshot_get().risk_profiles["ro"].excluded_tools) == excluded


# -- runtime profiles and providers --------------------------------------------------------------


def test_runtime_profiles_are_created_and_range_errors_shown(admin: Client) -> None:
    data = {"alias": "deep", **RUNTIME_DEFAULTS, "max_spawn_depth": 3, "agentic": "on"}
    assert admin.post("/runtime-profiles/new/", data).status_code == 302
    spec = config_snapshot_get().runtime_profiles["deep"]
    assert spec.max_spawn_depth == 3 and spec.agentic is True
    before = state()
    response = admin.post(
        "/runtime-profiles/deep/", {**data, "max_spawn_depth": 9, "max_children_per_run": 0}
    )
    assert response.status_code == 400
    assert error_items(response) == [
        "runtime_profiles.deep.max_spawn_depth must be between 1 and 5 (got 9)",
        "runtime_profiles.deep.max_children_per_run must be between 1 and 20 (got 0)",
    ]
    assert state() == before


def test_runtime_profiles_and_providers_are_renamed_and_deleted(admin: Client) -> None:
    data = {"alias": "roomy", **RUNTIME_DEFAULTS, "max_actions_per_hour": 5}
    response = admin.post("/runtime-profiles/spare/", data)
    assert response["Location"] == "/runtime-profiles/roomy/"
    snap = config_snapshot_get()
    assert "spare" not in snap.runtime_profiles
    assert snap.runtime_profiles["roomy"].max_actions_per_hour == 5
    assert admin.post("/runtime-profiles/roomy/delete/", {"confirm": "yes"}).status_code == 302
    assert "roomy" not in config_snapshot_get().runtime_profiles

    provider = {
        "type": "scripted",
        "alias": "extra",
        "model": "extra-1",
        "timeout_secs": 30,
        "input_per_mtok_cents": 1.5,
        "output_per_mtok_cents": 3,
    }
    response = admin.post("/providers/scripted.spare/", provider)
    assert response["Location"] == "/providers/scripted.extra/"
    spec = config_snapshot_get().providers["scripted.extra"]
    assert (spec.model, spec.timeout_secs) == ("extra-1", 30)
    assert "scripted.spare" not in config_snapshot_get().providers
    # a provider still used by an agent cannot go
    page = admin.get("/providers/scripted.demo/delete/")
    assert (
        'agents.alpha.model_provider = "scripted.demo" but [providers.models.scripted.demo] is not configured'
        in error_items(page)
    )
    assert admin.post("/providers/scripted.extra/delete/", {"confirm": "yes"}).status_code == 302
    assert "scripted.extra" not in config_snapshot_get().providers


def test_providers_are_created_and_a_bad_script_is_refused(admin: Client) -> None:
    data = {
        "type": "scripted",
        "alias": "echoer",
        "timeout_secs": 60,
        "input_per_mtok_cents": 0,
        "output_per_mtok_cents": 0,
        "script": '[{"turns": [{"say": "hi"}]}]',
    }
    assert admin.post("/providers/new/", data).status_code == 302
    assert config_snapshot_get().providers["scripted.echoer"].script == [{"turns": [{"say": "hi"}]}]
    before = state()
    response = admin.post("/providers/scripted.echoer/", {**data, "script": '[{"turns": ]'})
    assert response.status_code == 400
    assert error_items(response) == ["script must be JSON: Expecting value (line 1, column 12)"]
    assert state() == before


# -- import, export, revisions -------------------------------------------------------------------

IMPORT_TOML = """\
[providers.models.scripted.demo]
model = "demo-2"

[risk_profiles.team]

[agents.solo]
model_provider = "scripted.demo"
risk_profile = "team"

[gateway]
port = 8080
"""


def list_items(body: str, ul_id: str) -> list[str]:
    found = re.search(rf'<ul id="{ul_id}">(.*?)</ul>', body, re.S)
    assert found, ul_id
    return [text_of_html(li) for li in re.findall(r"<li[^>]*>(.*?)</li>", found.group(1))]


def test_the_import_preview_shows_the_diff_and_changes_nothing(admin: Client) -> None:
    before = state()
    response = admin.post("/config/import/preview/", {"toml": IMPORT_TOML, "prune": "true"})
    assert response.status_code == 200
    body = response.content.decode()
    assert list_items(body, "import-warnings") == ['skipped unknown key "gateway"']
    changes = list_items(body, "import-changes")
    assert "+ agents.solo" in changes
    assert "- agents.alpha" in changes
    assert "~ providers.models.scripted.demo: model, script" in changes
    text = text_of(response)
    assert '<span class="diff-del">-model = "demo-1"</span>' in text
    assert '<span class="diff-add">+model = "demo-2"</span>' in text
    assert state() == before


def test_a_malformed_file_shows_its_line_and_column(admin: Client) -> None:
    before = state()
    broken = '[agents.a]\nmodel_provider = "scripted.demo"\nrisk_profile = = "team"\n'
    response = admin.post("/config/import/preview/", {"toml": broken})
    items = error_items(response)
    assert len(items) == 1
    assert items[0].startswith("invalid TOML: ")
    assert "(at line 3, column 16)" in items[0]
    response = admin.post("/config/import/", {"toml": broken})
    assert response.status_code == 400
    assert error_items(response) == items
    assert state() == before


def test_an_uploaded_file_is_imported_after_the_preview(admin: Client) -> None:
    from django.core.files.uploadedfile import SimpleUploadedFile

    upload = SimpleUploadedFile("clawboard.toml", IMPORT_TOML.encode(), content_type="text/plain")
    response = admin.post("/config/import/", {"toml": "", "file": upload, "prune": "true"})
    assert response.status_code == 302
    snap = config_snapshot_get()
    assert sorted(snap.agents) == ["solo"]
    assert snap.providers["scripted.demo"].model == "demo-2"
    assert re.search(r"Configuration imported \(revision \d+\)\.", text_of(admin.get("/config/")))


def test_an_import_that_fails_validation_shows_every_error(admin: Client) -> None:
    before = state()
    bad = '[risk_profiles.team]\n[agents.a]\nmodel_provider = "x"\nrisk_profile = "team"\ndelegates = ["a"]\n'
    response = admin.post("/config/import/", {"toml": bad})
    assert response.status_code == 400
    assert error_items(response) == [
        'agents.a.model_provider must be dotted form <type>.<alias> (got "x")',
        'agents.a.delegates[0].agent = "a" names this agent itself; an agent cannot delegate to itself',
    ]
    assert state() == before


def test_a_revision_shows_its_diff_and_restores(admin: Client) -> None:
    original = export_toml(config_snapshot_get())
    first = ConfigRevision.objects.order_by("-pk").first()
    assert first is not None
    assert admin.post("/agents/loner/delete/", {"confirm": "yes"}).status_code == 302
    latest = ConfigRevision.objects.order_by("-pk").first()
    assert latest is not None and latest.summary == "delete agents.loner"
    page = text_of(admin.get(f"/config/revisions/{latest.pk}/"))
    assert '<span class="diff-del">-[agents.loner]</span>' in page
    listing = admin.get("/config/").content.decode()
    assert f'href="/config/revisions/{first.pk}/#restore-plan"' in listing
    response = admin.post(f"/config/revisions/{first.pk}/restore/", {"confirm": "yes"})
    assert response.status_code == 302
    assert export_toml(config_snapshot_get()) == original
    restored = ConfigRevision.objects.order_by("-pk").first()
    assert restored is not None and restored.pk != latest.pk
    assert f"Restored revision {first.pk} as revision {restored.pk}." in text_of(admin.get("/config/"))
