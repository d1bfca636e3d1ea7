"""TOML and JSON documents ⇄ `ConfigSnapshot`, plus diffs between two snapshots.

The document shape mirrors ZeroClaw's `config.toml`:

    [delegate]
    [providers.models.<type>.<alias>]        pricing = { input_per_mtok_cents, output_per_mtok_cents }
    [[providers.models.<type>.<alias>.script]]
    [risk_profiles.<alias>]                  + [risk_profiles.<alias>.delegation_policy] mode
    [runtime_profiles.<alias>]
    [agents.<alias>]                         delegates = [{ agent, mode }]
    [agents.<alias>.workspace]               path
    [mcp]                                    enabled, deferred_loading
    [[mcp.servers]]                          name, transport, command, args, env, url, headers, …
    [mcp_bundles.<alias>]                    servers, exclude

MCP servers' `env` and `headers` values are secrets (agents_app.secrets): exported as the mask,
or as `${VAR}` when the value is read from Clawboard's environment variable VAR. A launcher
that downloads the server at start is resolved to the installed command when it is read
(agents_app.mcp_launchers).

Export writes every field Clawboard models (defaults included, so a file means the same
thing whatever a later version's defaults are) except values that are absent: `null`
optionals (TOML has no null), an empty workspace path (= the derived default) and an empty
`script` of a non-scripted provider. Anything else in an imported document is skipped with
a warning, never an error, so a ZeroClaw file imports as it is. On import, `workspace` may
also be a plain path string, ZeroClaw's `[agents.<a>.workspace].read_memory_from` is merged
into the agent's `read_memory_from` (same meaning), `allowed_path(s)` are read as
`allowed_roots`, the legacy `allowed_tools = ["__none__"]` as `deny_all_tools = true`, and
ZeroClaw's other `sandbox_backend` values (`firejail`, `landlock`, ...) as `bubblewrap`, with a
warning naming the profile.
Export always writes `read_memory_from` on the agent itself.
"""

from __future__ import annotations

import bisect
import copy
import dataclasses
import difflib
import json
import re
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import tomlkit
from tomlkit.items import Array, Item, String, StringType, Table, Trivia, Whitespace

from agents_app import legacy, mcp_launchers
from agents_app.secrets import (
    MASK,
    ZEROCLAW_ENCRYPTED_PREFIXES,
    SecretInput,
    StoredSecret,
    secret_document_value,
    secret_from_document,
)
from agents_app.snapshot import (
    FAMILY_DEFAULT_MODELS,
    AgentSpec,
    ConfigSnapshot,
    DelegateEntry,
    McpBundleSpec,
    McpGlobals,
    McpServerSpec,
    ProviderSpec,
    SecretValue,
)
from agents_app.validation import MAX_LIST_ENTRIES, list_cap_errors
from agents_app.validation import quote as _q
from policies_app.policy import ALL_TOOLS
from policies_app.specs import (
    DelegateGlobals,
    RiskProfileSpec,
    RuntimeProfileSpec,
    with_always_auto_approved,
)

MAX_DOCUMENT_BYTES = 1024 * 1024
MAX_NESTING_DEPTH = 20
# Arrays that would make a `key = [...]` line longer than this are written one item per line.
_MAX_INLINE_WIDTH = 100

_SECTIONS: tuple[str, ...] = (
    "delegate",
    "providers",
    "risk_profiles",
    "runtime_profiles",
    "agents",
    "mcp",
    "mcp_bundles",
)
NOTHING_RECOGNISED = (
    "nothing in this file was recognised as Clawboard or ZeroClaw configuration; sections seen: {}"
)
# Tools of ZeroClaw (built-in, optional and external adapters) that Clawboard does not provide.
# In an import they are left out of tool lists with a warning; so is an MCP tool
# (`<server>__<tool>`) of a server the file does not configure. Any other unknown name stays an
# error (a typo must not weaken a list).
ZEROCLAW_ONLY_TOOLS: frozenset[str] = frozenset(
    {
        "file_edit", "glob_search", "content_search", "memory_forget", "web_fetch", "git_operations",
        "browser", "browser_open", "browser_delegate", "screenshot", "text_browser", "pushover",
        "weather", "web_search_tool", "web_search", "image_gen", "image_info", "email_read",
        "email_search", "calculator", "http_request", "cron_add", "cron_list",
        "cron_remove", "cron_run", "cron_runs", "cron_update", "schedule", "composio", "delegate_coordination_status",
        "model_routing_config", "proxy_config", "sessions_list", "sessions_history", "sessions_send",
        "sessions_spawn", "hardware_board_info", "hardware_memory_map", "hardware_memory_read",
        "lsp", "apply_patch", "todo_write", "ask_user",
    }
)  # fmt: skip
_IMPORT_TOOL_LISTS: dict[str, tuple[str, ...]] = {
    "risk_profiles": ("allowed_tools", "excluded_tools", "auto_approve", "always_ask"),
    "runtime_profiles": ("tool_call_dedup_exempt",),
}
# ZeroClaw's dashboard wrote this sentinel for "no tool allowed" before `deny_all_tools` existed.
_LEGACY_DENY_ALL_SENTINEL = "__none__"

ShapeError = tuple[str, str]
T = TypeVar("T")


class ConfigParseError(ValueError):
    """The text is not a TOML document Clawboard will read (syntax, size or nesting)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


class ConfigShapeError(ValueError):
    """Well-formed document with values of the wrong type; `errors` lists all of them."""

    def __init__(self, errors: list[ShapeError]) -> None:
        super().__init__("; ".join(message for _, message in errors))
        self.errors = errors


@dataclass(frozen=True)
class ImportResult:
    snapshot: ConfigSnapshot
    warnings: list[str] = field(default_factory=list)
    # The top-level keys of the document, and which sections it has (an import keeps what a
    # file does not mention; see agents_app.imports).
    sections_seen: tuple[str, ...] = ()
    has_delegate: bool = True
    has_mcp: bool = True
    # Warnings that only say how a value was read (a launcher resolved to its installed command).
    notes: tuple[str, ...] = ()


# --- field tables ---------------------------------------------------------------------------------

_STR, _BOOL, _INT, _OPT_INT, _FLOAT, _OPT_FLOAT, _STR_LIST = (
    "str",
    "bool",
    "int",
    "opt_int",
    "float",
    "opt_float",
    "str_list",
)

_DELEGATE_FIELDS: dict[str, str] = {
    "timeout_secs": _INT,
    "agentic_timeout_secs": _INT,
    "max_background": _INT,
    "max_concurrent_runs": _INT,
}

_RISK_FIELDS: dict[str, str] = {
    "level": _STR,
    "workspace_only": _BOOL,
    "allowed_roots": _STR_LIST,
    "allowed_roots_read_only": _STR_LIST,
    "allowed_roots_write_only": _STR_LIST,
    "forbidden_paths": _STR_LIST,
    "allowed_commands": _STR_LIST,
    "shell_env_passthrough": _STR_LIST,
    "block_high_risk_commands": _BOOL,
    "require_approval_for_medium_risk": _BOOL,
    "allowed_tools": _STR_LIST,
    "excluded_tools": _STR_LIST,
    "auto_approve": _STR_LIST,
    "always_ask": _STR_LIST,
    "deny_all_tools": _BOOL,
    "shell_network": _BOOL,
    "sandbox_enabled": _BOOL,
    "sandbox_backend": _STR,
    "firejail_args": _STR_LIST,
}
# ZeroClaw's other sandbox backends; `shell` only runs under bubblewrap, so they import as that.
_SANDBOX_BACKENDS_AS_BUBBLEWRAP = frozenset({"firejail", "landlock", "docker", "sandbox-exec", "sandboxexec"})
_SANDBOX_BACKENDS_AS_BUBBLEWRAP |= {"seatbelt", "none"}
# ZeroClaw's serde aliases for `allowed_roots`.
_RISK_FIELD_ALIASES: dict[str, str] = {"allowed_path": "allowed_roots", "allowed_paths": "allowed_roots"}

_RUNTIME_FIELDS: dict[str, str] = {
    "agentic": _BOOL,
    "max_tool_iterations": _INT,
    "max_actions_per_hour": _INT,
    "max_cost_per_day_cents": _INT,
    "shell_timeout_secs": _INT,
    "max_delegation_depth": _INT,
    "delegation_timeout_secs": _OPT_INT,
    "agentic_timeout_secs": _OPT_INT,
    "parallel_tools": _BOOL,
    "max_tool_result_chars": _INT,
    "tool_call_dedup_exempt": _STR_LIST,
    "max_spawn_depth": _INT,
    "max_children_per_run": _INT,
    "subagent_timeout_secs": _INT,
    "max_output_tokens": _INT,
    "shell_max_cpu_secs": _INT,
    "shell_max_memory_mb": _INT,
    "shell_max_file_size_mb": _INT,
    "shell_max_processes": _INT,
    "mcp_max_cpu_secs": _INT,
    "mcp_max_memory_mb": _INT,
    "mcp_max_file_size_mb": _INT,
    "mcp_max_processes": _INT,
}

_PROVIDER_FIELDS: dict[str, str] = {
    "model": _STR,
    "uri": _STR,
    "api_key_env": _STR,
    "temperature": _OPT_FLOAT,
    "timeout_secs": _INT,
    "max_tokens": _OPT_INT,
    "fallback_models": _STR_LIST,
    "fallback": _STR_LIST,
}
_PRICING_FIELDS: dict[str, str] = {"input_per_mtok_cents": _FLOAT, "output_per_mtok_cents": _FLOAT}

_AGENT_FIELDS: dict[str, str] = {
    "enabled": _BOOL,
    "model_provider": _STR,
    "risk_profile": _STR,
    "runtime_profile": _STR,
    "system_prompt": _STR,
    "delegate_same_risk_profile": _BOOL,
    "read_memory_from": _STR_LIST,
    "delegable": _BOOL,
    "mcp_bundles": _STR_LIST,
}

_MCP_GLOBAL_FIELDS: dict[str, str] = {"enabled": _BOOL, "deferred_loading": _BOOL}
_MCP_SERVER_FIELDS: dict[str, str] = {
    "transport": _STR,
    "command": _STR,
    "args": _STR_LIST,
    "url": _STR,
    "tool_timeout_secs": _OPT_INT,
}
_MCP_SECRET_FIELDS: tuple[str, ...] = ("env", "headers")
_MCP_BUNDLE_FIELDS: dict[str, str] = {"servers": _STR_LIST, "exclude": _STR_LIST}

_KIND_TEXT: dict[str, str] = {
    _STR: "a string",
    _BOOL: "a boolean",
    _INT: "an integer",
    _OPT_INT: "an integer",
    _FLOAT: "a number",
    _OPT_FLOAT: "a number",
    _STR_LIST: "a list of strings",
}


# --- reading --------------------------------------------------------------------------------------


def parse_toml(text: str | bytes, *, zeroclaw: bool = True) -> ImportResult:
    """Parses a Clawboard or ZeroClaw `config.toml` into a snapshot (not yet validated)."""
    size = len(text) if isinstance(text, bytes) else len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_DOCUMENT_BYTES:
        raise ConfigParseError(f"configuration file is larger than 1 MiB ({size} bytes)")
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConfigParseError(f"configuration file is not valid UTF-8 (at byte {exc.start})") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column (\d+)\)", str(exc))
        line, column = (int(found.group(1)), int(found.group(2))) if found else (None, None)
        raise ConfigParseError(f"invalid TOML: {exc}", line, column) from exc
    except RecursionError as exc:
        raise ConfigParseError(_too_deep_message()) from exc
    return document_to_snapshot(data, zeroclaw=zeroclaw)


def document_to_snapshot(doc: Mapping[str, Any], *, zeroclaw: bool = False) -> ImportResult:
    """Reads a parsed document (TOML, or a JSON body of the same shape).

    `zeroclaw` is the import of a whole file (TOML or JSON, REST, dashboard or command
    line): ZeroClaw's schema versions are migrated, ZeroClaw-only tool names are left out of
    tool lists with a warning, a provider without `model` takes its family's default, and a
    file in which nothing is recognised is refused. Without it (one entry edited through
    REST, the dashboard or the admin) the document is Clawboard's own shape, read strictly."""
    if not isinstance(doc, Mapping):
        raise ConfigShapeError([("", "the configuration must be a table (a JSON object)")])
    if _depth_exceeds(doc, MAX_NESTING_DEPTH):
        raise ConfigParseError(_too_deep_message())
    seen = tuple(str(k) for k in doc)
    reader = _Reader(zeroclaw=zeroclaw)
    if zeroclaw:
        try:
            version = legacy.schema_version(doc)
        except legacy.SchemaVersionError as exc:
            raise ConfigShapeError([("schema_version", str(exc))]) from exc
        if legacy.is_legacy(doc, version):
            doc, notes, skipped = legacy.migrate(doc, version)
            reader.warnings.extend(notes)
            for path in skipped:
                reader.skip_field(path)
        elif version is not None:
            doc = {k: v for k, v in doc.items() if k != "schema_version"}
            reader.skip_key("schema_version")
        if not any(key in doc for key in _SECTIONS):
            raise ConfigShapeError([("", NOTHING_RECOGNISED.format(", ".join(seen) or "(none)"))])
    snapshot = reader.read(doc)
    if reader.errors:
        raise ConfigShapeError(reader.errors)
    return ImportResult(
        snapshot=snapshot,
        warnings=reader.warnings,
        sections_seen=seen,
        has_delegate="delegate" in doc,
        has_mcp="mcp" in doc,
        notes=tuple(reader.notes),
    )


def _too_deep_message() -> str:
    return f"configuration nests deeper than {MAX_NESTING_DEPTH} levels"


def _depth_exceeds(doc: Mapping[str, Any], limit: int) -> bool:
    # Iterative, so a hostile JSON body cannot exhaust the interpreter stack here.
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, Mapping):
            children: Any = value.values()
        elif isinstance(value, list | tuple):
            children = value
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class _Reader:
    def __init__(self, *, zeroclaw: bool = False) -> None:
        self.zeroclaw = zeroclaw
        self.errors: list[ShapeError] = []
        self.warnings: list[str] = []
        self.notes: list[str] = []

    def error(self, path: str, message: str) -> None:
        self.errors.append((path, message))

    def skip_key(self, path: str) -> None:
        self.warnings.append(f"skipped unknown key {_q(path)}")

    def skip_field(self, path: str) -> None:
        self.warnings.append(f"skipped unknown field {_q(path)}")

    def table(self, path: str, value: Any) -> Mapping[str, Any] | None:
        if isinstance(value, Mapping):
            return value
        self.error(path, f"{path} must be a table")
        return None

    def value(self, path: str, kind: str, value: Any) -> tuple[bool, Any]:
        """(ok, converted value); records a shape error when not ok."""
        ok = False
        if kind == _STR:
            ok = isinstance(value, str)
        elif kind == _BOOL:
            ok = isinstance(value, bool)
        elif kind == _INT:
            ok = _is_int(value)
        elif kind == _OPT_INT:
            ok = value is None or _is_int(value)
        elif kind in (_FLOAT, _OPT_FLOAT):
            if (value is None and kind == _OPT_FLOAT) or (
                isinstance(value, int | float) and not isinstance(value, bool)
            ):
                # Floats stay floats whatever the source wrote (3 or 3.0), so exports agree.
                return True, None if value is None else float(value)
        elif kind == _STR_LIST:
            # The caps first: a list of 100,000 entries is refused before any other work.
            if isinstance(value, list | tuple) and (
                len(value) > MAX_LIST_ENTRIES or all(isinstance(v, str) for v in value)
            ):
                caps = list_cap_errors(
                    path, value if len(value) > MAX_LIST_ENTRIES else [str(v) for v in value]
                )
                if caps:
                    self.errors.extend(caps)
                    return False, None
                return True, tuple(value)
        if ok:
            return True, value
        suffix = ", or left out" if kind in (_OPT_INT, _OPT_FLOAT) else ""
        self.error(path, f"{path} must be {_KIND_TEXT[kind]}{suffix}")
        return False, None

    def fields(
        self, base: str, raw: Mapping[str, Any], spec: Mapping[str, str], out: dict[str, Any], key: str
    ) -> bool:
        """Reads `raw[key]` into `out` when `key` is a modeled field; False when it is not."""
        kind = spec.get(key)
        if kind is None:
            return False
        ok, converted = self.value(f"{base}.{key}", kind, raw[key])
        if ok:
            out[key] = converted
        return True

    # -- sections --

    def read(self, doc: Mapping[str, Any]) -> ConfigSnapshot:
        providers: dict[str, ProviderSpec] = {}
        risks: dict[str, RiskProfileSpec] = {}
        runtimes: dict[str, RuntimeProfileSpec] = {}
        agents: dict[str, AgentSpec] = {}
        delegate = DelegateGlobals()
        mcp = McpGlobals()
        servers: dict[str, McpServerSpec] = {}
        bundles: dict[str, McpBundleSpec] = {}
        for key, value in doc.items():
            if key == "mcp":
                mcp, servers = self.mcp(value)
            elif key == "mcp_bundles":
                bundles = self.entries(key, value, self.mcp_bundle)
            elif key == "delegate":
                delegate = self.delegate_globals(value) or delegate
            elif key == "providers":
                providers = self.providers(value)
            elif key == "risk_profiles":
                risks = self.entries(key, value, self.risk_profile)
            elif key == "runtime_profiles":
                runtimes = self.entries(key, value, self.runtime_profile)
            elif key == "agents":
                agents = self.entries(key, value, self.agent)
            else:
                self.skip_key(key)
        if self.zeroclaw:
            risks = {a: self.drop_unconfigured_mcp_tools(spec, servers) for a, spec in risks.items()}
            runtimes = {a: self.drop_unconfigured_mcp_tools(spec, servers) for a, spec in runtimes.items()}
        return ConfigSnapshot(
            providers=dict(sorted(providers.items())),
            risk_profiles=dict(sorted(risks.items())),
            runtime_profiles=dict(sorted(runtimes.items())),
            agents=dict(sorted(agents.items())),
            delegate=delegate,
            mcp=mcp,
            mcp_servers=servers,
            mcp_bundles=dict(sorted(bundles.items())),
        )

    # -- MCP --

    def mcp(self, value: Any) -> tuple[McpGlobals, dict[str, McpServerSpec]]:
        raw = self.table("mcp", value)
        kwargs: dict[str, Any] = {}
        servers: dict[str, McpServerSpec] = {}
        for key in raw or {}:
            if self.fields("mcp", raw or {}, _MCP_GLOBAL_FIELDS, kwargs, key):
                continue
            if key == "servers":
                servers = self.mcp_servers((raw or {})[key])
            else:
                self.skip_field(f"mcp.{key}")
        return McpGlobals(**kwargs), servers

    def mcp_servers(self, value: Any) -> dict[str, McpServerSpec]:
        servers: dict[str, McpServerSpec] = {}
        if not isinstance(value, list | tuple):
            self.error("mcp.servers", "mcp.servers must be a list of tables ([[mcp.servers]] entries)")
            return servers
        if len(value) > MAX_LIST_ENTRIES:
            self.error(
                "mcp.servers", f"mcp.servers has {len(value)} entries; at most {MAX_LIST_ENTRIES} are allowed"
            )
            return servers
        first_index: dict[str, int] = {}
        for i, item in enumerate(value):
            spec = self.mcp_server(i, item)
            if spec is None:
                continue
            if spec.name in first_index:
                path = f"mcp.servers[{i}].name"
                self.error(
                    path,
                    f"{path} = {_q(spec.name)} duplicates mcp.servers[{first_index[spec.name]}].name; "
                    "MCP server names must be unique ignoring case",
                )
                continue
            first_index[spec.name] = i
            servers[spec.name] = spec
        return servers

    def mcp_server(self, i: int, value: Any) -> McpServerSpec | None:
        raw = self.table(f"mcp.servers[{i}]", value)
        if raw is None:
            return None
        name = raw.get("name")
        if not isinstance(name, str) or not name.strip():
            path = f"mcp.servers[{i}].name"
            if name is None or isinstance(name, str):
                self.error(path, f"{path} is empty; every MCP server needs a name")
            else:
                self.error(path, f"{path} must be a string")
            return None
        base = f"mcp.servers.{name}"
        kwargs: dict[str, Any] = {}
        for key in raw:
            if key == "name" or self.fields(base, raw, _MCP_SERVER_FIELDS, kwargs, key):
                continue
            if key in _MCP_SECRET_FIELDS:
                secrets = self.secret_table(f"{base}.{key}", raw[key])
                if secrets is not None:
                    kwargs[key] = secrets
            else:
                self.skip_field(f"{base}.{key}")
        self.resolve_launcher(base, kwargs)
        return McpServerSpec(name=name, **kwargs)

    def secret_table(self, path: str, value: Any) -> dict[str, SecretValue] | None:
        table = self.table(path, value)
        if table is None:
            return None
        if len(table) > MAX_LIST_ENTRIES:
            self.error(path, f"{path} has {len(table)} entries; at most {MAX_LIST_ENTRIES} are allowed")
            return None
        out: dict[str, SecretValue] = {}
        for key, item in table.items():
            where = f"{path}.{key}"
            if isinstance(item, SecretValue):  # from a document rebuilt from a snapshot
                out[str(key)] = item
            elif not isinstance(item, str):
                self.error(where, f"{where} must be a string")
            elif item.startswith(ZEROCLAW_ENCRYPTED_PREFIXES):
                self.warnings.append(
                    f"{where} is encrypted with ZeroClaw's secret store and cannot be read; enter it "
                    'again (the value itself, or "${VAR}" to read it from an environment variable)'
                )
                out[str(key)] = SecretValue()
            else:
                out[str(key)] = secret_from_document(item)
        return out

    def resolve_launcher(self, base: str, kwargs: dict[str, Any]) -> None:
        """A launcher that downloads at start becomes the installed command, when there is one."""
        if kwargs.get("transport", "stdio") != "stdio":
            return
        command = kwargs.get("command", "")
        launcher = mcp_launchers.parse(command, kwargs.get("args", ()))
        if launcher is None:
            return
        from django.conf import settings

        found = mcp_launchers.resolve(launcher, Path(settings.MCP_SERVERS_DIR))
        if found is None:
            return  # the validator refuses it, saying how to install it
        kwargs["command"] = found
        kwargs["args"] = launcher.rest
        note = (
            f"{base}.command: {_q(launcher.text)} downloads the server when it starts; "
            f"read as the installed {_q(found)}"
        )
        self.warnings.append(note)
        self.notes.append(note)

    def mcp_bundle(self, alias: str, value: Any) -> McpBundleSpec | None:
        base = f"mcp_bundles.{alias}"
        raw = self.table(base, value)
        if raw is None:
            return None
        kwargs: dict[str, Any] = {}
        for key in raw:
            if not self.fields(base, raw, _MCP_BUNDLE_FIELDS, kwargs, key):
                self.skip_field(f"{base}.{key}")
        return McpBundleSpec(alias=alias, **kwargs)

    def drop_unconfigured_mcp_tools(self, spec: Any, servers: Mapping[str, McpServerSpec]) -> Any:
        """Import only: `<server>__<tool>` names of servers the file does not configure leave the
        tool lists, with a warning (a ZeroClaw file may name tools of servers it drops)."""
        section = "risk_profiles" if isinstance(spec, RiskProfileSpec) else "runtime_profiles"
        changes: dict[str, tuple[str, ...]] = {}
        for name in _IMPORT_TOOL_LISTS[section]:
            values: tuple[str, ...] = getattr(spec, name)
            dropped = [
                v for v in values if _is_mcp_tool(v.strip()) and mcp_server_of(v.strip()) not in servers
            ]
            if dropped:
                changes[name] = tuple(v for v in values if v not in dropped)
                self.warnings.append(
                    f"{section}.{spec.alias}.{name}: left out {', '.join(_q(v) for v in dropped)} "
                    "(tools of MCP servers this file does not configure)"
                )
        return dataclasses.replace(spec, **changes) if changes else spec

    def entries(self, section: str, value: Any, read_one: Callable[[str, Any], T | None]) -> dict[str, T]:
        out: dict[str, T] = {}
        table = self.table(section, value)
        if table is None:
            return out
        for alias, raw in table.items():
            spec = read_one(alias, raw)
            if spec is not None:
                out[alias] = spec
        return out

    def delegate_globals(self, value: Any) -> DelegateGlobals | None:
        raw = self.table("delegate", value)
        if raw is None:
            return None
        kwargs: dict[str, Any] = {}
        for key in raw:
            if not self.fields("delegate", raw, _DELEGATE_FIELDS, kwargs, key):
                self.skip_field(f"delegate.{key}")
        return DelegateGlobals(**kwargs)

    def providers(self, value: Any) -> dict[str, ProviderSpec]:
        out: dict[str, ProviderSpec] = {}
        raw = self.table("providers", value)
        if raw is None:
            return out
        for key, sub in raw.items():
            if key != "models":
                self.skip_key(f"providers.{key}")
                continue
            models = self.table("providers.models", sub)
            if models is None:
                continue
            for ty, by_alias in models.items():
                aliases = self.table(f"providers.models.{ty}", by_alias)
                if aliases is None:
                    continue
                for alias, entry in aliases.items():
                    spec = self.provider(ty, alias, entry)
                    if spec is not None:
                        out[spec.ref] = spec
        return out

    def provider(self, ty: str, alias: str, value: Any) -> ProviderSpec | None:
        base = f"providers.models.{ty}.{alias}"
        raw = self.table(base, value)
        if raw is None:
            return None
        kwargs: dict[str, Any] = {}
        for key in raw:
            if self.fields(base, raw, _PROVIDER_FIELDS, kwargs, key):
                continue
            if key == "pricing":
                pricing = self.table(f"{base}.pricing", raw[key])
                for sub in pricing or {}:
                    if not self.fields(f"{base}.pricing", pricing or {}, _PRICING_FIELDS, kwargs, sub):
                        self.skip_field(f"{base}.pricing.{sub}")
            elif key == "script":
                script = raw[key]
                if isinstance(script, list | tuple) and all(isinstance(rule, Mapping) for rule in script):
                    kwargs["script"] = _plain(script)
                else:
                    self.error(f"{base}.script", f"{base}.script must be a list of tables")
            elif key == "api_key":
                self.api_key(base, raw[key], kwargs)
            else:
                self.skip_field(f"{base}.{key}")
        if self.zeroclaw and not str(kwargs.get("model", "")).strip() and ty in FAMILY_DEFAULT_MODELS:
            # ZeroClaw accepts a provider without a model; the family's default model stands in.
            kwargs["model"] = FAMILY_DEFAULT_MODELS[ty]
            self.warnings.append(f"{base}.model is not set; using the {ty} default {_q(kwargs['model'])}")
        return ProviderSpec(type=ty, alias=alias, **kwargs)

    def api_key(self, base: str, value: Any, kwargs: dict[str, Any]) -> None:
        path = f"{base}.api_key"
        if isinstance(value, StoredSecret):
            kwargs["api_key"] = str(value)  # a token, from a document rebuilt from a snapshot
            return
        if value is None:
            return
        if not isinstance(value, str):
            self.error(path, f"{path} must be a string")
            return
        if value.startswith(ZEROCLAW_ENCRYPTED_PREFIXES):
            self.warnings.append(
                f"{path} is encrypted with ZeroClaw's secret store; left out (give the key itself, "
                "or use api_key_env)"
            )
            return
        kwargs["api_key"] = SecretInput(value)

    def risk_profile(self, alias: str, value: Any) -> RiskProfileSpec | None:
        base = f"risk_profiles.{alias}"
        raw = self.table(base, value)
        if raw is None:
            return None
        kwargs: dict[str, Any] = {}
        extra_roots: list[str] = []
        for key in raw:
            if self.fields(base, raw, _RISK_FIELDS, kwargs, key):
                continue
            if key in _RISK_FIELD_ALIASES:
                ok, roots = self.value(f"{base}.{key}", _STR_LIST, raw[key])
                if ok:
                    extra_roots.extend(roots)
            elif key == "delegation_policy":
                policy = self.table(f"{base}.delegation_policy", raw[key])
                for sub in policy or {}:
                    if sub == "mode":
                        ok, mode = self.value(f"{base}.delegation_policy.mode", _STR, (policy or {})[sub])
                        if ok:
                            kwargs["delegation_mode"] = mode
                    else:
                        self.skip_field(f"{base}.delegation_policy.{sub}")
            else:
                self.skip_field(f"{base}.{key}")
        if extra_roots:
            roots = list(kwargs.get("allowed_roots", ()))
            kwargs["allowed_roots"] = tuple(roots + [r for r in extra_roots if r not in roots])
        if kwargs.get("allowed_tools") == (_LEGACY_DENY_ALL_SENTINEL,):
            kwargs["allowed_tools"] = ()
            kwargs["deny_all_tools"] = True
            self.warnings.append(
                f'{base}.allowed_tools = ["{_LEGACY_DENY_ALL_SENTINEL}"] was read as deny_all_tools = true'
            )
        backend = kwargs.get("sandbox_backend")
        if isinstance(backend, str) and backend.strip().lower() in _SANDBOX_BACKENDS_AS_BUBBLEWRAP:
            kwargs["sandbox_backend"] = "bubblewrap"
            hint = (
                " (set sandbox_enabled = false to run shell without a sandbox)" if backend == "none" else ""
            )
            self.warnings.append(
                f'{base}.sandbox_backend = "{backend}" was read as "bubblewrap", the only backend '
                f"Clawboard runs shell under{hint}"
            )
        self.drop_zeroclaw_tools("risk_profiles", base, kwargs)
        kwargs["auto_approve"] = with_always_auto_approved(kwargs.get("auto_approve", ()))
        return RiskProfileSpec(alias=alias, **kwargs)

    def drop_zeroclaw_tools(self, section: str, base: str, kwargs: dict[str, Any]) -> None:
        """Import only: ZeroClaw tools Clawboard lacks leave the list, with one warning per list."""
        if not self.zeroclaw:
            return
        for name in _IMPORT_TOOL_LISTS[section]:
            values = kwargs.get(name)
            if not values:
                continue
            dropped = [v for v in values if v.strip() not in ALL_TOOLS and _is_zeroclaw_only_tool(v.strip())]
            if dropped:
                kwargs[name] = tuple(v for v in values if v not in dropped)
                self.warnings.append(
                    f"{base}.{name}: left out {', '.join(_q(v) for v in dropped)} "
                    "(ZeroClaw tools that Clawboard does not provide)"
                )

    def runtime_profile(self, alias: str, value: Any) -> RuntimeProfileSpec | None:
        base = f"runtime_profiles.{alias}"
        raw = self.table(base, value)
        if raw is None:
            return None
        kwargs: dict[str, Any] = {}
        for key in raw:
            if not self.fields(base, raw, _RUNTIME_FIELDS, kwargs, key):
                self.skip_field(f"{base}.{key}")
        self.drop_zeroclaw_tools("runtime_profiles", base, kwargs)
        return RuntimeProfileSpec(alias=alias, **kwargs)

    def agent(self, alias: str, value: Any) -> AgentSpec | None:
        base = f"agents.{alias}"
        raw = self.table(base, value)
        if raw is None:
            return None
        kwargs: dict[str, Any] = {}
        # ZeroClaw keeps the memory allow-list under [agents.<a>.workspace]; same meaning here.
        workspace_memory: tuple[str, ...] = ()
        for key in raw:
            if self.fields(base, raw, _AGENT_FIELDS, kwargs, key):
                continue
            if key == "delegates":
                delegates = self.delegates(f"{base}.delegates", raw[key])
                if delegates is not None:
                    kwargs["delegates"] = delegates
            elif key == "workspace":
                workspace = raw[key]
                if isinstance(workspace, str):
                    kwargs["workspace"] = workspace
                    continue
                table = self.table(f"{base}.workspace", workspace)
                for sub in table or {}:
                    sub_value = (table or {})[sub]
                    if sub == "path":
                        ok, path = self.value(f"{base}.workspace.path", _STR, sub_value)
                        if ok:
                            kwargs["workspace"] = path
                    elif sub == "read_memory_from":
                        ok, names = self.value(f"{base}.workspace.read_memory_from", _STR_LIST, sub_value)
                        if ok:
                            workspace_memory = names
                    else:
                        self.skip_field(f"{base}.workspace.{sub}")
            else:
                self.skip_field(f"{base}.{key}")
        if workspace_memory:
            memory = list(kwargs.get("read_memory_from", ()))
            kwargs["read_memory_from"] = tuple(memory + [m for m in workspace_memory if m not in memory])
        return AgentSpec(alias=alias, **kwargs)

    def delegates(self, path: str, value: Any) -> tuple[DelegateEntry, ...] | None:
        if not isinstance(value, list | tuple):
            self.error(path, f"{path} must be a list of agent aliases or {{ agent, mode }} tables")
            return None
        if len(value) > MAX_LIST_ENTRIES:
            self.error(path, f"{path} has {len(value)} entries; at most {MAX_LIST_ENTRIES} are allowed")
            return None
        entries: list[DelegateEntry] = []
        for i, item in enumerate(value):
            item_path = f"{path}[{i}]"
            if isinstance(item, str):
                entries.append(DelegateEntry(agent=item))
                continue
            if not isinstance(item, Mapping):
                self.error(item_path, f"{item_path} must be an agent alias or a {{ agent, mode }} table")
                continue
            # Strict like ZeroClaw: a misspelled `mode` must not silently mean bounded.
            unknown = [k for k in item if k not in ("agent", "mode")]
            if unknown:
                self.error(
                    item_path, f"{item_path} has unknown field {_q(unknown[0])}; expected agent and mode"
                )
                continue
            if "agent" not in item:
                self.error(f"{item_path}.agent", f"{item_path}.agent is missing")
                continue
            ok_agent, agent = self.value(f"{item_path}.agent", _STR, item["agent"])
            ok_mode, mode = self.value(f"{item_path}.mode", _STR, item.get("mode", "bounded"))
            if ok_agent and ok_mode:
                entries.append(DelegateEntry(agent=agent, mode=mode))
        return tuple(entries)


def _is_zeroclaw_only_tool(name: str) -> bool:
    return name in ZEROCLAW_ONLY_TOOLS


def _is_mcp_tool(name: str) -> bool:
    return "__" in name and name != _LEGACY_DENY_ALL_SENTINEL


def mcp_server_of(tool: str) -> str:
    """The server part of an MCP tool name `<server>__<tool>` (split at the first `__`)."""
    return tool.partition("__")[0]


def _plain(value: Any) -> Any:
    """Deep copy into plain dicts and lists (tomlkit/JSON containers in, JSON-able out)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return copy.copy(value)


# --- writing --------------------------------------------------------------------------------------


def _sorted_json(value: Any) -> Any:
    # Script keys are sorted so the export does not depend on how the database stored them.
    if isinstance(value, Mapping):
        return {str(k): _sorted_json(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list | tuple):
        return [_sorted_json(v) for v in value]
    return value


def _provider_document(spec: ProviderSpec, secrets: str) -> dict[str, Any]:
    out: dict[str, Any] = {"model": spec.model, "uri": spec.uri, "api_key_env": spec.api_key_env}
    if spec.api_key:
        out["api_key"] = StoredSecret(spec.api_key) if secrets == "keep" else MASK
    if spec.temperature is not None:
        out["temperature"] = float(spec.temperature)
    out["timeout_secs"] = spec.timeout_secs
    if spec.max_tokens is not None:
        out["max_tokens"] = spec.max_tokens
    out["pricing"] = {
        "input_per_mtok_cents": float(spec.input_per_mtok_cents),
        "output_per_mtok_cents": float(spec.output_per_mtok_cents),
    }
    out["fallback_models"] = list(spec.fallback_models)
    out["fallback"] = list(spec.fallback)
    if spec.script or spec.type == "scripted":
        out["script"] = _sorted_json(spec.script)
    return out


def _risk_document(spec: RiskProfileSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kind in _RISK_FIELDS.items():
        value = getattr(spec, name)
        out[name] = list(value) if kind == _STR_LIST else value
    # Last, so that TOML renders it as a sub-table after the profile's own keys.
    out["delegation_policy"] = {"mode": spec.delegation_mode}
    return out


def _runtime_document(spec: RuntimeProfileSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, kind in _RUNTIME_FIELDS.items():
        value = getattr(spec, name)
        if value is None:
            continue
        out[name] = list(value) if kind == _STR_LIST else value
    return out


def _agent_document(spec: AgentSpec) -> dict[str, Any]:
    out: dict[str, Any] = {
        "enabled": spec.enabled,
        "model_provider": spec.model_provider,
        "risk_profile": spec.risk_profile,
        "runtime_profile": spec.runtime_profile,
        "system_prompt": spec.system_prompt,
        "delegate_same_risk_profile": spec.delegate_same_risk_profile,
        "delegates": [{"agent": d.agent, "mode": d.mode} for d in spec.delegates],
        "read_memory_from": list(spec.read_memory_from),
        "delegable": spec.delegable,
        "mcp_bundles": list(spec.mcp_bundles),
    }
    if spec.workspace:
        out["workspace"] = {"path": spec.workspace}
    return out


def _mcp_server_document(spec: McpServerSpec, secrets: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": spec.name,
        "transport": spec.transport,
        "command": spec.command,
        "args": list(spec.args),
        "env": {k: secret_document_value(v, secrets) for k, v in spec.env.items()},
        "url": spec.url,
        "headers": {k: secret_document_value(v, secrets) for k, v in spec.headers.items()},
    }
    if spec.tool_timeout_secs is not None:
        out["tool_timeout_secs"] = spec.tool_timeout_secs
    return out


def _mcp_bundle_document(spec: McpBundleSpec) -> dict[str, Any]:
    return {"servers": list(spec.servers), "exclude": list(spec.exclude)}


def snapshot_to_document(snapshot: ConfigSnapshot, *, secrets: str = "mask") -> dict[str, Any]:
    """The JSON-able document of a snapshot, in the same shape as the TOML export.

    A stored api_key is the mask (`secrets="mask"`, what anyone is shown) or, for a document
    that is read back into a snapshot in this process, its token (`secrets="keep"`)."""
    providers: dict[str, dict[str, Any]] = {}
    for spec in sorted(snapshot.providers.values(), key=lambda p: (p.type, p.alias)):
        providers.setdefault(spec.type, {})[spec.alias] = _provider_document(spec, secrets)
    d = snapshot.delegate
    return {
        "delegate": {name: getattr(d, name) for name in _DELEGATE_FIELDS},
        "providers": {"models": providers},
        "risk_profiles": {
            a: _risk_document(snapshot.risk_profiles[a]) for a in sorted(snapshot.risk_profiles)
        },
        "runtime_profiles": {
            a: _runtime_document(snapshot.runtime_profiles[a]) for a in sorted(snapshot.runtime_profiles)
        },
        "agents": {a: _agent_document(snapshot.agents[a]) for a in sorted(snapshot.agents)},
        "mcp": {
            "enabled": snapshot.mcp.enabled,
            "deferred_loading": snapshot.mcp.deferred_loading,
            "servers": [
                _mcp_server_document(snapshot.mcp_servers[n], secrets) for n in sorted(snapshot.mcp_servers)
            ],
        },
        "mcp_bundles": {
            a: _mcp_bundle_document(snapshot.mcp_bundles[a]) for a in sorted(snapshot.mcp_bundles)
        },
    }


def _drop_nulls(value: Any) -> Any:
    # TOML has no null; inside a script a missing key reads the same as a null one.
    if isinstance(value, Mapping):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_drop_nulls(v) for v in value if v is not None]
    return value


def _inline_item(value: Any) -> Item:
    """A value inside an array or inline table: always on one line."""
    if isinstance(value, Mapping):
        table = tomlkit.inline_table()
        for key, sub in value.items():
            item = _inline_item(sub)
            if not table:
                item.trivia.indent = " "
            table.append(key, item)
        if value:
            table.append(None, tomlkit.ws(" "))
        return table
    if isinstance(value, list | tuple):
        # Built in one go: tomlkit's append re-indexes the whole array each time (quadratic;
        # seconds for a list of 1,000 commands). The same items and separators append writes.
        parts: list[Item] = []
        for i, sub in enumerate(value):
            if i:
                parts += [Whitespace(","), Whitespace(" ")]
            parts.append(_inline_item(sub))
        return Array(parts, Trivia())
    if isinstance(value, str):
        return _basic_string(value)
    return tomlkit.item(value)


def _basic_string(text: str) -> Item:
    """A one-line TOML string. JSON's escapes are TOML's (DEL aside, which TOML wants escaped),
    and json's C encoder is far faster than tomlkit's escaping for big lists."""
    escaped = json.dumps(text, ensure_ascii=False)[1:-1].replace("\x7f", "\\u007f")
    return String(StringType.SLB, text, escaped, Trivia())


def _string_item(text: str) -> Item:
    if "\n" not in text:
        return _basic_string(text)
    if "\r" not in text:
        candidate = tomlkit.string(text, multiline=True)
        # Multi-line strings trim a leading newline and treat some endings specially; only keep
        # the readable form when it provably reads back as the same text.
        try:
            if tomllib.loads(f"v = {candidate.as_string()}")["v"] == text:
                return candidate
        except tomllib.TOMLDecodeError:
            pass
    return tomlkit.string(text)


def _value_item(key: str, value: Any) -> Item:
    """A value directly under a table key: long arrays get one item per line."""
    if isinstance(value, str):
        return _string_item(value)
    item = _inline_item(value)
    if isinstance(item, Array) and len(value) > 1:
        if len(key) + 3 + len(item.as_string()) > _MAX_INLINE_WIDTH:
            item.multiline(True)
    return item


def _table(entries: Mapping[str, Any], *, nested: bool = True) -> Table:
    """A `[section]` table; `nested` lets the known sub-tables and `script` rules have headers."""
    table = tomlkit.table()
    for key, value in entries.items():
        if nested and key == "script" and _is_rule_list(value):
            aot = tomlkit.aot()
            for rule in value:
                aot.append(_table(rule, nested=False))
            table.add(key, aot)
        elif nested and key in ("delegation_policy", "workspace") and isinstance(value, Mapping):
            table.add(key, _table(value, nested=False))
        else:
            table.add(key, _value_item(key, value))
    return table


def _is_rule_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(rule, Mapping) for rule in value)


def _super_table() -> Table:
    return tomlkit.table(is_super_table=True)


def export_toml(snapshot: ConfigSnapshot) -> str:
    """The deterministic TOML of a snapshot (sections and aliases sorted; see module doc)."""
    document = _drop_nulls(snapshot_to_document(snapshot))
    toml = tomlkit.document()
    toml.add("delegate", _table(document["delegate"]))
    models = document["providers"]["models"]
    if models:
        providers_table = _super_table()
        models_table = _super_table()
        for ty, by_alias in models.items():
            type_table = _super_table()
            for alias, entry in by_alias.items():
                type_table.add(alias, _table(entry))
            models_table.add(ty, type_table)
        providers_table.add("models", models_table)
        toml.add("providers", providers_table)
    for section in ("risk_profiles", "runtime_profiles", "agents"):
        if document[section]:
            section_table = _super_table()
            for alias, entry in document[section].items():
                section_table.add(alias, _table(entry))
            toml.add(section, section_table)
    mcp = document["mcp"]
    mcp_table = tomlkit.table()
    mcp_table.add("enabled", mcp["enabled"])
    mcp_table.add("deferred_loading", mcp["deferred_loading"])
    if mcp["servers"]:
        servers = tomlkit.aot()
        for server in mcp["servers"]:
            servers.append(_table(server, nested=False))
        mcp_table.add("servers", servers)
    toml.add("mcp", mcp_table)
    if document["mcp_bundles"]:
        bundles_table = _super_table()
        for alias, entry in document["mcp_bundles"].items():
            bundles_table.add(alias, _table(entry))
        toml.add("mcp_bundles", bundles_table)
    return tomlkit.dumps(toml)


# --- diffs ----------------------------------------------------------------------------------------


def diff_snapshots(old: ConfigSnapshot, new: ConfigSnapshot) -> str:
    """A unified diff of the two TOML exports; empty when they are the same."""
    return diff_texts(export_toml(old), export_toml(new))


# Below this many line pairs difflib's exact diff is cheap; above, the near-linear one is used.
_SMALL_DIFF = 250_000


def diff_texts(before: str, after: str) -> str:
    """A unified diff (`current` → `new`) in near-linear time, whatever the sizes.

    difflib's matcher grows faster than linearly on long runs of similar lines (a list of
    100,000 commands took minutes). Large texts are diffed the "patience" way instead: lines
    that occur once on each side anchor the alignment (longest increasing subsequence,
    n log n), the regions between anchors are handled the same way, and a region without any
    anchor is small enough for difflib or shown as replaced."""
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    if a == b:
        return ""
    if len(a) * len(b) <= _SMALL_DIFF:
        return "".join(difflib.unified_diff(a, b, fromfile="current", tofile="new"))
    return _unified(a, b, _opcodes(a, b, _matching_lines(a, b)))


def _longest_increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of `pairs` (sorted by first) increasing in the second."""
    tails: list[int] = []  # index into pairs of the smallest tail of each length
    back: list[int] = [-1] * len(pairs)
    tail_values: list[int] = []
    for k, (_, j) in enumerate(pairs):
        pos = bisect.bisect_left(tail_values, j)
        if pos:
            back[k] = tails[pos - 1]
        if pos == len(tails):
            tails.append(k)
            tail_values.append(j)
        else:
            tails[pos] = k
            tail_values[pos] = j
    out: list[tuple[int, int]] = []
    k = tails[-1] if tails else -1
    while k != -1:
        out.append(pairs[k])
        k = back[k]
    return out[::-1]


def _matching_lines(a: list[str], b: list[str]) -> list[tuple[int, int]]:
    matches: list[tuple[int, int]] = []
    work = [(0, len(a), 0, len(b))]
    while work:
        alo, ahi, blo, bhi = work.pop()
        while alo < ahi and blo < bhi and a[alo] == b[blo]:
            matches.append((alo, blo))
            alo, blo = alo + 1, blo + 1
        while alo < ahi and blo < bhi and a[ahi - 1] == b[bhi - 1]:
            ahi, bhi = ahi - 1, bhi - 1
            matches.append((ahi, bhi))
        if alo == ahi or blo == bhi:
            continue
        count_a = Counter(a[alo:ahi])
        count_b = Counter(b[blo:bhi])
        where_b = {b[j]: j for j in range(blo, bhi) if count_b[b[j]] == 1 and count_a.get(b[j]) == 1}
        anchors = _longest_increasing([(i, where_b[a[i]]) for i in range(alo, ahi) if a[i] in where_b])
        if not anchors:
            if (ahi - alo) * (bhi - blo) <= _SMALL_DIFF:
                matcher = difflib.SequenceMatcher(None, a[alo:ahi], b[blo:bhi], autojunk=False)
                for i, j, size in matcher.get_matching_blocks():
                    matches.extend((alo + i + k, blo + j + k) for k in range(size))
            continue
        prev_i, prev_j = alo, blo
        for i, j in anchors:
            work.append((prev_i, i, prev_j, j))
            matches.append((i, j))
            prev_i, prev_j = i + 1, j + 1
        work.append((prev_i, ahi, prev_j, bhi))
    matches.sort()
    return matches


def _opcodes(
    a: list[str], b: list[str], matches: list[tuple[int, int]]
) -> list[tuple[str, int, int, int, int]]:
    codes: list[tuple[str, int, int, int, int]] = []
    i = j = 0
    for mi, mj in [*matches, (len(a), len(b))]:
        if mi > i or mj > j:
            tag = "replace" if mi > i and mj > j else ("delete" if mi > i else "insert")
            codes.append((tag, i, mi, j, mj))
        if mi < len(a) and mj < len(b):
            if codes and codes[-1][0] == "equal" and codes[-1][2] == mi and codes[-1][4] == mj:
                last = codes[-1]
                codes[-1] = ("equal", last[1], mi + 1, last[3], mj + 1)
            else:
                codes.append(("equal", mi, mi + 1, mj, mj + 1))
        i, j = mi + 1, mj + 1
    return codes


def _range(start: int, stop: int) -> str:
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start + 1 if length else start},{length}"


def _unified(
    a: list[str], b: list[str], codes: list[tuple[str, int, int, int, int]], context: int = 3
) -> str:
    """Hunks with `context` lines around each change, in the format of `diff -u`."""
    out = ["--- current\n", "+++ new\n"]
    changed = [k for k, code in enumerate(codes) if code[0] != "equal"]
    groups: list[list[tuple[str, int, int, int, int]]] = []
    for k in changed:
        tag, i1, i2, j1, j2 = codes[k]
        if groups:
            _, _, li2, _, lj2 = groups[-1][-1]
            gap = i1 - li2
            if gap <= 2 * context:
                if gap:
                    groups[-1].append(("equal", li2, i1, lj2, j1))
                groups[-1].append(codes[k])
                continue
        groups.append([codes[k]])
    for group in groups:
        first, last = group[0], group[-1]
        i1 = max(0, first[1] - context)
        j1 = max(0, first[3] - context)
        i2 = min(len(a), last[2] + context)
        j2 = min(len(b), last[4] + context)
        out.append(f"@@ -{_range(i1, i2)} +{_range(j1, j2)} @@\n")
        out.extend(" " + line for line in a[i1 : first[1]])
        for tag, ci1, ci2, cj1, cj2 in group:
            if tag == "equal":
                out.extend(" " + line for line in a[ci1:ci2])
                continue
            out.extend("-" + line for line in a[ci1:ci2])
            out.extend("+" + line for line in b[cj1:cj2])
        out.extend(" " + line for line in a[last[2] : i2])
    return "".join(out)


def _entries(document: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield "delegate", document["delegate"]
    for ty, by_alias in document["providers"]["models"].items():
        for alias, entry in by_alias.items():
            yield f"providers.models.{ty}.{alias}", entry
    for section in ("risk_profiles", "runtime_profiles", "agents"):
        for alias, entry in document[section].items():
            yield f"{section}.{alias}", entry
    mcp = document["mcp"]
    yield "mcp", {"enabled": mcp["enabled"], "deferred_loading": mcp["deferred_loading"]}
    for server in mcp["servers"]:
        yield f"mcp.servers.{server['name']}", server
    for alias, entry in document["mcp_bundles"].items():
        yield f"mcp_bundles.{alias}", entry


def summarize_diff(old: ConfigSnapshot, new: ConfigSnapshot) -> list[str]:
    """One line per added (`+`), removed (`-`) or changed (`~`, with its fields) entry."""
    # Tokens, not masks: a changed key is a changed entry (the diff itself never shows either).
    before = dict(_entries(snapshot_to_document(old, secrets="keep")))
    after = dict(_entries(snapshot_to_document(new, secrets="keep")))
    order = {section: i for i, section in enumerate(_SECTIONS)}

    def sort_key(path: str) -> tuple[int, str]:
        return order[path.split(".", 1)[0]], path

    lines: list[str] = []
    for path in sorted(before.keys() | after.keys(), key=sort_key):
        if path not in before:
            lines.append(f"+ {path}")
        elif path not in after:
            lines.append(f"- {path}")
        else:
            old_entry, new_entry = before[path], after[path]
            names = list(new_entry) + [k for k in old_entry if k not in new_entry]
            changed = [k for k in names if old_entry.get(k) != new_entry.get(k)]
            if changed:
                lines.append(f"~ {path}: {', '.join(changed)}")
    return lines


__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_NESTING_DEPTH",
    "ConfigParseError",
    "ConfigShapeError",
    "ImportResult",
    "diff_snapshots",
    "diff_texts",
    "document_to_snapshot",
    "export_toml",
    "parse_toml",
    "snapshot_to_document",
    "summarize_diff",
]
