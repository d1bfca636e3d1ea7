"""REST API for configuration (SPEC §10): CRUD by alias, roster, tools, import/export, revisions."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, ClassVar

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import NotFound
from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents_app.api.errors import ConfigInvalid
from agents_app.api.parsers import JSONParser, TomlParser, TomlRenderer
from agents_app.api.permissions import ReadViewerWriteAdmin
from agents_app.config_io import (
    ConfigParseError,
    ConfigShapeError,
    diff_snapshots,
    document_to_snapshot,
    export_toml,
    parse_toml,
    snapshot_to_document,
    summarize_diff,
)
from agents_app.models import ConfigRevision
from agents_app.representation import entry_to_document_body, entry_to_json
from agents_app.selectors import config_revision_list, config_snapshot_get
from agents_app.services import ConfigValidationError, config_replace, config_revision_restore
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
_OBJECT_LIST: dict[str, Any] = {"type": "array", "items": {"type": "object", "additionalProperties": True}}


def _bool_param(request: Request, name: str) -> bool:
    return str(request.query_params.get(name, "")).lower() in ("1", "true", "yes", "on")


def _doc_set(doc: dict[str, Any], kind: str, key: str, body: dict[str, Any] | None) -> None:
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


def _rebuild(doc: dict[str, Any]) -> ConfigSnapshot:
    """The snapshot of `doc`, or every shape, unknown-field and §2.5 error of it at once."""
    try:
        result = document_to_snapshot(doc)
    except ConfigShapeError as exc:
        raise ConfigInvalid(list(exc.errors)) from exc
    except ConfigParseError as exc:
        raise ConfigInvalid([("", str(exc))]) from exc
    errors = _unknown_field_errors(result.warnings) + validate_snapshot(result.snapshot)
    if errors:
        raise ConfigInvalid(errors)
    return result.snapshot


def _save(snapshot: ConfigSnapshot, request: Request, summary: str) -> None:
    try:
        config_replace(snapshot=snapshot, user=request.user, summary=summary)
    except ConfigValidationError as exc:
        raise ConfigInvalid(exc.errors) from exc


def _object_body(request: Request) -> dict[str, Any]:
    body = request.data
    if not isinstance(body, dict):
        raise ConfigInvalid([("", "the body must be a JSON object")])
    return dict(body)


def _merge_patch(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """PATCH semantics: nested tables (pricing, delegation_policy) merge; other values replace."""
    merged = dict(current)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge_patch(merged[key], value)
        else:
            merged[key] = value
    return merged


def _key_from_body(kind: str, body: dict[str, Any]) -> tuple[str, list[Error]]:
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


class _EntrySchema(AutoSchema):
    """One operation id and tag per configuration kind (the views are shared by four kinds)."""

    actions: ClassVar[dict[str, str]] = {}

    def _kind(self) -> str:
        return str(getattr(self.view, "kind", "entries"))

    def get_operation_id(self) -> str:
        return f"{self._kind()}_{self.actions[self.method.upper()]}"

    def get_tags(self) -> list[str]:
        return [self._kind().replace("_", "-")]


class _ListSchema(_EntrySchema):
    actions: ClassVar[dict[str, str]] = {"GET": "list", "POST": "create"}


class _DetailSchema(_EntrySchema):
    actions: ClassVar[dict[str, str]] = {
        "GET": "retrieve",
        "PUT": "update",
        "PATCH": "partial_update",
        "DELETE": "destroy",
    }


class ConfigListApi(APIView):
    permission_classes = [ReadViewerWriteAdmin]
    parser_classes = [JSONParser]
    schema = _ListSchema()
    kind = "agents"

    @extend_schema(responses={200: _OBJECT_LIST})
    def get(self, request: Request) -> Response:
        snap = config_snapshot_get()
        return Response([entry_to_json(s) for s in getattr(snap, self.kind).values()])

    @extend_schema(request=OpenApiTypes.OBJECT, responses={201: OpenApiTypes.OBJECT})
    def post(self, request: Request) -> Response:
        body = _object_body(request)
        key, errors = _key_from_body(self.kind, body)
        if self.kind == "agents" and isinstance(body.get("alias"), str):
            reserved = validate_new_agent_alias(body["alias"])
            if reserved:
                errors.append(("alias", reserved))
        snap = config_snapshot_get()
        if key in getattr(snap, self.kind):
            errors.append(("alias", f"{KIND_LABEL[self.kind]} {key} already exists"))
        if errors:
            raise ConfigInvalid(errors)
        doc = snapshot_to_document(snap)
        _doc_set(doc, self.kind, key, entry_to_document_body(body, self.kind))
        new = _rebuild(doc)
        _save(new, request, f"create {self.kind}.{key}")
        return Response(entry_to_json(getattr(new, self.kind)[key]), status=status.HTTP_201_CREATED)


class ConfigDetailApi(APIView):
    permission_classes = [ReadViewerWriteAdmin]
    parser_classes = [JSONParser]
    schema = _DetailSchema()
    kind = "agents"

    def _get(self, snap: ConfigSnapshot, key: str) -> Any:
        spec = getattr(snap, self.kind).get(key)
        if spec is None:
            raise NotFound(f"No {KIND_LABEL[self.kind]} '{key}'.")
        return spec

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, key: str) -> Response:
        return Response(entry_to_json(self._get(config_snapshot_get(), key)))

    def _update(self, request: Request, key: str, *, partial: bool) -> Response:
        snap = config_snapshot_get()
        current = entry_to_json(self._get(snap, key))
        body = _object_body(request)
        merged = _merge_patch(current, body) if partial else body
        merged.setdefault("alias", current["alias"])
        if self.kind == "providers":
            merged.setdefault("type", current["type"])
        new_key, errors = _key_from_body(self.kind, merged)
        if errors:
            raise ConfigInvalid(errors)
        if new_key != key:
            if self.kind == "agents":
                reserved = validate_new_agent_alias(new_key)
                if reserved:
                    raise ConfigInvalid([("alias", reserved)])
            if new_key in getattr(snap, self.kind):
                raise ConfigInvalid([("alias", f"{KIND_LABEL[self.kind]} {new_key} already exists")])
            if self.kind == "agents":
                # Renaming rewrites every reference (SPEC §2.5), the agent's own ones included.
                snap = rename_agent(snap, key, new_key)
                if partial:
                    merged = _merge_patch(entry_to_json(snap.agents[new_key]), body)
        doc = snapshot_to_document(snap)
        _doc_set(doc, self.kind, key, None)
        _doc_set(doc, self.kind, new_key, entry_to_document_body(merged, self.kind))
        new = _rebuild(doc)
        _save(new, request, f"update {self.kind}.{key}" + (f" -> {new_key}" if new_key != key else ""))
        return Response(entry_to_json(getattr(new, self.kind)[new_key]))

    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
    def put(self, request: Request, key: str) -> Response:
        return self._update(request, key, partial=False)

    @extend_schema(request=OpenApiTypes.OBJECT, responses=OpenApiTypes.OBJECT)
    def patch(self, request: Request, key: str) -> Response:
        return self._update(request, key, partial=True)

    @extend_schema(
        parameters=[OpenApiParameter("dry_run", bool, description="show the plan, change nothing")],
        responses={200: OpenApiTypes.OBJECT, 204: None},
    )
    def delete(self, request: Request, key: str) -> Response:
        snap = config_snapshot_get()
        self._get(snap, key)
        if self.kind == "agents":
            plan = delete_agent_plan(snap, key)
            new = delete_agent(snap, key)
        else:
            plan = [f"remove {self.kind}.{key}"]
            remaining = {k: v for k, v in getattr(snap, self.kind).items() if k != key}
            new = dataclasses.replace(snap, **{self.kind: remaining})  # type: ignore[arg-type]
        if _bool_param(request, "dry_run"):
            errors = [{"field": f, "message": m} for f, m in validate_snapshot(new)]
            return Response({"dry_run": True, "plan": plan, "errors": errors})
        _save(new, request, f"delete {self.kind}.{key}")
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConfigApi(APIView):
    """GET: export (TOML with Accept: application/toml or ?format=toml, JSON otherwise).
    POST: import a whole configuration (TOML or JSON), atomically; ?dry_run=true shows the diff."""

    permission_classes = [ReadViewerWriteAdmin]
    parser_classes = [JSONParser, TomlParser]
    renderer_classes = [JSONRenderer, BrowsableAPIRenderer, TomlRenderer]

    @extend_schema(
        operation_id="config_export",
        tags=["config"],
        parameters=[OpenApiParameter("format", str, enum=["toml", "json"])],
        responses={
            (200, "application/json"): OpenApiTypes.OBJECT,
            (200, "application/toml"): OpenApiTypes.STR,
        },
    )
    def get(self, request: Request) -> Response:
        snap = config_snapshot_get()
        if getattr(request.accepted_renderer, "format", "") == "toml":
            return Response(export_toml(snap))
        return Response(snapshot_to_document(snap))

    @extend_schema(
        operation_id="config_import",
        tags=["config"],
        request={"application/toml": OpenApiTypes.STR, "application/json": OpenApiTypes.OBJECT},
        parameters=[OpenApiParameter("dry_run", bool)],
        responses={200: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request) -> Response:
        data = request.data
        try:
            if isinstance(data, str):
                result = parse_toml(data)
            elif isinstance(data, dict):
                result = document_to_snapshot(json.loads(json.dumps(data)))
            else:
                raise ConfigInvalid([("", "the body must be a TOML document or a JSON object")])
        except ConfigParseError as exc:
            raise ConfigInvalid([("", str(exc))]) from exc
        except ConfigShapeError as exc:
            raise ConfigInvalid(list(exc.errors)) from exc
        old = config_snapshot_get()
        new = result.snapshot
        errors = validate_snapshot(new)
        if errors:
            raise ConfigInvalid(errors)
        body: dict[str, Any] = {
            "dry_run": _bool_param(request, "dry_run"),
            "warnings": result.warnings,
            "changes": summarize_diff(old, new),
            "diff": diff_snapshots(old, new),
        }
        if not body["dry_run"]:
            try:
                revision = config_replace(snapshot=new, user=request.user, summary="import")
            except ConfigValidationError as exc:
                raise ConfigInvalid(exc.errors) from exc
            body["revision"] = revision.pk if revision else None
        return Response(body)


def _revision_json(rev: ConfigRevision, *, full: bool = False) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": rev.pk,
        "created_at": rev.created_at.isoformat(),
        "created_by": rev.created_by.get_username() if rev.created_by else None,
        "summary": rev.summary,
    }
    if full:
        data["toml"] = rev.toml
        data["diff"] = rev.diff
    return data


class ConfigRevisionListApi(APIView):
    permission_classes = [ReadViewerWriteAdmin]

    @extend_schema(operation_id="config_revisions_list", tags=["config"], responses={200: _OBJECT_LIST})
    def get(self, request: Request) -> Response:
        return Response([_revision_json(r) for r in config_revision_list()])


class ConfigRevisionDetailApi(APIView):
    permission_classes = [ReadViewerWriteAdmin]

    @extend_schema(operation_id="config_revisions_retrieve", tags=["config"], responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, pk: int) -> Response:
        rev = ConfigRevision.objects.filter(pk=pk).select_related("created_by").first()
        if rev is None:
            raise NotFound(f"No revision {pk}.")
        return Response(_revision_json(rev, full=True))


class ConfigRevisionRestoreApi(APIView):
    permission_classes = [ReadViewerWriteAdmin]

    @extend_schema(
        operation_id="config_revisions_restore", tags=["config"], request=None, responses=OpenApiTypes.OBJECT
    )
    def post(self, request: Request, pk: int) -> Response:
        rev = ConfigRevision.objects.filter(pk=pk).first()
        if rev is None:
            raise NotFound(f"No revision {pk}.")
        try:
            new_rev = config_revision_restore(revision=rev, user=request.user)
        except ConfigValidationError as exc:
            raise ConfigInvalid(exc.errors) from exc
        return Response({"restored": pk, "revision": new_rev.pk if new_rev else None})
