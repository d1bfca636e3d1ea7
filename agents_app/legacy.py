"""ZeroClaw's schema versions: which layout a `config.toml` is in, and the v1/v2 layout moved
to the current one (`[providers.models…]`, `[risk_profiles…]`, `[runtime_profiles…]`,
`[agents…]`) before it is read.

ZeroClaw's current layout is schema 3; a file without `schema_version` is v1 to ZeroClaw. A
Clawboard export has no `schema_version` either, so a file without it is read as v1 only when
it holds v1's top-level keys (`model_providers`, `autonomy`, `default_model`, …). The v1 and v2
layouts share the parts Clawboard models (v2 changed channels, gateway and cost), so one
migration serves both. Every key moved is said in a note; every key left out stays in the
document, where the reader lists it as skipped with its path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

CURRENT_SCHEMA_VERSION = 3
LEGACY_KEYS: tuple[str, ...] = (
    "api_key",
    "api_url",
    "api_path",
    "default_provider",
    "default_model_provider",
    "default_model",
    "model_providers",
    "default_temperature",
    "provider_timeout_secs",
    "provider_max_tokens",
    "autonomy",
    "agent",
)
# ZeroClaw's default provider when a v1 file names a model but no provider.
DEFAULT_LEGACY_PROVIDER = "openrouter"
# v1 tool names that Clawboard (and ZeroClaw since) call otherwise.
LEGACY_TOOL_NAMES: dict[str, str] = {
    "read_file": "file_read",
    "write_file": "file_write",
    "list_directory": "file_list",
    "list_dir": "file_list",
}

_PROVIDER_KEYS = {
    "model": "model",
    "api_key": "api_key",
    "temperature": "temperature",
    "timeout_secs": "timeout_secs",
    "max_tokens": "max_tokens",
    "base_url": "uri",
    "api_url": "uri",
    "uri": "uri",
}
_TOP_PROVIDER_KEYS = {
    "default_model": "model",
    "api_key": "api_key",
    "default_temperature": "temperature",
    "api_url": "uri",
    "provider_timeout_secs": "timeout_secs",
    "provider_max_tokens": "max_tokens",
}
_RISK_KEYS = (
    "level",
    "workspace_only",
    "allowed_roots",
    "allowed_path",
    "allowed_paths",
    "allowed_roots_read_only",
    "allowed_roots_write_only",
    "forbidden_paths",
    "allowed_commands",
    "shell_env_passthrough",
    "block_high_risk_commands",
    "require_approval_for_medium_risk",
    "allowed_tools",
    "excluded_tools",
    "auto_approve",
    "always_ask",
)
_AUTONOMY_RUNTIME_KEYS = ("max_actions_per_hour", "max_cost_per_day_cents", "shell_timeout_secs")
_AGENT_RUNTIME_KEYS = ("max_tool_iterations", "parallel_tools", "max_tool_result_chars")
_LEGACY_AGENT_KEYS = ("provider", "model", "system_prompt", "api_key", "temperature")
_TOOL_LISTS = ("allowed_tools", "excluded_tools", "auto_approve", "always_ask")


class SchemaVersionError(ValueError):
    pass


def schema_version(doc: Mapping[str, Any]) -> int | None:
    """The file's `schema_version` (None when absent); refuses one Clawboard cannot read."""
    if "schema_version" not in doc:
        return None
    value = doc["schema_version"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SchemaVersionError(f"schema_version must be a positive integer (got {value!r})")
    if value > CURRENT_SCHEMA_VERSION:
        raise SchemaVersionError(
            f"schema_version {value} is newer than Clawboard can import "
            f"(ZeroClaw schema versions 1 to {CURRENT_SCHEMA_VERSION})"
        )
    return value


def is_legacy(doc: Mapping[str, Any], version: int | None) -> bool:
    """A v1/v2 layout: a version below 3 (or none) and v1's top-level keys to move."""
    if version is not None and version >= CURRENT_SCHEMA_VERSION:
        return False
    return any(key in doc for key in LEGACY_KEYS)


def _table(value: Any) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def _rename_tools(profile: dict[str, Any], base: str, notes: list[str]) -> None:
    for name in _TOOL_LISTS:
        values = profile.get(name)
        if not isinstance(values, list):
            continue
        renamed = [LEGACY_TOOL_NAMES.get(v, v) if isinstance(v, str) else v for v in values]
        for old, new in zip(values, renamed, strict=True):
            if old != new:
                notes.append(f'{base}.{name}: read v1 tool name "{old}" as "{new}"')
        profile[name] = renamed


def migrate(doc: Mapping[str, Any], version: int | None) -> tuple[dict[str, Any], list[str], list[str]]:
    """The document in the current layout, one note per key moved, and the paths of the
    legacy keys left out."""
    out: dict[str, Any] = {k: v for k, v in doc.items() if k != "schema_version"}
    notes = [f"read a ZeroClaw schema {version or 1} file and moved it to the current layout"]
    skipped: list[str] = []
    models: dict[str, dict[str, Any]] = {}
    existing = _table((_table(out.get("providers")) or {}).get("models"))
    for ty, by_alias in (existing or {}).items():
        if isinstance(by_alias, Mapping):
            models[ty] = dict(by_alias)

    def provider(ty: str, alias: str) -> dict[str, Any]:
        return models.setdefault(ty, {}).setdefault(alias, {})

    legacy_providers = _table(out.pop("model_providers", None))
    for name, raw in (legacy_providers or {}).items():
        raw_table = _table(raw)
        if raw_table is None:
            skipped.append(f"model_providers.{name}")
            continue
        entry = provider(str(name), "default")
        for key, value in raw_table.items():
            if key in _PROVIDER_KEYS:
                entry.setdefault(_PROVIDER_KEYS[key], value)
            else:
                skipped.append(f"model_providers.{name}.{key}")
        notes.append(f"model_providers.{name} -> providers.models.{name}.default")

    default_name = out.pop("default_provider", None) or out.pop("default_model_provider", None)
    out.pop("default_model_provider", None)
    top = {_TOP_PROVIDER_KEYS[k]: out.pop(k) for k in list(_TOP_PROVIDER_KEYS) if k in out}
    if not isinstance(default_name, str) or not default_name.strip():
        default_name = DEFAULT_LEGACY_PROVIDER if top or legacy_providers else None
    if default_name is not None:
        default_name = default_name.strip()
        entry = provider(default_name, "default")
        for key, value in top.items():
            entry.setdefault(key, value)
        if top:
            notes.append(
                f"top-level {', '.join(sorted(k for k in _TOP_PROVIDER_KEYS if _TOP_PROVIDER_KEYS[k] in top))}"
                f" -> providers.models.{default_name}.default"
            )

    risks = dict(_table(out.get("risk_profiles")) or {})
    runtimes = dict(_table(out.get("runtime_profiles")) or {})
    autonomy = _table(out.pop("autonomy", None))
    if autonomy is not None:
        risk = dict(_table(risks.get("default")) or {})
        runtime = dict(_table(runtimes.get("default")) or {})
        for key, value in autonomy.items():
            if key in _RISK_KEYS:
                risk.setdefault(key, value)
            elif key in _AUTONOMY_RUNTIME_KEYS:
                runtime.setdefault(key, value)
            else:
                skipped.append(f"autonomy.{key}")
        _rename_tools(risk, "autonomy", notes)
        risks["default"] = risk
        if runtime:
            runtimes["default"] = runtime
        notes.append(
            "autonomy -> risk_profiles.default" + (" and runtime_profiles.default" if runtime else "")
        )
    agent = _table(out.pop("agent", None))
    if agent is not None:
        runtime = dict(_table(runtimes.get("default")) or {})
        for key, value in agent.items():
            if key in _AGENT_RUNTIME_KEYS:
                runtime.setdefault(key, value)
            else:
                skipped.append(f"agent.{key}")
        runtimes["default"] = runtime
        notes.append("agent -> runtime_profiles.default")

    agents = dict(_table(out.get("agents")) or {})
    for name, raw in list(agents.items()):
        raw_table = _table(raw)
        if raw_table is None or "model_provider" in raw_table or "provider" not in raw_table:
            continue
        ptype = str(raw_table.get("provider", "")).strip() or (default_name or DEFAULT_LEGACY_PROVIDER)
        entry = provider(ptype, str(name))
        new_agent: dict[str, Any] = {"model_provider": f"{ptype}.{name}", "risk_profile": "default"}
        for key, value in raw_table.items():
            if key in ("model", "api_key", "temperature"):
                entry[key] = value
            elif key == "system_prompt":
                new_agent[key] = value
            elif key != "provider":
                new_agent[key] = value  # left for the reader: modelled, or skipped with its path
        risks.setdefault("default", {})
        agents[name] = new_agent
        notes.append(
            f"agents.{name} (v1 delegate agent) -> agents.{name} with providers.models.{ptype}.{name}"
        )
    if default_name is not None and "default" not in agents:
        risks.setdefault("default", {})
        agents["default"] = {
            "model_provider": f"{default_name}.default",
            "risk_profile": "default",
            "runtime_profile": "default" if "default" in runtimes else "",
        }
        notes.append(f"the main agent -> agents.default (model_provider = {default_name}.default)")

    for ty, by_alias in models.items():
        for alias, entry in by_alias.items():
            key = entry.get("api_key")
            # ZeroClaw's own template puts Ollama's base URL in the top-level api_key.
            if isinstance(key, str) and key.startswith(("http://", "https://")) and not entry.get("uri"):
                entry["uri"] = entry.pop("api_key")
                notes.append(f"providers.models.{ty}.{alias}: api_key holds a URL; read as uri")
    if models:
        providers = dict(_table(out.get("providers")) or {})
        providers["models"] = models
        out["providers"] = providers
    if risks:
        out["risk_profiles"] = risks
    if runtimes:
        out["runtime_profiles"] = runtimes
    if agents:
        out["agents"] = agents
    return out, notes, skipped
