"""Whole-configuration validation (SPEC §2.5) and alias-reference rewrites.

Pure functions over a `ConfigSnapshot`: no ORM, no I/O. Every check runs, so one call
reports every error of a snapshot as `(field path, message)` pairs; callers save nothing
when the list is non-empty.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import replace

from agents_app.snapshot import (
    ALIAS_RE,
    DELEGATE_MODES,
    ENV_NAME_RE,
    RESERVED_AGENT_ALIAS,
    AgentSpec,
    ConfigSnapshot,
    DelegateEntry,
    ProviderSpec,
)
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
MAX_LENGTHS: dict[str, int] = {"type": 32, "model": 200, "uri": 500, "api_key_env": 128, "workspace": 500}

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
    for alias in sorted(snapshot.risk_profiles):
        errors.extend(_validate_risk_profile(alias, snapshot.risk_profiles[alias]))
    for alias in sorted(snapshot.runtime_profiles):
        errors.extend(_validate_runtime_profile(alias, snapshot.runtime_profiles[alias]))
    for key in sorted(snapshot.providers):
        errors.extend(_validate_provider(snapshot, snapshot.providers[key]))
    errors.extend(_validate_delegate_globals(snapshot))
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
    return errors


def _validate_risk_profile(p: str, spec: RiskProfileSpec) -> list[Error]:
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
    for i, name in enumerate(spec.shell_env_passthrough):
        if not ENV_NAME_RE.match(name):
            path = f"{base}.shell_env_passthrough[{i}]"
            errors.append((path, f"{path} is invalid ({name}); expected {ENV_PATTERN}"))
    return errors


def _validate_runtime_profile(r: str, spec: RuntimeProfileSpec) -> list[Error]:
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
        if not (math.isfinite(value) and value >= 0):
            path = f"{base}.pricing.{name}"
            errors.append((path, f"{path} must be a number of 0 or more (got {_number_text(value)})"))

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

    path = f"{base}.script"
    if not isinstance(spec.script, list | tuple):
        errors.append((path, f"{path} must be a list of rules (tables)"))
    else:
        for i, rule in enumerate(spec.script):
            if not isinstance(rule, dict):
                errors.append((f"{path}[{i}]", f"{path}[{i}] must be a table"))
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
