from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents_app.config_io import (
    ConfigParseError,
    ConfigShapeError,
    ImportResult,
    diff_snapshots,
    document_to_snapshot,
    export_toml,
    parse_toml,
    snapshot_to_document,
    summarize_diff,
)
from agents_app.snapshot import AgentSpec, ConfigSnapshot, DelegateEntry, ProviderSpec
from agents_app.validation import validate_snapshot
from policies_app.specs import DelegateGlobals, RiskProfileSpec, RuntimeProfileSpec, with_always_auto_approved

SCRIPT: list[dict[str, Any]] = [
    {"match": "review", "turns": [{"say": "looks good, {{agent}}", "usage": {"input": 10, "output": 3}}]},
    {
        "turns": [
            {
                "tool_calls": [
                    {"name": "delegate", "arguments": {"agent": "reviewer", "prompt": "{{prompt}}"}}
                ]
            },
            {"sleep_ms": 5},
            {"say": "done:\n{{tool_results}}"},
        ]
    },
]


def sample() -> ConfigSnapshot:
    return ConfigSnapshot(
        providers={
            "openai.gpt": ProviderSpec(
                type="openai",
                alias="gpt",
                model="gpt-4o-mini",
                uri="https://api.example.test/v1",
                api_key_env="OPENAI_API_KEY",
                temperature=0.2,
                max_tokens=2048,
                input_per_mtok_cents=15.0,
                output_per_mtok_cents=60.0,
                fallback_models=("gpt-4o",),
                fallback=("scripted.demo",),
            ),
            "scripted.demo": ProviderSpec(type="scripted", alias="demo", script=SCRIPT),
        },
        risk_profiles={
            "narrow": RiskProfileSpec(
                alias="narrow", level="readonly", excluded_tools=("shell", "file_write")
            ),
            "team": RiskProfileSpec(
                alias="team",
                allowed_commands=("*",),
                delegation_mode="allow",
                shell_env_passthrough=("HOME",),
            ),
        },
        runtime_profiles={
            "deep": RuntimeProfileSpec(
                alias="deep", agentic=True, agentic_timeout_secs=600, max_spawn_depth=3
            ),
        },
        agents={
            "coder": AgentSpec(
                alias="coder",
                model_provider="scripted.demo",
                risk_profile="team",
                runtime_profile="deep",
                system_prompt='You write code.\nQuote "carefully" \\ and test.',
                delegates=(DelegateEntry("reviewer"), DelegateEntry("verifier", "independent")),
                read_memory_from=("reviewer",),
                workspace="/srv/agents/coder",
            ),
            "reviewer": AgentSpec(alias="reviewer", model_provider="openai.gpt", risk_profile="team"),
            "verifier": AgentSpec(
                alias="verifier", model_provider="scripted.demo", risk_profile="narrow", delegable=False
            ),
        },
        delegate=DelegateGlobals(timeout_secs=90, max_concurrent_runs=4),
    )


# --- round trip ---------------------------------------------------------------------------------


def test_sample_is_valid() -> None:
    assert validate_snapshot(sample()) == []


def test_export_import_export_is_byte_identical() -> None:
    text = export_toml(sample())
    result = parse_toml(text)
    assert isinstance(result, ImportResult)
    assert result.warnings == []
    assert result.snapshot == sample()
    assert export_toml(result.snapshot) == text


def test_export_shape() -> None:
    text = export_toml(sample())
    assert text.startswith("[delegate]\ntimeout_secs = 90\n")
    assert '[providers.models.openai.gpt]\nmodel = "gpt-4o-mini"\n' in text
    assert "pricing = { input_per_mtok_cents = 15.0, output_per_mtok_cents = 60.0 }\n" in text
    assert '[[providers.models.scripted.demo.script]]\nmatch = "review"\n' in text
    assert '[risk_profiles.team.delegation_policy]\nmode = "allow"\n' in text
    assert (
        'delegates = [{ agent = "reviewer", mode = "bounded" }, { agent = "verifier", mode = "independent" }]\n'
        in text
    )
    assert '[agents.coder.workspace]\npath = "/srv/agents/coder"\n' in text
    assert 'system_prompt = """You write code.\nQuote "carefully" \\\\ and test."""\n' in text
    # Sections sorted by alias; absent optionals (no null in TOML) are not written.
    assert text.index("[agents.coder]") < text.index("[agents.reviewer]") < text.index("[agents.verifier]")
    assert text.index("[risk_profiles.narrow]") < text.index("[risk_profiles.team]")
    assert "delegation_timeout_secs" not in text
    assert "[agents.reviewer.workspace]" not in text


def test_export_of_an_empty_snapshot() -> None:
    text = export_toml(ConfigSnapshot())
    assert text == (
        "[delegate]\ntimeout_secs = 120\nagentic_timeout_secs = 300\nmax_background = 128\nmax_concurrent_runs = 8\n"
        "\n[mcp]\nenabled = true\ndeferred_loading = false\n"
    )
    assert parse_toml(text).snapshot == ConfigSnapshot()


def test_string_delegates_become_tables_on_export() -> None:
    text = """
[agents.coder]
model_provider = "scripted.demo"
delegates = ["reviewer", { agent = "ops", mode = "independent" }, { agent = "qa" }]
"""
    snapshot = parse_toml(text).snapshot
    assert snapshot.agents["coder"].delegates == (
        DelegateEntry("reviewer", "bounded"),
        DelegateEntry("ops", "independent"),
        DelegateEntry("qa", "bounded"),
    )
    exported = export_toml(snapshot)
    # Longer than one line allows, so one entry per line.
    assert (
        "delegates = [\n"
        '    { agent = "reviewer", mode = "bounded" },\n'
        '    { agent = "ops", mode = "independent" },\n'
        '    { agent = "qa", mode = "bounded" },\n'
        "]\n"
    ) in exported


def test_export_does_not_depend_on_script_key_order() -> None:
    reordered = [
        {"turns": rule["turns"], **{k: v for k, v in rule.items() if k != "turns"}} for rule in SCRIPT
    ]
    other = replace(
        sample(),
        providers={
            **sample().providers,
            "scripted.demo": ProviderSpec(type="scripted", alias="demo", script=reordered),
        },
    )
    assert export_toml(other) == export_toml(sample())


def test_ints_and_floats_export_the_same_whatever_their_source_type() -> None:
    as_ints = replace(
        sample(),
        providers={
            "openai.gpt": replace(sample().providers["openai.gpt"], input_per_mtok_cents=15, temperature=1)
        },
    )
    as_floats = replace(
        sample(),
        providers={
            "openai.gpt": replace(
                sample().providers["openai.gpt"], input_per_mtok_cents=15.0, temperature=1.0
            )
        },
    )
    assert export_toml(as_ints) == export_toml(as_floats)


# --- ZeroClaw config.toml -------------------------------------------------------------------------

ZEROCLAW_CONFIG = """\
schema_version = 3
default_agent = "coder"

[gateway]
host = "127.0.0.1"
port = 42617

[cost]
enabled = true
daily_limit_usd = 10.0

[memory]
backend = "sqlite"

[channels.telegram.main]
bot_token = "x"

[reliability]
provider_retries = 2

[providers.models.anthropic.claude]
api_key = "sk-secret"
kind = "anthropic"
model = "claude-sonnet-4"
temperature = 0.7
timeout_secs = 120
pricing = { input_per_mtok_cents = 300, output_per_mtok_cents = 1500 }
fallback = ["ollama.local"]

[providers.models.ollama.local]
uri = "http://localhost:11434"
model = "qwen2.5-coder"
native_tools = true

[providers.transcription.whisper]
model = "whisper-1"

[risk_profiles.default]
level = "supervised"
allowed_commands = ["git", "ls", "cargo"]
auto_approve = ["file_read", "memory_recall"]
allowed_paths = ["/srv/shared"]
sandbox_enabled = true

[risk_profiles.default.delegation_policy]
mode = "allow"

[risk_profiles.default.approval_route]
approver_channel = "telegram.main"

[risk_profiles.strict]
level = "readonly"
allowed_tools = ["__none__"]

[runtime_profiles.default]
agentic = true
max_tool_iterations = 15
max_history_messages = 80
delegation_timeout_secs = 90

[delegate]
timeout_secs = 100
agentic_timeout_secs = 400

[agents.default]
model_provider = "anthropic.claude"
risk_profile = "default"
runtime_profile = "default"
channels = ["telegram.main"]
delegates = ["coder"]

[agents.default.memory]
backend = "sqlite"

[agents.coder]
model_provider = "ollama.local"
risk_profile = "default"
skill_bundles = ["rust"]
delegates = [{ agent = "default", mode = "independent" }]

[agents.coder.workspace]
path = "/srv/agents/coder"
access = { default = "read" }
unrestricted_filesystem = false
read_memory_from = ["default"]
"""


def test_a_zeroclaw_config_imports_as_it_is_with_warnings() -> None:
    result = parse_toml(ZEROCLAW_CONFIG)
    assert result.warnings == [
        'skipped unknown key "schema_version"',
        'skipped unknown key "default_agent"',
        'skipped unknown key "gateway"',
        'skipped unknown key "cost"',
        'skipped unknown key "memory"',
        'skipped unknown key "channels"',
        'skipped unknown key "reliability"',
        'skipped unknown field "providers.models.anthropic.claude.kind"',
        'skipped unknown field "providers.models.ollama.local.native_tools"',
        'skipped unknown key "providers.transcription"',
        'skipped unknown field "risk_profiles.default.approval_route"',
        'risk_profiles.strict.allowed_tools = ["__none__"] was read as deny_all_tools = true',
        'skipped unknown field "runtime_profiles.default.max_history_messages"',
        'skipped unknown field "agents.default.channels"',
        'skipped unknown field "agents.default.memory"',
        'skipped unknown field "agents.coder.skill_bundles"',
        'skipped unknown field "agents.coder.workspace.access"',
        'skipped unknown field "agents.coder.workspace.unrestricted_filesystem"',
    ]
    snapshot = result.snapshot
    assert validate_snapshot(snapshot) == []

    claude = snapshot.providers["anthropic.claude"]
    assert (claude.model, claude.temperature, claude.timeout_secs) == ("claude-sonnet-4", 0.7, 120)
    assert (claude.input_per_mtok_cents, claude.output_per_mtok_cents) == (300.0, 1500.0)
    assert claude.fallback == ("ollama.local",)
    assert claude.api_key_env == ""
    assert claude.api_key == "sk-secret"  # kept (encrypted when saved), no longer dropped
    assert snapshot.providers["ollama.local"].uri == "http://localhost:11434"

    default_risk = snapshot.risk_profiles["default"]
    assert default_risk.delegation_mode == "allow"
    assert default_risk.allowed_roots == ("/srv/shared",)
    assert default_risk.allowed_commands == ("git", "ls", "cargo")
    strict = snapshot.risk_profiles["strict"]
    assert (strict.deny_all_tools, strict.allowed_tools, strict.delegation_mode) == (True, (), "forbidden")

    runtime = snapshot.runtime_profiles["default"]
    assert (runtime.agentic, runtime.max_tool_iterations, runtime.delegation_timeout_secs) == (True, 15, 90)
    assert snapshot.delegate == DelegateGlobals(timeout_secs=100, agentic_timeout_secs=400)

    assert snapshot.agents["default"].delegates == (DelegateEntry("coder", "bounded"),)
    coder = snapshot.agents["coder"]
    assert coder.delegates == (DelegateEntry("default", "independent"),)
    assert coder.workspace == "/srv/agents/coder"
    assert coder.read_memory_from == ("default",)

    # Export keeps only what Clawboard models, and reads back the same.
    exported = export_toml(snapshot)
    for absent in ("gateway", "schema_version", "sk-secret", "access", "channels", "__none__"):
        assert absent not in exported
    again = parse_toml(exported)
    assert again.warnings == []
    # The key is never exported: the mask stands for it (and keeps the stored one on import).
    masked = replace(claude, api_key="********")
    assert again.snapshot == replace(snapshot, providers={**snapshot.providers, "anthropic.claude": masked})


def test_workspace_may_also_be_a_plain_path() -> None:
    snapshot = parse_toml('[agents.a]\nworkspace = "/tmp/a"\n').snapshot
    assert snapshot.agents["a"].workspace == "/tmp/a"


def test_zeroclaw_sandbox_backends_import_as_bubblewrap_with_a_warning_naming_the_profile() -> None:
    result = parse_toml(
        '[risk_profiles.jail]\nsandbox_backend = "firejail"\nfirejail_args = ["--private"]\n'
        '[risk_profiles.lock]\nsandbox_backend = "landlock"\nsandbox_enabled = true\n'
    )
    jail, lock = result.snapshot.risk_profiles["jail"], result.snapshot.risk_profiles["lock"]
    assert (jail.sandbox_backend, jail.firejail_args) == ("bubblewrap", ("--private",))
    assert (lock.sandbox_backend, lock.sandbox_enabled) == ("bubblewrap", True)
    assert result.warnings == [
        'risk_profiles.jail.sandbox_backend = "firejail" was read as "bubblewrap", '
        "the only backend Clawboard runs shell under",
        'risk_profiles.lock.sandbox_backend = "landlock" was read as "bubblewrap", '
        "the only backend Clawboard runs shell under",
    ]
    assert validate_snapshot(result.snapshot) == []


def test_sandbox_settings_round_trip_on_export() -> None:
    risk = RiskProfileSpec(
        alias="open",
        shell_network=True,
        sandbox_enabled=False,
        sandbox_backend="bubblewrap",
        firejail_args=("--net=none", "--private"),
    )
    runtime = RuntimeProfileSpec(alias="tight", shell_max_cpu_secs=5, shell_max_processes=16)
    snapshot = ConfigSnapshot(risk_profiles={"open": risk}, runtime_profiles={"tight": runtime})
    text = export_toml(snapshot)
    assert "shell_network = true" in text and "sandbox_enabled = false" in text
    assert 'firejail_args = ["--net=none", "--private"]' in text
    assert "shell_max_processes = 16" in text
    again = parse_toml(text)
    assert again.warnings == []
    assert again.snapshot.risk_profiles["open"] == risk
    assert again.snapshot.runtime_profiles["tight"] == runtime
    assert export_toml(again.snapshot) == text


# --- errors -------------------------------------------------------------------------------------


def test_malformed_toml_reports_line_and_column() -> None:
    with pytest.raises(ConfigParseError) as caught:
        parse_toml('[agents.coder]\nmodel_provider = "scripted.demo"\nenabled = = true\n')
    assert caught.value.line == 3
    assert caught.value.column == 11
    assert str(caught.value) == "invalid TOML: Invalid value (at line 3, column 11)"


def test_bytes_are_accepted_and_must_be_utf8() -> None:
    assert (
        parse_toml(b'[agents.a]\nsystem_prompt = "caf\xc3\xa9"\n').snapshot.agents["a"].system_prompt
        == "café"
    )
    with pytest.raises(ConfigParseError, match=r"^configuration file is not valid UTF-8 \(at byte 31\)$"):
        parse_toml(b'[agents.a]\nsystem_prompt = "caf\xe9"\n')


def test_duplicate_sections_are_a_parse_error() -> None:
    with pytest.raises(ConfigParseError) as caught:
        parse_toml("[agents.a]\nenabled = true\n[agents.a]\nenabled = false\n")
    assert caught.value.line == 3


def test_files_over_one_mebibyte_are_refused() -> None:
    text = "# " + "x" * (1024 * 1024) + "\n"
    with pytest.raises(
        ConfigParseError, match=r"^configuration file is larger than 1 MiB \(1048579 bytes\)$"
    ):
        parse_toml(text)


def test_deep_nesting_is_refused() -> None:
    deep = "[providers.models.scripted.demo]\nscript = [{ a = " + "[" * 30 + "]" * 30 + " }]\n"
    with pytest.raises(ConfigParseError, match=r"^configuration nests deeper than 20 levels$"):
        parse_toml(deep)
    with pytest.raises(ConfigParseError, match="nests deeper"):
        parse_toml("x = " + "[" * 100_000 + "]" * 100_000)
    nested: Any = {}
    for _ in range(25):
        nested = {"n": nested}
    with pytest.raises(ConfigParseError, match="nests deeper"):
        document_to_snapshot({"gateway": nested})


def test_wrong_types_are_all_reported_together() -> None:
    text = """
[risk_profiles.x]
allowed_tools = "shell"
workspace_only = "yes"

[runtime_profiles.r]
max_spawn_depth = 2.5
delegation_timeout_secs = true

[agents.a]
delegates = [3, { agent = "b", mod = "independent" }, { mode = "bounded" }]
read_memory_from = ["b", 1]

[providers.models.scripted.s]
script = { say = "hi" }
pricing = { input_per_mtok_cents = "free" }

[delegate]
timeout_secs = "120"
"""
    with pytest.raises(ConfigShapeError) as caught:
        parse_toml(text)
    assert caught.value.errors == [
        ("risk_profiles.x.allowed_tools", "risk_profiles.x.allowed_tools must be a list of strings"),
        ("risk_profiles.x.workspace_only", "risk_profiles.x.workspace_only must be a boolean"),
        ("runtime_profiles.r.max_spawn_depth", "runtime_profiles.r.max_spawn_depth must be an integer"),
        (
            "runtime_profiles.r.delegation_timeout_secs",
            "runtime_profiles.r.delegation_timeout_secs must be an integer, or left out",
        ),
        ("agents.a.delegates[0]", "agents.a.delegates[0] must be an agent alias or a { agent, mode } table"),
        ("agents.a.delegates[1]", 'agents.a.delegates[1] has unknown field "mod"; expected agent and mode'),
        ("agents.a.delegates[2].agent", "agents.a.delegates[2].agent is missing"),
        ("agents.a.read_memory_from", "agents.a.read_memory_from must be a list of strings"),
        ("providers.models.scripted.s.script", "providers.models.scripted.s.script must be a list of tables"),
        (
            "providers.models.scripted.s.pricing.input_per_mtok_cents",
            "providers.models.scripted.s.pricing.input_per_mtok_cents must be a number",
        ),
        ("delegate.timeout_secs", "delegate.timeout_secs must be an integer"),
    ]
    assert str(caught.value).startswith("risk_profiles.x.allowed_tools must be a list of strings; ")


def test_sections_must_be_tables() -> None:
    with pytest.raises(ConfigShapeError) as caught:
        parse_toml('agents = "none"\nrisk_profiles = { x = 1 }\n')
    assert caught.value.errors == [
        ("agents", "agents must be a table"),
        ("risk_profiles.x", "risk_profiles.x must be a table"),
    ]


# --- JSON documents -------------------------------------------------------------------------------


def test_json_document_round_trip() -> None:
    document = snapshot_to_document(sample())
    text = json.dumps(document)
    result = document_to_snapshot(json.loads(text))
    assert result.warnings == []
    assert result.snapshot == sample()
    assert snapshot_to_document(result.snapshot) == document


def test_json_document_shape() -> None:
    document = snapshot_to_document(sample())
    assert list(document) == [
        "delegate",
        "providers",
        "risk_profiles",
        "runtime_profiles",
        "agents",
        "mcp",
        "mcp_bundles",
    ]
    assert document["agents"]["coder"]["delegates"] == [
        {"agent": "reviewer", "mode": "bounded"},
        {"agent": "verifier", "mode": "independent"},
    ]
    assert document["agents"]["coder"]["workspace"] == {"path": "/srv/agents/coder"}
    assert document["risk_profiles"]["team"]["delegation_policy"] == {"mode": "allow"}
    assert document["providers"]["models"]["openai"]["gpt"]["pricing"] == {
        "input_per_mtok_cents": 15.0,
        "output_per_mtok_cents": 60.0,
    }
    assert "temperature" not in document["providers"]["models"]["scripted"]["demo"]


def test_json_body_accepts_nulls_for_optionals_and_string_delegates() -> None:
    body = {
        "providers": {
            "models": {"openai": {"gpt": {"model": "gpt-4o", "temperature": None, "max_tokens": None}}}
        },
        "runtime_profiles": {"r": {"delegation_timeout_secs": None}},
        "agents": {"a": {"model_provider": "openai.gpt", "delegates": ["b"], "extra": 1}},
    }
    result = document_to_snapshot(body)
    assert result.warnings == ['skipped unknown field "agents.a.extra"']
    assert result.snapshot.providers["openai.gpt"].temperature is None
    assert result.snapshot.agents["a"].delegates == (DelegateEntry("b"),)


def test_a_document_must_be_an_object() -> None:
    with pytest.raises(ConfigShapeError):
        document_to_snapshot([1, 2])  # type: ignore[arg-type]


# --- diffs ----------------------------------------------------------------------------------------


def test_diff_of_equal_snapshots_is_empty() -> None:
    assert diff_snapshots(sample(), sample()) == ""
    assert summarize_diff(sample(), sample()) == []


def test_diff_and_summary() -> None:
    old = sample()
    agents = dict(old.agents)
    agents["coder"] = replace(
        agents["coder"], model_provider="openai.gpt", delegates=(DelegateEntry("reviewer"),)
    )
    del agents["verifier"]
    agents["planner"] = AgentSpec(alias="planner", model_provider="scripted.demo", risk_profile="team")
    risks = {"team": old.risk_profiles["team"], "wide": RiskProfileSpec(alias="wide", level="full")}
    new = replace(old, agents=agents, risk_profiles=risks, delegate=replace(old.delegate, timeout_secs=30))

    assert summarize_diff(old, new) == [
        "~ delegate: timeout_secs",
        "- risk_profiles.narrow",
        "+ risk_profiles.wide",
        "~ agents.coder: model_provider, delegates",
        "+ agents.planner",
        "- agents.verifier",
    ]
    diff = diff_snapshots(old, new)
    assert diff.startswith("--- current\n+++ new\n@@ ")
    assert "-timeout_secs = 90\n+timeout_secs = 30\n" in diff
    assert '-model_provider = "scripted.demo"\n+model_provider = "openai.gpt"\n' in diff
    assert "+[agents.planner]\n" in diff


def test_summary_names_removed_optional_fields() -> None:
    old = sample()
    gpt = replace(old.providers["openai.gpt"], temperature=None)
    new = replace(old, providers={**old.providers, "openai.gpt": gpt})
    assert summarize_diff(old, new) == ["~ providers.models.openai.gpt: temperature"]


# --- property: export → parse → export ------------------------------------------------------------

aliases = st.from_regex(r"[a-z0-9][a-z0-9_-]{0,12}", fullmatch=True)
texts = st.text(max_size=30)
str_tuples = st.lists(texts, max_size=4).map(tuple)
ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
small_ints = st.integers(min_value=-5, max_value=10_000)
floats = st.floats(allow_nan=False)
json_scalars = st.one_of(st.booleans(), ints, floats, texts)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
scripts = st.lists(st.dictionaries(texts, json_values, max_size=3), max_size=3)


@st.composite
def provider_specs(draw: st.DrawFn) -> ProviderSpec:
    ty = draw(st.sampled_from(["scripted", "openai", "ollama", "anthropic"]) | aliases)
    return ProviderSpec(
        type=ty,
        alias=draw(aliases),
        model=draw(texts),
        uri=draw(texts),
        api_key_env=draw(texts),
        temperature=draw(st.none() | floats),
        timeout_secs=draw(ints),
        max_tokens=draw(st.none() | ints),
        input_per_mtok_cents=draw(floats),
        output_per_mtok_cents=draw(floats),
        fallback_models=draw(str_tuples),
        fallback=draw(str_tuples),
        script=draw(scripts),
    )


@st.composite
def risk_specs(draw: st.DrawFn) -> RiskProfileSpec:
    return RiskProfileSpec(
        alias=draw(aliases),
        level=draw(st.sampled_from(["readonly", "supervised", "full"]) | texts),
        workspace_only=draw(st.booleans()),
        allowed_roots=draw(str_tuples),
        allowed_roots_read_only=draw(str_tuples),
        allowed_roots_write_only=draw(str_tuples),
        forbidden_paths=draw(str_tuples),
        allowed_commands=draw(str_tuples),
        shell_env_passthrough=draw(str_tuples),
        block_high_risk_commands=draw(st.booleans()),
        require_approval_for_medium_risk=draw(st.booleans()),
        # ["__none__"] is ZeroClaw's legacy deny-all sentinel; import rewrites it on purpose.
        allowed_tools=draw(str_tuples.filter(lambda t: t != ("__none__",))),
        excluded_tools=draw(str_tuples),
        # file_read and memory_recall are always merged in (SPEC §2.2), so a read snapshot has them.
        auto_approve=with_always_auto_approved(draw(str_tuples)),
        always_ask=draw(str_tuples),
        delegation_mode=draw(st.sampled_from(["forbidden", "allow"]) | texts),
        deny_all_tools=draw(st.booleans()),
    )


@st.composite
def runtime_specs(draw: st.DrawFn) -> RuntimeProfileSpec:
    return RuntimeProfileSpec(
        alias=draw(aliases),
        agentic=draw(st.booleans()),
        max_tool_iterations=draw(small_ints),
        max_actions_per_hour=draw(ints),
        max_cost_per_day_cents=draw(small_ints),
        shell_timeout_secs=draw(small_ints),
        max_delegation_depth=draw(small_ints),
        delegation_timeout_secs=draw(st.none() | small_ints),
        agentic_timeout_secs=draw(st.none() | small_ints),
        parallel_tools=draw(st.booleans()),
        max_tool_result_chars=draw(small_ints),
        tool_call_dedup_exempt=draw(str_tuples),
        max_spawn_depth=draw(small_ints),
        max_children_per_run=draw(small_ints),
        subagent_timeout_secs=draw(small_ints),
        max_output_tokens=draw(ints),
    )


@st.composite
def agent_specs(draw: st.DrawFn) -> AgentSpec:
    return AgentSpec(
        alias=draw(aliases),
        model_provider=draw(texts),
        risk_profile=draw(texts),
        runtime_profile=draw(texts),
        enabled=draw(st.booleans()),
        system_prompt=draw(st.text(max_size=200)),
        delegate_same_risk_profile=draw(st.booleans()),
        delegates=tuple(
            draw(
                st.lists(
                    st.builds(
                        DelegateEntry, agent=texts, mode=st.sampled_from(["bounded", "independent"]) | texts
                    ),
                    max_size=3,
                )
            )
        ),
        read_memory_from=draw(str_tuples),
        workspace=draw(texts),
        delegable=draw(st.booleans()),
    )


@st.composite
def snapshots(draw: st.DrawFn) -> ConfigSnapshot:
    providers = draw(st.lists(provider_specs(), max_size=3, unique_by=lambda p: p.ref))
    risks = draw(st.lists(risk_specs(), max_size=2, unique_by=lambda r: r.alias))
    runtimes = draw(st.lists(runtime_specs(), max_size=2, unique_by=lambda r: r.alias))
    agents = draw(st.lists(agent_specs(), max_size=3, unique_by=lambda a: a.alias))
    return ConfigSnapshot(
        providers={p.ref: p for p in sorted(providers, key=lambda p: p.ref)},
        risk_profiles={r.alias: r for r in sorted(risks, key=lambda r: r.alias)},
        runtime_profiles={r.alias: r for r in sorted(runtimes, key=lambda r: r.alias)},
        agents={a.alias: a for a in sorted(agents, key=lambda a: a.alias)},
        delegate=DelegateGlobals(
            timeout_secs=draw(ints),
            agentic_timeout_secs=draw(ints),
            max_background=draw(small_ints),
            max_concurrent_runs=draw(small_ints),
        ),
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_property_export_parse_export_is_identical(snapshot: ConfigSnapshot) -> None:
    text = export_toml(snapshot)
    result = parse_toml(text, zeroclaw=False)  # the format itself, not an import's ZeroClaw rules
    assert result.warnings == []
    assert result.snapshot == snapshot
    assert export_toml(result.snapshot) == text


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_property_json_document_round_trip(snapshot: ConfigSnapshot) -> None:
    document = snapshot_to_document(snapshot)
    result = document_to_snapshot(json.loads(json.dumps(document)))
    assert result.snapshot == snapshot
    assert snapshot_to_document(result.snapshot) == document


def test_infinite_prices_round_trip() -> None:
    spec = ProviderSpec(type="openai", alias="x", model="m", input_per_mtok_cents=math.inf)
    snapshot = ConfigSnapshot(providers={"openai.x": spec})
    assert parse_toml(export_toml(snapshot)).snapshot == snapshot


def test_mcp_server_limits_round_trip_on_export() -> None:
    runtime = RuntimeProfileSpec(alias="servers", mcp_max_cpu_secs=5, mcp_max_memory_mb=8192)
    text = export_toml(ConfigSnapshot(runtime_profiles={"servers": runtime}))
    assert "mcp_max_cpu_secs = 5" in text and "mcp_max_memory_mb = 8192" in text
    again = parse_toml(text)
    assert again.warnings == [] and again.snapshot.runtime_profiles["servers"] == runtime
