"""Whole-configuration validation (SPEC §2.5) and alias-reference rewrites.

Pure functions over a `ConfigSnapshot`: no ORM, no I/O. Every check runs, so one call
reports every error of a snapshot as `(field path, message)` pairs; callers save nothing
when the list is non-empty.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Iterable
from dataclasses import replace
from urllib.parse import urlsplit

from agents_app.scripts import script_errors
from agents_app.snapshot import (
    ALIAS_RE,
    DELEGATE_MODES,
    ENV_NAME_RE,
    MCP_MAX_TOOL_TIMEOUT_SECS,
    MCP_TRANSPORTS,
    RESERVED_AGENT_ALIAS,
    AgentSpec,
    ConfigSnapshot,
    DelegateEntry,
    McpBundleSpec,
    McpServerSpec,
    ProviderSpec,
)
from policies_app.policy import ALL_TOOLS, WILDCARD
from policies_app.specs import (
    DELEGATION_MODES,
    LEVELS,
    SANDBOX_BACKENDS,
    RiskProfileSpec,
    RuntimeProfileSpec,
)

Error = tuple[str, str]

ALIAS_PATTERN = "[a-z0-9][a-z0-9_-]{0,63}"
ENV_PATTERN = "[A-Za-z_][A-Za-z0-9_]*"
RESERVED_ALIAS_MESSAGE = f"alias `{RESERVED_AGENT_ALIAS}` is reserved and cannot be created"
# Integer columns are 32-bit on every database Clawboard runs on; larger values must be refused
# here, as a message, rather than fail at the database as a server error.
MAX_INT = 2_147_483_647
# Column widths of the string fields (agents_app.models.ModelProvider, Agent).
MAX_LENGTHS: dict[str, int] = {
    "type": 32,
    "model": 200,
    "uri": 500,
    "api_key_env": 128,
    "workspace": 500,
    # A prompt this long still fits in the 1 MiB an import accepts (the whole export is checked too).
    "system_prompt": 262_144,
    # agents_app.models.McpServer
    "command": 1000,
    "url": 2000,
}
MCP_NAME_PATTERN = "[A-Za-z0-9_-]{1,64}"
MCP_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# `__` separates the server from the tool in an MCP tool's name (`<server>__<tool>`).
MCP_SEPARATOR = "__"
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
# Caps on every list of the configuration (docs/configuration.md, "Limits"). They are checked
# when a document is read, before any other work, and again here for snapshots built otherwise.
MAX_LIST_ENTRIES = 1000
MAX_ENTRY_CHARS = 4096
# Cents per million tokens; anything above is a typo, and 1e308 would overflow cost sums.
MAX_PRICE_CENTS = 10_000

# NUL, the other C0 and C1 control characters, DEL and lone surrogates: PostgreSQL refuses NUL
# in text and surrogates in UTF-8, so they are refused everywhere, on every database alike.
# Prompts (and script texts) may hold tabs and newlines (CRLF too).
_CONTROL_LINE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]|\r(?!\n)")

# Tool-name lists and whether `"*"` is meaningful in them (SPEC §2.2: the approval lists).
# always_ask and auto_approve are read trimmed, blanks dropped (policies_app.policy); the
# allow/deny lists are exact names, so a padded name there is unknown.
RISK_TOOL_FIELDS: tuple[tuple[str, bool, bool], ...] = (
    ("allowed_tools", False, False),
    ("excluded_tools", False, False),
    ("auto_approve", True, True),
    ("always_ask", True, True),
)
_RISK_LIST_FIELDS: tuple[str, ...] = (
    "allowed_roots",
    "allowed_roots_read_only",
    "allowed_roots_write_only",
    "forbidden_paths",
    "allowed_commands",
    "shell_env_passthrough",
    "allowed_tools",
    "excluded_tools",
    "auto_approve",
    "always_ask",
)
KNOWN_TOOLS_TEXT = ", ".join(sorted(ALL_TOOLS))

# Runtime-profile integers where 0 is meaningful (a default or "none") but a negative is not.
_NON_NEGATIVE_RUNTIME_FIELDS: tuple[str, ...] = (
    "max_tool_iterations",
    "max_actions_per_hour",
    "max_cost_per_day_cents",
    "shell_timeout_secs",
    "max_delegation_depth",
    "max_tool_result_chars",
    "subagent_timeout_secs",
    "max_output_tokens",
    "shell_max_cpu_secs",
    "shell_max_memory_mb",
    "shell_max_file_size_mb",
    "shell_max_processes",
    "mcp_max_cpu_secs",
    "mcp_max_memory_mb",
    "mcp_max_file_size_mb",
    "mcp_max_processes",
)
_RANGED_RUNTIME_FIELDS: tuple[tuple[str, int, int], ...] = (
    ("max_spawn_depth", 1, 5),
    ("max_children_per_run", 1, 20),
)
_OPTIONAL_RUNTIME_TIMEOUTS: tuple[tuple[str, str], ...] = (
    ("delegation_timeout_secs", "timeout_secs"),
    ("agentic_timeout_secs", "agentic_timeout_secs"),
)


def quote(value: str) -> str:
    """Double-quoted with backslash escapes, like the Rust `{:?}` ZeroClaw's messages use."""
    return json.dumps(value, ensure_ascii=False)


def _choices(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def control_character_error(path: str, text: str, *, multiline: bool = False) -> Error | None:
    """The one message for a control character in any text field (tab and newline are allowed
    in prompts only)."""
    found = (_CONTROL_TEXT if multiline else _CONTROL_LINE).search(text)
    if found is None:
        return None
    return (path, f"{path} must not contain control characters (found U+{ord(found.group(0)[0]):04X})")


def _text_errors(path: str, text: str, *, multiline: bool = False) -> list[Error]:
    err = control_character_error(path, text, multiline=multiline)
    return [err] if err is not None else []


def list_cap_errors(path: str, values: Iterable[str]) -> list[Error]:
    """The size caps of one list: entries, and characters per entry."""
    items = list(values)
    if len(items) > MAX_LIST_ENTRIES:
        return [(path, f"{path} has {len(items)} entries; at most {MAX_LIST_ENTRIES} are allowed")]
    return [
        (f"{path}[{i}]", f"{path}[{i}] is longer than {MAX_ENTRY_CHARS} characters")
        for i, item in enumerate(items)
        if len(item) > MAX_ENTRY_CHARS
    ]


def _list_errors(path: str, values: tuple[str, ...]) -> list[Error]:
    errors = list_cap_errors(path, values)
    if errors:
        return errors
    for i, value in enumerate(values):
        errors.extend(_text_errors(f"{path}[{i}]", value))
    return errors


def edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def closest_tool(name: str) -> str | None:
    """The known tool within edit distance 2 of `name` (the nearest; ties alphabetically)."""
    ranked = sorted((edit_distance(name, tool), tool) for tool in ALL_TOOLS)
    distance, tool = ranked[0]
    return tool if distance <= 2 else None


def unknown_tool_message(name: str, field: str) -> str:
    message = f"unknown tool {quote(name)} in {field}; known tools: {KNOWN_TOOLS_TEXT}"
    near = closest_tool(name)
    if near is not None:
        message += f" (did you mean {quote(near)}?)"
    return message


def unknown_mcp_server_message(name: str, field: str) -> str:
    server = name.partition(MCP_SEPARATOR)[0]
    return (
        f"unknown MCP server {quote(server)} in {field} entry {quote(name)}; MCP tools are named "
        "<server>__<tool> after a configured [[mcp.servers]] entry"
    )


def tool_list_errors(
    path: str,
    field: str,
    names: tuple[str, ...],
    *,
    wildcard: bool,
    trimmed: bool,
    mcp_servers: Collection[str] = (),
) -> list[Error]:
    """One error (at the field) per name that is not a tool of the registry, nor an MCP tool
    (`<server>__<tool>`) of a configured server."""
    errors: list[Error] = []
    for raw in names:
        name = raw.strip() if trimmed else raw
        if trimmed and not name:
            continue
        if name in ALL_TOOLS or (wildcard and name == WILDCARD):
            continue
        server, separator, tool = name.partition(MCP_SEPARATOR)
        if separator and server and tool:
            if server not in mcp_servers:
                errors.append((path, unknown_mcp_server_message(name, field)))
            continue
        errors.append((path, unknown_tool_message(name, field)))
    return errors


def split_provider_ref(ref: str) -> tuple[str, str] | None:
    """`"<type>.<alias>"` → `(type, alias)`; None when it is not in dotted form."""
    ty, dot, alias = ref.partition(".")
    if not dot or not ty or not alias:
        return None
    return ty, alias


def validate_new_agent_alias(alias: str) -> str | None:
    """The REST/dashboard create-time rule: `default` is reserved (TOML imports may carry it)."""
    if alias == RESERVED_AGENT_ALIAS:
        return RESERVED_ALIAS_MESSAGE
    return None


def validate_snapshot(snapshot: ConfigSnapshot) -> list[Error]:
    errors: list[Error] = []
    for alias in sorted(snapshot.agents):
        errors.extend(_validate_agent(snapshot, alias, snapshot.agents[alias]))
    servers = snapshot.mcp_servers.keys()
    for alias in sorted(snapshot.risk_profiles):
        errors.extend(_validate_risk_profile(alias, snapshot.risk_profiles[alias], servers))
    for alias in sorted(snapshot.runtime_profiles):
        errors.extend(_validate_runtime_profile(alias, snapshot.runtime_profiles[alias], servers))
    for key in sorted(snapshot.providers):
        errors.extend(_validate_provider(snapshot, snapshot.providers[key]))
    errors.extend(_validate_delegate_globals(snapshot))
    errors.extend(validate_mcp(snapshot))
    return errors


# --- MCP servers and bundles ----------------------------------------------------------------------


def _separator_message(path: str, name: str) -> str:
    return (
        f'{path} = {quote(name)} contains "__", which no MCP name may contain '
        "(it separates server and tool in <server>__<tool>)"
    )


def _mcp_reference_errors(
    path: str, names: tuple[str, ...], known: Collection[str], what: str
) -> list[Error]:
    """Each entry of a list of MCP names: not empty, no `__`, configured, not repeated (ignoring case)."""
    errors: list[Error] = []
    seen: set[str] = set()
    for i, name in enumerate(names):
        where = f"{path}[{i}]"
        # Exact names, as the grant compares them: a padded name is an unknown one.
        if not name.strip():
            errors.append((where, f"{where} is empty; remove it or name a configured {what}"))
            continue
        if name.lower() in seen:
            errors.append(
                (
                    where,
                    f"{where} = {quote(name)} duplicates an earlier entry (names are compared ignoring case)",
                )
            )
        elif MCP_SEPARATOR in name:
            errors.append((where, _separator_message(where, name)))
        elif name not in known:
            missing = (
                f"mcp.servers has no server named {quote(name)}"
                if what == "MCP server"
                else f"mcp_bundles.{name} is not configured"
            )
            errors.append((where, f"{where} = {quote(name)} but {missing}"))
        seen.add(name.lower())
    return errors


def _url_error(path: str, url: str) -> Error | None:
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        ok = False
    return None if ok else (path, f"{path} = {quote(url)} is not an http(s) URL")


def _validate_mcp_server(spec: McpServerSpec, lowered: dict[str, str]) -> list[Error]:
    from agents_app import mcp_launchers

    errors: list[Error] = []
    base = f"mcp.servers.{spec.name}"
    path = f"{base}.name"
    if MCP_SEPARATOR in spec.name:
        errors.append((path, _separator_message(path, spec.name)))
    elif not MCP_NAME_RE.match(spec.name):
        errors.append((path, f"{path} = {quote(spec.name)} is invalid; expected {MCP_NAME_PATTERN}"))
    first = lowered[spec.name.lower()]
    if first != spec.name:
        errors.append(
            (
                path,
                f"{path} = {quote(spec.name)} duplicates {quote(first)}; MCP server names must be "
                "unique ignoring case",
            )
        )
    if spec.transport not in MCP_TRANSPORTS:
        path = f"{base}.transport"
        errors.append(
            (
                path,
                f"{path} = {quote(spec.transport)} is not a valid transport; "
                f"expected one of {_choices(MCP_TRANSPORTS)}",
            )
        )
    elif spec.transport == "stdio":
        path = f"{base}.command"
        launcher = mcp_launchers.parse(spec.command, spec.args)
        if not spec.command.strip():
            errors.append((path, f"{path} is empty; a stdio server needs a command"))
        elif launcher is not None:
            errors.append((path, launcher_message(path, launcher)))
    else:
        path = f"{base}.url"
        if not spec.url.strip():
            errors.append((path, f"{path} is empty; an {spec.transport} server needs an http(s) URL"))
        elif (err := _url_error(path, spec.url)) is not None:
            errors.append(err)
    timeout = spec.tool_timeout_secs
    if timeout is not None and not 1 <= timeout <= MCP_MAX_TOOL_TIMEOUT_SECS:
        path = f"{base}.tool_timeout_secs"
        errors.append((path, f"{path} must be between 1 and {MCP_MAX_TOOL_TIMEOUT_SECS} (got {timeout})"))
    for name in ("command", "url"):
        errors.extend(_too_long(f"{base}.{name}", name, getattr(spec, name)))
        errors.extend(_text_errors(f"{base}.{name}", getattr(spec, name)))
    errors.extend(_list_errors(f"{base}.args", spec.args))
    for key in spec.env:
        if not ENV_NAME_RE.match(key):
            path = f"{base}.env.{key}"
            errors.append((path, f"{path} is invalid ({key}); expected {ENV_PATTERN}"))
    for key in spec.headers:
        if not _HEADER_NAME_RE.match(key):
            path = f"{base}.headers.{key}"
            errors.append((path, f"{path} is not a valid HTTP header name"))
    return errors


def launcher_message(path: str, launcher: object) -> str:
    """A command that would download its server at start, and how to install it instead."""
    from pathlib import Path

    from django.conf import settings

    from agents_app import mcp_launchers

    assert isinstance(launcher, mcp_launchers.Launcher)
    install_dir = Path(settings.MCP_SERVERS_DIR)
    return (
        f"{path}: {quote(launcher.text)} downloads the server when it starts, and MCP servers run "
        f"without network; install it first ({mcp_launchers.install_hint(launcher, install_dir)}) "
        "and save again"
    )


def _validate_mcp_bundle(snapshot: ConfigSnapshot, alias: str, spec: McpBundleSpec) -> list[Error]:
    base = f"mcp_bundles.{alias}"
    errors: list[Error] = []
    if MCP_SEPARATOR in alias:
        errors.append((base, _separator_message(base, alias)))
    elif (err := _alias_error(base, alias)) is not None:
        errors.append(err)
    for name in ("servers", "exclude"):
        values = getattr(spec, name)
        caps = list_cap_errors(f"{base}.{name}", values)
        errors.extend(
            caps or _mcp_reference_errors(f"{base}.{name}", values, snapshot.mcp_servers, "MCP server")
        )
    return errors


def validate_mcp(snapshot: ConfigSnapshot) -> list[Error]:
    """`[[mcp.servers]]` and `[mcp_bundles.*]` (agents' `mcp_bundles` are checked with the agent)."""
    errors: list[Error] = []
    lowered: dict[str, str] = {}
    for name in snapshot.mcp_servers:
        lowered.setdefault(name.lower(), name)
    for spec in snapshot.mcp_servers.values():
        errors.extend(_validate_mcp_server(spec, lowered))
    for alias in sorted(snapshot.mcp_bundles):
        errors.extend(_validate_mcp_bundle(snapshot, alias, snapshot.mcp_bundles[alias]))
    return errors


def _too_large(path: str, value: int | None) -> list[Error]:
    if value is not None and value > MAX_INT:
        return [(path, f"{path} must be at most {MAX_INT} (got {value})")]
    return []


def _too_long(path: str, name: str, text: str) -> list[Error]:
    limit = MAX_LENGTHS[name]
    if len(text) > limit:
        return [(path, f"{path} is longer than {limit} characters")]
    return []


def _alias_error(path: str, alias: str) -> Error | None:
    if ALIAS_RE.match(alias):
        return None
    return (path, f"{path}: alias {quote(alias)} is invalid; expected {ALIAS_PATTERN}")


def _validate_agent(snapshot: ConfigSnapshot, a: str, agent: AgentSpec) -> list[Error]:
    errors: list[Error] = []
    base = f"agents.{a}"
    if (err := _alias_error(base, a)) is not None:
        errors.append(err)

    path = f"{base}.model_provider"
    mp = agent.model_provider
    if not mp.strip():
        errors.append((path, f'{path} must reference a configured model provider (e.g. "scripted.demo")'))
    elif (parts := split_provider_ref(mp)) is None:
        errors.append((path, f"{path} must be dotted form <type>.<alias> (got {quote(mp)})"))
    elif mp not in snapshot.providers:
        ty, inner = parts
        errors.append((path, f"{path} = {quote(mp)} but [providers.models.{ty}.{inner}] is not configured"))

    path = f"{base}.risk_profile"
    if not agent.risk_profile.strip():
        if agent.enabled:
            errors.append((path, f"{path} must reference a configured [risk_profiles.<alias>] entry"))
    elif agent.risk_profile not in snapshot.risk_profiles:
        errors.append(
            (
                path,
                f"{path} = {quote(agent.risk_profile)} but risk_profiles.{agent.risk_profile} is not configured",
            )
        )

    path = f"{base}.runtime_profile"
    if agent.runtime_profile and agent.runtime_profile not in snapshot.runtime_profiles:
        errors.append(
            (
                path,
                f"{path} = {quote(agent.runtime_profile)} but runtime_profiles.{agent.runtime_profile} "
                "is not configured",
            )
        )

    seen: set[str] = set()
    for i, entry in enumerate(agent.delegates):
        path = f"{base}.delegates[{i}].agent"
        target = entry.agent.strip()
        if not target:
            errors.append((path, f"{path} is empty; remove it or name a configured agent"))
        elif target == a:
            errors.append(
                (
                    path,
                    f"{path} = {quote(target)} names this agent itself; an agent cannot delegate to itself",
                )
            )
        elif target not in snapshot.agents:
            errors.append((path, f"{path} = {quote(target)} but agents.{target} is not configured"))
        elif target in seen:
            errors.append((path, f"{path} = {quote(target)} duplicates an earlier delegate target"))
        if target:
            seen.add(target)
        if entry.mode not in DELEGATE_MODES:
            mode_path = f"{base}.delegates[{i}].mode"
            errors.append(
                (
                    mode_path,
                    f"{mode_path} = {quote(entry.mode)} is not a valid mode; "
                    f"expected one of {_choices(DELEGATE_MODES)}",
                )
            )

    for i, other in enumerate(agent.read_memory_from):
        path = f"{base}.read_memory_from[{i}]"
        name = other.strip()
        if not name:
            errors.append((path, f"{path} is empty; remove it or name a configured agent"))
        elif name not in snapshot.agents:
            errors.append((path, f"{path} = {quote(name)} but agents.{name} is not configured"))
    errors.extend(_too_long(f"{base}.workspace", "workspace", agent.workspace))
    errors.extend(_too_long(f"{base}.system_prompt", "system_prompt", agent.system_prompt))
    for name in ("model_provider", "risk_profile", "runtime_profile", "workspace"):
        errors.extend(_text_errors(f"{base}.{name}", getattr(agent, name)))
    errors.extend(_text_errors(f"{base}.system_prompt", agent.system_prompt, multiline=True))
    if len(agent.delegates) > MAX_LIST_ENTRIES:
        errors.extend(list_cap_errors(f"{base}.delegates", [d.agent for d in agent.delegates]))
    else:
        for i, entry in enumerate(agent.delegates):
            errors.extend(_text_errors(f"{base}.delegates[{i}].agent", entry.agent))
            errors.extend(_text_errors(f"{base}.delegates[{i}].mode", entry.mode))
    errors.extend(_list_errors(f"{base}.read_memory_from", agent.read_memory_from))
    caps = list_cap_errors(f"{base}.mcp_bundles", agent.mcp_bundles)
    errors.extend(
        caps
        or _mcp_reference_errors(f"{base}.mcp_bundles", agent.mcp_bundles, snapshot.mcp_bundles, "MCP bundle")
    )
    return errors


def _validate_risk_profile(p: str, spec: RiskProfileSpec, mcp_servers: Collection[str] = ()) -> list[Error]:
    errors: list[Error] = []
    base = f"risk_profiles.{p}"
    if (err := _alias_error(base, p)) is not None:
        errors.append(err)
    if spec.level not in LEVELS:
        path = f"{base}.level"
        errors.append(
            (path, f"{path} = {quote(spec.level)} is not a valid level; expected one of {_choices(LEVELS)}")
        )
    if spec.delegation_mode not in DELEGATION_MODES:
        path = f"{base}.delegation_policy.mode"
        errors.append(
            (
                path,
                f"{path} = {quote(spec.delegation_mode)} is not a valid mode; "
                f"expected one of {_choices(DELEGATION_MODES)}",
            )
        )
    if spec.sandbox_backend not in SANDBOX_BACKENDS:
        path = f"{base}.sandbox_backend"
        errors.append(
            (
                path,
                f"{path} = {quote(spec.sandbox_backend)} is not a valid backend; "
                f"expected one of {_choices(SANDBOX_BACKENDS)}",
            )
        )
    caps = [
        err for name in _RISK_LIST_FIELDS for err in list_cap_errors(f"{base}.{name}", getattr(spec, name))
    ]
    if caps:  # a list over its caps: nothing more is worth checking (nor cheap)
        return errors + caps
    for name in _RISK_LIST_FIELDS:
        errors.extend(_list_errors(f"{base}.{name}", getattr(spec, name)))
    for i, name in enumerate(spec.shell_env_passthrough):
        if not ENV_NAME_RE.match(name) and control_character_error("", name) is None:
            path = f"{base}.shell_env_passthrough[{i}]"
            errors.append((path, f"{path} is invalid ({name}); expected {ENV_PATTERN}"))
    for name, wildcard, trimmed in RISK_TOOL_FIELDS:
        errors.extend(
            tool_list_errors(
                f"{base}.{name}",
                name,
                getattr(spec, name),
                wildcard=wildcard,
                trimmed=trimmed,
                mcp_servers=mcp_servers,
            )
        )
    for name in ("level", "delegation_mode"):
        errors.extend(_text_errors(f"{base}.{name}", getattr(spec, name)))
    return errors


def _validate_runtime_profile(
    r: str, spec: RuntimeProfileSpec, mcp_servers: Collection[str] = ()
) -> list[Error]:
    errors: list[Error] = []
    base = f"runtime_profiles.{r}"
    if (err := _alias_error(base, r)) is not None:
        errors.append(err)
    for name in _NON_NEGATIVE_RUNTIME_FIELDS:
        value = getattr(spec, name)
        if value < 0:
            path = f"{base}.{name}"
            errors.append((path, f"{path} must not be negative (got {value})"))
        errors.extend(_too_large(f"{base}.{name}", value))
    for name, global_name in _OPTIONAL_RUNTIME_TIMEOUTS:
        value = getattr(spec, name)
        if value is not None and value <= 0:
            path = f"{base}.{name}"
            errors.append(
                (
                    path,
                    f"{path} must be greater than 0 (got {value}); "
                    f"leave it unset to use delegate.{global_name}",
                )
            )
        errors.extend(_too_large(f"{base}.{name}", value))
    for name, low, high in _RANGED_RUNTIME_FIELDS:
        value = getattr(spec, name)
        if not low <= value <= high:
            path = f"{base}.{name}"
            errors.append((path, f"{path} must be between {low} and {high} (got {value})"))
    path = f"{base}.tool_call_dedup_exempt"
    list_errors = _list_errors(path, spec.tool_call_dedup_exempt)
    errors.extend(list_errors)
    if not list_errors:
        errors.extend(
            tool_list_errors(
                path,
                "tool_call_dedup_exempt",
                spec.tool_call_dedup_exempt,
                wildcard=False,
                trimmed=False,
                mcp_servers=mcp_servers,
            )
        )
    return errors


def _number_text(value: float) -> str:
    return repr(value)


def _validate_provider(snapshot: ConfigSnapshot, spec: ProviderSpec) -> list[Error]:
    errors: list[Error] = []
    base = f"providers.models.{spec.type}.{spec.alias}"
    if not ALIAS_RE.match(spec.type):
        errors.append(
            (base, f"{base}: provider type {quote(spec.type)} is invalid; expected {ALIAS_PATTERN}")
        )
    elif len(spec.type) > MAX_LENGTHS["type"]:
        errors.append(
            (
                base,
                f"{base}: provider type {quote(spec.type)} is longer than {MAX_LENGTHS['type']} characters",
            )
        )
    if (err := _alias_error(base, spec.alias)) is not None:
        errors.append(err)
    for name in ("model", "uri", "api_key_env"):
        errors.extend(_too_long(f"{base}.{name}", name, getattr(spec, name)))
    errors.extend(_too_large(f"{base}.timeout_secs", spec.timeout_secs))
    errors.extend(_too_large(f"{base}.max_tokens", spec.max_tokens))

    if spec.type != "scripted" and not spec.model.strip():
        path = f"{base}.model"
        errors.append((path, f"{path} is empty; a model is required for every provider type except scripted"))
    if spec.api_key_env and not ENV_NAME_RE.match(spec.api_key_env):
        path = f"{base}.api_key_env"
        errors.append((path, f"{path} is invalid ({spec.api_key_env}); expected {ENV_PATTERN}"))
    if spec.timeout_secs <= 0:
        path = f"{base}.timeout_secs"
        errors.append((path, f"{path} must be greater than 0 (got {spec.timeout_secs})"))
    if spec.max_tokens is not None and spec.max_tokens <= 0:
        path = f"{base}.max_tokens"
        errors.append((path, f"{path} must be greater than 0 when set (got {spec.max_tokens})"))
    if spec.temperature is not None and not (math.isfinite(spec.temperature) and spec.temperature >= 0):
        path = f"{base}.temperature"
        errors.append((path, f"{path} must be a number of 0 or more (got {_number_text(spec.temperature)})"))
    for name in ("input_per_mtok_cents", "output_per_mtok_cents"):
        value = getattr(spec, name)
        if not (math.isfinite(value) and 0 <= value <= MAX_PRICE_CENTS):
            path = f"{base}.pricing.{name}"
            errors.append(
                (path, f"{path} must be a number from 0 to {MAX_PRICE_CENTS} (got {_number_text(value)})")
            )
    for name in ("model", "uri", "api_key_env"):
        errors.extend(_text_errors(f"{base}.{name}", getattr(spec, name)))
    for name in ("fallback_models", "fallback"):
        errors.extend(_list_errors(f"{base}.{name}", getattr(spec, name)))

    for i, model in enumerate(spec.fallback_models):
        if not model.strip():
            path = f"{base}.fallback_models[{i}]"
            errors.append((path, f"{path} is empty; remove it or name a model"))
    for i, ref in enumerate(spec.fallback):
        path = f"{base}.fallback[{i}]"
        parts = split_provider_ref(ref)
        if not ref.strip():
            errors.append((path, f"{path} is empty; remove it or name a configured model provider"))
        elif parts is None:
            errors.append((path, f"{path} must be dotted form <type>.<alias> (got {quote(ref)})"))
        elif ref == spec.ref:
            errors.append(
                (
                    path,
                    f"{path} = {quote(ref)} names this provider itself; a provider cannot fall back to itself",
                )
            )
        elif ref not in snapshot.providers:
            errors.append(
                (
                    path,
                    f"{path} = {quote(ref)} but [providers.models.{parts[0]}.{parts[1]}] is not configured",
                )
            )

    errors.extend(script_errors(f"{base}.script", spec.script))
    errors.extend(_script_text_errors(f"{base}.script", spec.script))
    return errors


def _script_text_errors(path: str, script: object) -> list[Error]:
    """Control characters anywhere in a script (keys and strings; texts may hold newlines),
    and numbers JSON cannot hold."""
    errors: list[Error] = []
    stack: list[tuple[str, object]] = [(path, script)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            errors.extend(_text_errors(where, item, multiline=True))
        elif isinstance(item, float) and not math.isfinite(item):
            # JSON has no NaN nor infinity: PostgreSQL's jsonb refuses them.
            errors.append((where, f"{where} must be a finite number (got {item!r})"))
        elif isinstance(item, dict):
            for key, sub in item.items():
                errors.extend(_text_errors(f"{where}.{key}", str(key)))
                stack.append((f"{where}.{key}", sub))
        elif isinstance(item, list | tuple):
            stack.extend((f"{where}[{i}]", sub) for i, sub in enumerate(item))
    return errors


def _validate_delegate_globals(snapshot: ConfigSnapshot) -> list[Error]:
    errors: list[Error] = []
    for name in ("timeout_secs", "agentic_timeout_secs", "max_background", "max_concurrent_runs"):
        value = getattr(snapshot.delegate, name)
        path = f"delegate.{name}"
        if value <= 0:
            errors.append((path, f"{path} must be greater than 0"))
        errors.extend(_too_large(path, value))
    return errors


# --- alias-reference rewrites -------------------------------------------------------------------


def _rewrite_references(
    snapshot: ConfigSnapshot, rewrite: Callable[[str], str | None], *, skip: str | None = None
) -> dict[str, AgentSpec]:
    """Applies `rewrite` to every delegate target and read_memory_from entry.

    `rewrite` returns the new alias, or None to drop the entry. References are matched
    after trimming, the way ZeroClaw's alias scrubbing does.
    """
    agents: dict[str, AgentSpec] = {}
    for alias, agent in snapshot.agents.items():
        if alias == skip:
            continue
        delegates: list[DelegateEntry] = []
        for entry in agent.delegates:
            new = rewrite(entry.agent.strip())
            if new is None:
                continue
            delegates.append(entry if new == entry.agent.strip() else replace(entry, agent=new))
        memory: list[str] = []
        for other in agent.read_memory_from:
            new = rewrite(other.strip())
            if new is None:
                continue
            memory.append(other if new == other.strip() else new)
        if tuple(delegates) != agent.delegates or tuple(memory) != agent.read_memory_from:
            agent = replace(agent, delegates=tuple(delegates), read_memory_from=tuple(memory))
        agents[alias] = agent
    return agents


def rename_agent(snapshot: ConfigSnapshot, old: str, new: str) -> ConfigSnapshot:
    """Renames agent `old` to `new` and rewrites every delegate/read_memory_from reference."""
    if old not in snapshot.agents:
        raise ValueError(f"agents.{old} is not configured")
    if new == old:
        return snapshot
    if new in snapshot.agents:
        raise ValueError(f"agents.{new} already exists")
    agents = _rewrite_references(snapshot, lambda ref: new if ref == old else ref)
    agents[new] = replace(agents.pop(old), alias=new)
    return replace(snapshot, agents=dict(sorted(agents.items())))


def delete_agent_plan(snapshot: ConfigSnapshot, alias: str) -> list[str]:
    """The dry run of `delete_agent`: one line per reference that deleting `alias` removes."""
    if alias not in snapshot.agents:
        raise ValueError(f"agents.{alias} is not configured")
    lines: list[str] = []
    for other_alias in sorted(snapshot.agents):
        if other_alias == alias:
            continue
        other = snapshot.agents[other_alias]
        for entry in other.delegates:
            if entry.agent.strip() == alias:
                lines.append(
                    f"remove {{ agent = {quote(alias)}, mode = {quote(entry.mode)} }} from agents.{other_alias}.delegates"
                )
        if any(name.strip() == alias for name in other.read_memory_from):
            lines.append(f"remove {quote(alias)} from agents.{other_alias}.read_memory_from")
    return lines


def delete_agent(snapshot: ConfigSnapshot, alias: str) -> ConfigSnapshot:
    """Removes agent `alias` and scrubs it from every other agent (see `delete_agent_plan`)."""
    if alias not in snapshot.agents:
        raise ValueError(f"agents.{alias} is not configured")
    agents = _rewrite_references(snapshot, lambda ref: None if ref == alias else ref, skip=alias)
    return replace(snapshot, agents=agents)


# --- MCP reference rewrites -----------------------------------------------------------------------


def rename_mcp_server(snapshot: ConfigSnapshot, old: str, new: str) -> ConfigSnapshot:
    """Renames MCP server `old` to `new` and rewrites every bundle's `servers` and `exclude`."""
    if old not in snapshot.mcp_servers:
        raise ValueError(f"mcp.servers.{old} is not configured")
    if new == old:
        return snapshot
    servers = {
        (new if n == old else n): (replace(s, name=new) if n == old else s)
        for n, s in snapshot.mcp_servers.items()
    }
    bundles = {
        alias: replace(
            b,
            servers=tuple(new if n == old else n for n in b.servers),
            exclude=tuple(new if n == old else n for n in b.exclude),
        )
        for alias, b in snapshot.mcp_bundles.items()
    }
    return replace(snapshot, mcp_servers=dict(sorted(servers.items())), mcp_bundles=bundles)


def delete_mcp_server_plan(snapshot: ConfigSnapshot, name: str) -> list[str]:
    lines: list[str] = []
    for alias in sorted(snapshot.mcp_bundles):
        bundle = snapshot.mcp_bundles[alias]
        for field in ("servers", "exclude"):
            if any(n == name for n in getattr(bundle, field)):
                lines.append(f"remove {quote(name)} from mcp_bundles.{alias}.{field}")
    return lines


def delete_mcp_server(snapshot: ConfigSnapshot, name: str) -> ConfigSnapshot:
    """Removes MCP server `name` and scrubs it from every bundle (see `delete_mcp_server_plan`)."""
    servers = {n: s for n, s in snapshot.mcp_servers.items() if n != name}
    bundles = {
        alias: replace(
            b,
            servers=tuple(n for n in b.servers if not n == name),
            exclude=tuple(n for n in b.exclude if not n == name),
        )
        for alias, b in snapshot.mcp_bundles.items()
    }
    return replace(snapshot, mcp_servers=servers, mcp_bundles=bundles)


def rename_mcp_bundle(snapshot: ConfigSnapshot, old: str, new: str) -> ConfigSnapshot:
    """Renames bundle `old` to `new` and rewrites every agent's `mcp_bundles`."""
    if old not in snapshot.mcp_bundles:
        raise ValueError(f"mcp_bundles.{old} is not configured")
    if new == old:
        return snapshot
    bundles = {
        (new if a == old else a): (replace(b, alias=new) if a == old else b)
        for a, b in snapshot.mcp_bundles.items()
    }
    agents = {
        alias: replace(agent, mcp_bundles=tuple(new if b == old else b for b in agent.mcp_bundles))
        if any(b == old for b in agent.mcp_bundles)
        else agent
        for alias, agent in snapshot.agents.items()
    }
    return replace(snapshot, mcp_bundles=dict(sorted(bundles.items())), agents=agents)


def delete_mcp_bundle_plan(snapshot: ConfigSnapshot, alias: str) -> list[str]:
    return [
        f"remove {quote(alias)} from agents.{a}.mcp_bundles"
        for a in sorted(snapshot.agents)
        if any(b == alias for b in snapshot.agents[a].mcp_bundles)
    ]


def delete_mcp_bundle(snapshot: ConfigSnapshot, alias: str) -> ConfigSnapshot:
    """Removes bundle `alias` and scrubs it from every agent (see `delete_mcp_bundle_plan`)."""
    bundles = {a: b for a, b in snapshot.mcp_bundles.items() if a != alias}
    agents = {
        a: replace(agent, mcp_bundles=tuple(b for b in agent.mcp_bundles if not b == alias))
        if any(b == alias for b in agent.mcp_bundles)
        else agent
        for a, agent in snapshot.agents.items()
    }
    return replace(snapshot, mcp_bundles=bundles, agents=agents)
