"""Create, change and delete ONE configuration entry (agent, profile, provider).

REST and the dashboard both come here. The body is the JSON form of the entry
(`representation.entry_to_json`); it is applied to the current configuration as a document
and re-read by the same parser as TOML import, then the whole result is validated and saved
with a revision — all inside one transaction, so two concurrent edits cannot undo each other."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

from django.db import transaction

from agents_app.config_io import (
    ConfigParseError,
    ConfigShapeError,
    document_to_snapshot,
    snapshot_to_document,
)
from agents_app.representation import entry_to_document_body, entry_to_json
from agents_app.selectors import config_snapshot_get
from agents_app.services import ConfigValidationError, config_replace
from agents_app.snapshot import ALIAS_RE, ConfigSnapshot
from agents_app.validation import (
    delete_agent,
    delete_agent_plan,
    rename_agent,
    validate_new_agent_alias,
    validate_snapshot,
)

Error = tuple[str, str]
KIND_LABEL = {
    "agents": "agent",
    "risk_profiles": "risk profile",
    "runtime_profiles": "runtime profile",
    "providers": "model provider",
}
# config_io words an unmodeled key as a warning (a ZeroClaw file imports as it is); through
# CRUD the body is Clawboard's own shape, so an unknown field there is a mistake.
_UNKNOWN_WARNING = re.compile(r'^skipped unknown (?:field|key) (".*")$')


class EntryNotFound(Exception):
    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"No {KIND_LABEL[kind]} '{key}'.")


def doc_set(doc: dict[str, Any], kind: str, key: str, body: dict[str, Any] | None) -> None:
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
    errors = _unknown_field_errors(result.warnings) + validate_snapshot(result.snapshot)
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
    alias = body.get("alias")
    errors: list[Error] = []
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


def _new_key_errors(kind: str, key: str, body: dict[str, Any], snap: ConfigSnapshot) -> list[Error]:
    errors: list[Error] = []
    if kind == "agents" and isinstance(body.get("alias"), str):
        reserved = validate_new_agent_alias(body["alias"])
        if reserved:
            errors.append(("alias", reserved))
    if key in getattr(snap, kind):
        errors.append(("alias", f"{KIND_LABEL[kind]} {key} already exists"))
    return errors


def plan_entry(
    snap: ConfigSnapshot, *, kind: str, key: str | None, body: dict[str, Any], partial: bool = False
) -> tuple[str, ConfigSnapshot]:
    """The configuration as it would be after this create (key None) or change. Pure; raises
    ConfigValidationError with every error at once."""
    if key is not None:
        current = getattr(snap, kind).get(key)
        if current is None:
            raise EntryNotFound(kind, key)
        old = entry_to_json(current)
        body = merge_patch(old, body) if partial else dict(body)
        body.setdefault("alias", old["alias"])
        if kind == "providers":
            body.setdefault("type", old["type"])
    new_key, errors = key_from_body(kind, body)
    if errors:
        raise ConfigValidationError(errors)
    if new_key != key:
        errors = _new_key_errors(kind, new_key, body, snap)
        if errors:
            raise ConfigValidationError(errors)
        if kind == "agents" and key is not None:
            snap = rename_agent(snap, key, new_key)
    doc = snapshot_to_document(snap)
    if key is not None:
        doc_set(doc, kind, key, None)
    doc_set(doc, kind, new_key, entry_to_document_body(body, kind))
    return new_key, rebuild(doc)


def entry_save(
    *, kind: str, key: str | None, body: dict[str, Any], user: Any = None, partial: bool = False
) -> tuple[str, Any]:
    """Create (key None) or change one entry. Returns (its key, its spec)."""
    with transaction.atomic():
        new_key, new = plan_entry(config_snapshot_get(), kind=kind, key=key, body=body, partial=partial)
        verb = "create" if key is None else "update"
        summary = f"{verb} {kind}.{key or new_key}" + (f" -> {new_key}" if key and new_key != key else "")
        config_replace(snapshot=new, user=user, summary=summary)
    return new_key, getattr(new, kind)[new_key]


def delete_plan(snap: ConfigSnapshot, *, kind: str, key: str) -> tuple[list[str], ConfigSnapshot]:
    if key not in getattr(snap, kind):
        raise EntryNotFound(kind, key)
    if kind == "agents":
        return [f"remove agents.{key}", *delete_agent_plan(snap, key)], delete_agent(snap, key)
    remaining = {k: v for k, v in getattr(snap, kind).items() if k != key}
    return [f"remove {kind}.{key}"], dataclasses.replace(snap, **{kind: remaining})  # type: ignore[arg-type]


def entry_delete(*, kind: str, key: str, user: Any = None, dry_run: bool = False) -> dict[str, Any]:
    """Delete one entry (agents: scrubbing references first). A dry run returns the plan and
    the validation errors the deletion would cause, and changes nothing."""
    with transaction.atomic():
        plan, new = delete_plan(config_snapshot_get(), kind=kind, key=key)
        errors = validate_snapshot(new)
        if dry_run:
            return {"dry_run": True, "plan": plan, "errors": [{"field": f, "message": m} for f, m in errors]}
        config_replace(snapshot=new, user=user, summary=f"delete {kind}.{key}")
    return {"dry_run": False, "plan": plan, "errors": []}
