"""REST API for configuration (docs/api.md): CRUD by alias, roster, tools, import/export, revisions,
MCP servers and bundles, the `[mcp]` switches and the mcpServers JSON import."""

from __future__ import annotations

import json
from collections.abc import Callable
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
from agents_app.api.params import bool_param
from agents_app.api.parsers import JSONParser, TomlParser, TomlRenderer, TomlText
from agents_app.api.permissions import ReadViewerWriteAdmin
from agents_app.config_io import (
    ConfigParseError,
    ConfigShapeError,
    document_to_snapshot,
    export_toml,
    parse_toml,
    snapshot_to_document,
)
from agents_app.entries import (
    EntryNotFound,
    delete_dry_run,
    entry_create,
    entry_delete,
    entry_update,
    mcp_settings_update,
)
from agents_app.imports import ImportPlan, import_apply, import_plan
from agents_app.mcp_grants import mcp_grants
from agents_app.mcp_json import mcp_json_read
from agents_app.models import ConfigRevision
from agents_app.representation import entry_to_json
from agents_app.selectors import config_revision_list, config_snapshot_get
from agents_app.services import ConfigValidationError, config_revision_restore

_OBJECT_LIST: dict[str, Any] = {"type": "array", "items": {"type": "object", "additionalProperties": True}}


def _object_body(request: Request) -> dict[str, Any]:
    body = request.data
    if not isinstance(body, dict):
        raise ConfigInvalid([("", "the body must be a JSON object")])
    return dict(body)


def _entry_call(fn: Callable[[], Any]) -> Any:
    """Run one entry service, turning its refusals into the API's error shapes."""
    try:
        return fn()
    except ConfigValidationError as exc:
        raise ConfigInvalid(exc.errors) from exc
    except EntryNotFound as exc:
        raise NotFound(str(exc)) from exc


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
        _, spec = _entry_call(lambda: entry_create(kind=self.kind, body=body, user=request.user))
        return Response(entry_to_json(spec), status=status.HTTP_201_CREATED)


class ConfigDetailApi(APIView):
    permission_classes = [ReadViewerWriteAdmin]
    parser_classes = [JSONParser]
    schema = _DetailSchema()
    kind = "agents"

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, key: str) -> Response:
        spec = getattr(config_snapshot_get(), self.kind).get(key)
        if spec is None:
            raise NotFound(str(EntryNotFound(self.kind, key)))
        return Response(entry_to_json(spec))

    def _update(self, request: Request, key: str, *, partial: bool) -> Response:
        if key not in getattr(config_snapshot_get(), self.kind):  # a 404 whatever the body says
            raise NotFound(str(EntryNotFound(self.kind, key)))
        body = _object_body(request)
        _, spec = _entry_call(
            lambda: entry_update(kind=self.kind, key=key, body=body, user=request.user, partial=partial)
        )
        return Response(entry_to_json(spec))

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
        if bool_param(request, "dry_run"):
            return Response(
                _entry_call(lambda: delete_dry_run(config_snapshot_get(), kind=self.kind, key=key))
            )
        _entry_call(lambda: entry_delete(kind=self.kind, key=key, user=request.user))
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
        parameters=[
            OpenApiParameter("dry_run", bool, description="true/false/1/0: show the plan, change nothing"),
            OpenApiParameter("prune", bool, description="true/false/1/0: delete entries the file lacks"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request) -> Response:
        # The query first: a bad dry_run must never fall back to a real import.
        dry_run = bool_param(request, "dry_run")
        prune = bool_param(request, "prune")
        data = request.data
        try:
            if isinstance(data, TomlText):
                result = parse_toml(str(data))
            elif isinstance(data, dict):
                result = document_to_snapshot(json.loads(json.dumps(data)), zeroclaw=True)
            else:
                raise ConfigInvalid([("", "the body must be a TOML document or a JSON object")])
        except ConfigParseError as exc:
            raise ConfigInvalid([("", str(exc))]) from exc
        except ConfigShapeError as exc:
            raise ConfigInvalid(list(exc.errors)) from exc
        return Response(_run_import(request, result, dry_run=dry_run, prune=prune, summary="import"))


def _run_import(
    request: Request, result: Any, *, dry_run: bool, prune: bool, summary: str, bundle: str = ""
) -> dict[str, Any]:
    """The dry run or the import itself, answered in the one shape every import has."""
    revision: Any = None
    plan: ImportPlan
    if dry_run:
        plan = import_plan(result, prune=prune, bundle=bundle)
        if plan.errors:
            raise ConfigInvalid(plan.errors)
    else:
        try:
            plan, revision = import_apply(
                result, prune=prune, user=request.user, summary=summary, bundle=bundle
            )
        except ConfigValidationError as exc:
            raise ConfigInvalid(exc.errors) from exc
    body: dict[str, Any] = {
        "dry_run": dry_run,
        "prune": prune,
        "warnings": plan.warnings,
        "changes": plan.changes,
        "kept": plan.kept,
        "summary": plan.summary_lines(),
        "diff": plan.diff,
    }
    if not dry_run:
        body["revision"] = revision.pk if revision else None
    return body


class McpSettingsApi(APIView):
    """The `[mcp]` switches: `enabled` and `deferred_loading`."""

    permission_classes = [ReadViewerWriteAdmin]
    parser_classes = [JSONParser]

    @extend_schema(operation_id="mcp_settings_retrieve", tags=["mcp"], responses=OpenApiTypes.OBJECT)
    def get(self, request: Request) -> Response:
        mcp = config_snapshot_get().mcp
        return Response({"enabled": mcp.enabled, "deferred_loading": mcp.deferred_loading})

    def _update(self, request: Request, *, partial: bool) -> Response:
        body = _object_body(request)
        mcp = _entry_call(lambda: mcp_settings_update(body=body, user=request.user, partial=partial))
        return Response({"enabled": mcp.enabled, "deferred_loading": mcp.deferred_loading})

    @extend_schema(
        operation_id="mcp_settings_update",
        tags=["mcp"],
        request=OpenApiTypes.OBJECT,
        responses=OpenApiTypes.OBJECT,
    )
    def put(self, request: Request) -> Response:
        return self._update(request, partial=False)

    @extend_schema(
        operation_id="mcp_settings_partial_update",
        tags=["mcp"],
        request=OpenApiTypes.OBJECT,
        responses=OpenApiTypes.OBJECT,
    )
    def patch(self, request: Request) -> Response:
        return self._update(request, partial=True)


class McpImportApi(APIView):
    """POST an mcpServers JSON file (Claude Code, Cursor, VS Code): its servers are added (or
    replace those of the same name); ?bundle=<alias> also grants them through that bundle;
    ?dry_run=true shows the plan and changes nothing."""

    permission_classes = [ReadViewerWriteAdmin]
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="mcp_import",
        tags=["mcp"],
        request={"application/json": OpenApiTypes.OBJECT},
        parameters=[
            OpenApiParameter("dry_run", bool, description="true/false/1/0: show the plan, change nothing"),
            OpenApiParameter("bundle", str, description="a bundle to add the imported servers to"),
        ],
        responses={200: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request) -> Response:
        dry_run = bool_param(request, "dry_run")
        bundle = str(request.query_params.get("bundle", "")).strip()
        try:
            result = mcp_json_read(json.loads(json.dumps(request.data)))
        except ConfigParseError as exc:
            raise ConfigInvalid([("", str(exc))]) from exc
        except ConfigShapeError as exc:
            raise ConfigInvalid(list(exc.errors)) from exc
        return Response(
            _run_import(
                request, result, dry_run=dry_run, prune=False, summary="import mcpServers", bundle=bundle
            )
        )


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


class AgentMcpServersApi(APIView):
    """The MCP servers an agent's bundles name: granted, or not and why."""

    permission_classes = [ReadViewerWriteAdmin]

    @extend_schema(operation_id="agents_mcp_servers", tags=["agents"], responses={200: _OBJECT_LIST})
    def get(self, request: Request, key: str) -> Response:
        snap = config_snapshot_get()
        if key not in snap.agents:
            raise NotFound(f"No agent '{key}'.")
        return Response(mcp_grants(snap, snap.agents[key]))
