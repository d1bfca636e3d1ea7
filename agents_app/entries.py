"""Create, change and delete ONE configuration entry (agent, profile, provider, MCP server or
bundle), and the `[mcp]` switches.

REST and the dashboard both come here. The body is the JSON form of the entry
(`representation.entry_to_json`); it is applied to the current configuration as a document
and re-read by the same parser as TOML import, then the whole result is validated and saved
with a revision. The read and the write happen in one transaction (`config_update`), so two
concurrent edits can never undo each other."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from agents_app.config_io import (
    ConfigParseError,
    ConfigShapeError,
    document_to_snapshot,
    snapshot_to_document,
)
from agents_app.representation import entry_to_document_body, entry_to_json
from agents_app.secrets import MASK
from agents_app.services import ConfigValidationError, config_update
from agents_app.snapshot import ALIAS_RE, ConfigSnapshot, McpGlobals, McpServerSpec
from agents_app.validation import (
    delete_agent,
    delete_agent_plan,
    delete_mcp_bundle,
    delete_mcp_bundle_plan,
    delete_mcp_server,
    delete_mcp_server_plan,
    rename_agent,
    rename_mcp_bundle,
    rename_mcp_server,
    validate_new_agent_alias,
    validate_snapshot,
)

Error = tuple[str, str]
KIND_LABEL = {
    "agents": "agent",
    "risk_profiles": "risk profile",
    "runtime_profiles": "runtime profile",
    "providers": "model provider",
    "mcp_servers": "MCP server",
    "mcp_bundles": "MCP bundle",
}
# config_io words an unmodeled key as a warning (a ZeroClaw file imports as it is); through
# CRUD the body is Clawboard's own shape, so an unknown field there is a mistake.
_UNKNOWN_WARNING = re.compile(r'^skipped unknown (?:field|key) (".*")$')


class EntryNotFound(Exception):
    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"No {KIND_LABEL[kind]} '{key}'.")


def doc_set(doc: dict[str, Any], kind: str, key: str, body: dict[str, Any] | None) -> None:
    if kind == "mcp_servers":
        servers = [s for s in doc.setdefault("mcp", {}).get("servers", []) if s.get("name") != key]
        if body is not None:
            servers.append({"name": key, **body})
        doc["mcp"]["servers"] = servers
        return
    if kind == "providers":
        ptype, _, alias = key.partition(".")
        models = doc.setdefault("providers", {}).setdefault("models", {})
        if body is None:
            models.get(ptype, {}).pop(alias, None)
        else:
            models.setdefault(ptype, {})[alias] = body
        return
    section = doc.setdefault(kind, {})
    if body is None:
        section.pop(key, None)
    else:
        section[key] = body


def _unknown_field_errors(warnings: list[str]) -> list[Error]:
    errors: list[Error] = []
    for warning in warnings:
        found = _UNKNOWN_WARNING.match(warning)
        if found is None:
            errors.append(("", warning))
            continue
        path = str(json.loads(found.group(1)))
        errors.append((path, f"{path} is not a known field"))
    return errors


def rebuild(doc: dict[str, Any]) -> ConfigSnapshot:
    """The snapshot of `doc`, or every shape, unknown-field and §2.5 error of it at once."""
    try:
        result = document_to_snapshot(doc)
    except ConfigShapeError as exc:
        raise ConfigValidationError(list(exc.errors)) from exc
    except ConfigParseError as exc:
        raise ConfigValidationError([("", str(exc))]) from exc
    warnings = [w for w in result.warnings if w not in result.notes]
    errors = _unknown_field_errors(warnings) + validate_snapshot(result.snapshot)
    if errors:
        raise ConfigValidationError(errors)
    return result.snapshot


def merge_patch(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """PATCH semantics: nested tables (pricing, delegation_policy) merge; other values replace."""
    merged = dict(current)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_patch(merged[key], value)
        else:
            merged[key] = value
    return merged


def key_from_body(kind: str, body: dict[str, Any]) -> tuple[str, list[Error]]:
    errors: list[Error] = []
    if kind == "mcp_servers":
        # The name's own rules come from the validator, with the paths of the configuration.
        name = body.get("name")
        if not isinstance(name, str) or not name.strip() or "/" in name:
            errors.append(("name", "name must be a non-empty string such as filesystem"))
            name = ""
        return name, errors
    alias = body.get("alias")
    if not isinstance(alias, str) or not ALIAS_RE.match(alias):
        errors.append(("alias", "alias must match [a-z0-9][a-z0-9_-]{0,63}"))
        alias = ""
    if kind != "providers":
        return alias, errors
    ptype = body.get("type")
    if not isinstance(ptype, str) or not ALIAS_RE.match(ptype):
        errors.append(("type", "type must be a provider family such as scripted, openai, ollama, anthropic"))
        ptype = ""
    return f"{ptype}.{alias}", errors


def _get(snap: ConfigSnapshot, kind: str, key: str) -> Any:
    spec = getattr(snap, kind).get(key)
    if spec is None:
        raise EntryNotFound(kind, key)
    return spec


def create_key(kind: str, body: dict[str, Any]) -> str:
    """The key a create would use, or every error of the alias (and type) at once."""
    key, errors = key_from_body(kind, body)
    if kind == "agents" and isinstance(body.get("alias"), str):
        reserved = validate_new_agent_alias(body["alias"])
        if reserved:
            errors.append(("alias", reserved))
    if errors:
        raise ConfigValidationError(errors)
    return key


def update_key(kind: str, key: str, body: dict[str, Any]) -> str:
    """The key after an update: the body's alias (and type), or the current ones."""
    probe: dict[str, Any] = {"alias": body.get("alias", key)}
    if kind == "mcp_servers":
        probe = {"name": body.get("name", key)}
    if kind == "providers":
        ptype, _, alias = key.partition(".")
        probe = {"alias": body.get("alias", alias), "type": body.get("type", ptype)}
    new_key, errors = key_from_body(kind, probe)
    if errors:
        raise ConfigValidationError(errors)
    if new_key != key and kind == "agents":
        reserved = validate_new_agent_alias(new_key)
        if reserved:
            raise ConfigValidationError([("alias", reserved)])
    return new_key


def plan_create(snap: ConfigSnapshot, *, kind: str, body: dict[str, Any]) -> tuple[str, ConfigSnapshot]:
    key = create_key(kind, body)
    if key in getattr(snap, kind):
        raise ConfigValidationError([("alias", f"{KIND_LABEL[kind]} {key} already exists")])
    doc = snapshot_to_document(snap, secrets="keep")
    doc_set(doc, kind, key, entry_to_document_body(body, kind))
    return key, rebuild(doc)


def plan_update(
    snap: ConfigSnapshot, *, kind: str, key: str, body: dict[str, Any], partial: bool
) -> tuple[str, ConfigSnapshot]:
    current = entry_to_json(_get(snap, kind, key))
    new_key = update_key(kind, key, body)
    if new_key != key:
        if new_key in getattr(snap, kind):
            raise ConfigValidationError([("alias", f"{KIND_LABEL[kind]} {new_key} already exists")])
        if kind == "agents":
            # Renaming rewrites every reference (SPEC §2.5), the agent's own ones included.
            snap = rename_agent(snap, key, new_key)
            current = entry_to_json(snap.agents[new_key])
        elif kind == "mcp_servers":
            snap = rename_mcp_server(snap, key, new_key)
        elif kind == "mcp_bundles":
            snap = rename_mcp_bundle(snap, key, new_key)
    merged = merge_patch(current, body) if partial else dict(body)
    if kind == "mcp_servers":
        merged["name"] = new_key
        _keep_masked(merged, getattr(snap, kind).get(new_key) or _get(snap, kind, key))
    else:
        merged["alias"] = new_key.partition(".")[2] if kind == "providers" else new_key
    if kind == "providers":
        merged["type"] = new_key.partition(".")[0]
    doc = snapshot_to_document(snap, secrets="keep")
    doc_set(doc, kind, key, None)
    doc_set(doc, kind, new_key, entry_to_document_body(merged, kind))
    return new_key, rebuild(doc)


def _keep_masked(body: dict[str, Any], stored: McpServerSpec) -> None:
    """A masked `env`/`headers` value keeps the stored one, whatever the server is now called."""
    for field in ("env", "headers"):
        values = body.get(field)
        if not isinstance(values, dict):
            continue
        kept = getattr(stored, field)
        body[field] = {k: kept[k] if v == MASK and k in kept else v for k, v in values.items()}


def plan_delete(snap: ConfigSnapshot, *, kind: str, key: str) -> tuple[list[str], ConfigSnapshot]:
    """What deleting this entry does (agents: the references scrubbed from other agents; MCP
    servers and bundles: from bundles and agents)."""
    _get(snap, kind, key)
    if kind == "agents":
        return delete_agent_plan(snap, key), delete_agent(snap, key)
    if kind == "mcp_servers":
        return [f"remove mcp.servers.{key}", *delete_mcp_server_plan(snap, key)], delete_mcp_server(snap, key)
    if kind == "mcp_bundles":
        return [f"remove mcp_bundles.{key}", *delete_mcp_bundle_plan(snap, key)], delete_mcp_bundle(snap, key)
    remaining = {k: v for k, v in getattr(snap, kind).items() if k != key}
    return [f"remove {kind}.{key}"], dataclasses.replace(snap, **{kind: remaining})  # type: ignore[arg-type]


def entry_create(*, kind: str, body: dict[str, Any], user: Any = None) -> tuple[str, Any]:
    key = create_key(kind, body)
    new, _ = config_update(
        mutate=lambda snap: plan_create(snap, kind=kind, body=body)[1],
        user=user,
        summary=f"create {kind}.{key}",
    )
    return key, getattr(new, kind)[key]


def entry_update(
    *, kind: str, key: str, body: dict[str, Any], user: Any = None, partial: bool = False
) -> tuple[str, Any]:
    new_key = update_key(kind, key, body)
    summary = f"update {kind}.{key}" + (f" -> {new_key}" if new_key != key else "")
    new, _ = config_update(
        mutate=lambda snap: plan_update(snap, kind=kind, key=key, body=body, partial=partial)[1],
        user=user,
        summary=summary,
    )
    return new_key, getattr(new, kind)[new_key]


def entry_delete(*, kind: str, key: str, user: Any = None) -> None:
    config_update(
        mutate=lambda snap: plan_delete(snap, kind=kind, key=key)[1],
        user=user,
        summary=f"delete {kind}.{key}",
    )


def delete_dry_run(snap: ConfigSnapshot, *, kind: str, key: str) -> dict[str, Any]:
    plan, new = plan_delete(snap, kind=kind, key=key)
    errors = [{"field": f, "message": m} for f, m in validate_snapshot(new)]
    return {"dry_run": True, "plan": plan, "errors": errors}


def _mcp_settings_plan(snap: ConfigSnapshot, body: dict[str, Any], *, partial: bool) -> ConfigSnapshot:
    current = {"enabled": snap.mcp.enabled, "deferred_loading": snap.mcp.deferred_loading}
    merged = {**current, **body} if partial else dict(body)
    doc = snapshot_to_document(snap, secrets="keep")
    doc["mcp"] = {**merged, "servers": doc["mcp"]["servers"]}
    return rebuild(doc)


def mcp_settings_update(*, body: dict[str, Any], user: Any = None, partial: bool = False) -> McpGlobals:
    """The `[mcp]` switches (`enabled`, `deferred_loading`), saved with a revision."""
    if "servers" in body:
        raise ConfigValidationError(
            [("mcp.servers", "mcp.servers is edited one server at a time (/api/v1/mcp/servers/)")]
        )
    new, _ = config_update(
        mutate=lambda snap: _mcp_settings_plan(snap, body, partial=partial), user=user, summary="update mcp"
    )
    return new.mcp
