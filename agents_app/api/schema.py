"""OpenAPI post-processing (drf-spectacular hook): every operation documents the errors it can
answer, and the responses that create something link to the operations that use it.

The views declare their success bodies and the errors particular to them; what every
operation shares is added here, so the schema matches what the API really answers (checked by
tests/test_schemathesis.py with Schemathesis' status code and response schema checks):

- 401 (no or a bad token) and 403 (a role too low) on every operation;
- 404 on every operation with a path parameter (an unknown id or alias), or a `format`;
- 400 on every operation that takes a body or query parameters;
- 413 (body over DATA_UPLOAD_MAX_MEMORY_SIZE) and 415 (a media type no parser reads) on every
  operation that takes a body.

Error bodies are `#/components/schemas/Error` (`{"detail", "code"}` or `{"errors": [...]}`),
except on the operations whose answers are tool results (spawn, delegate, results), where
they are `ToolResult` (which then carries `detail` and `code` as well)."""

from __future__ import annotations

from typing import Any

ERROR_REF = "#/components/schemas/Error"
TOOL_RESULT_REF = "#/components/schemas/ToolResult"

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": 'An error: `{"detail", "code"}`, or field errors `{"errors": [{"field", "message"}]}`.',
    "properties": {
        "detail": {"type": "string"},
        "code": {"type": "string"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                "required": ["field", "message"],
            },
        },
    },
    "anyOf": [{"required": ["detail", "code"]}, {"required": ["errors"]}],
}

# One Server-Sent Event, as clients (and Schemathesis) parse it: `data` is the JSON text of
# an event of the log (or, for `event: error`, of an error body).
SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "the event id (absent on `error`)"},
        "event": {"type": "string", "description": "the event type, or `error`"},
        "data": {"type": "string", "description": "JSON"},
    },
    "required": ["event", "data"],
}
SSE_EVENT_REF = "#/components/schemas/ServerSentEvent"
TEXT_ERROR_SCHEMAS: dict[str, dict[str, Any]] = {
    "text/event-stream": {"$ref": SSE_EVENT_REF},
    "application/toml": {"type": "string"},
}

DESCRIPTIONS = {
    "400": "invalid input",
    "401": "not authenticated (no or an unknown token or session)",
    "403": "the user's role does not allow this",
    "404": "no such object",
    "413": "request body too large",
    "415": "unsupported media type",
    "429": "too many requests",
}

# (operation answering, status) -> (parameter, runtime expression, operations it feeds)
LINKS: dict[tuple[str, str], tuple[str, str, tuple[str, ...]]] = {
    ("runs_start", "201"): (
        "run_id",
        "$response.body#/id",
        (
            "runs_retrieve",
            "runs_tree",
            "runs_events",
            "runs_transcript",
            "runs_spawn",
            "runs_delegate",
            "runs_cancel",
            "runs_steer",
            "runs_continue",
            "runs_resume",
        ),
    ),
    ("schedules_create", "201"): (
        "schedule_id",
        "$response.body#/id",
        ("schedules_retrieve", "schedules_update", "schedules_partial_update", "schedules_destroy"),
    ),
}
for _kind in ("agents", "risk_profiles", "runtime_profiles", "providers"):
    LINKS[(f"{_kind}_create", "201")] = (
        "key",
        "$response.body#/alias",
        (f"{_kind}_retrieve", f"{_kind}_update", f"{_kind}_partial_update", f"{_kind}_destroy"),
    )

HTTP_METHODS = ("get", "put", "post", "patch", "delete")


def _is_bare_object(content: dict[str, Any]) -> bool:
    schema = content.get("application/json", {}).get("schema")
    return isinstance(schema, dict) and schema.get("type") == "object" and not schema.get("properties")


def _returns_tool_result(operation: dict[str, Any]) -> bool:
    for response in operation.get("responses", {}).values():
        schema = response.get("content", {}).get("application/json", {}).get("schema", {})
        if schema.get("$ref") == TOOL_RESULT_REF:
            return True
    return False


def _error_codes(path: str, operation: dict[str, Any]) -> list[str]:
    params = operation.get("parameters", [])
    codes = ["401", "403"]
    if "{" in path or any(p.get("name") == "format" for p in params):
        codes.append("404")
    if "requestBody" in operation or any(p.get("in") == "query" for p in params):
        codes.append("400")
    if "requestBody" in operation:
        codes += ["413", "415"]
    return codes


def document_errors(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas["Error"] = ERROR_SCHEMA
    schemas["ServerSentEvent"] = SSE_EVENT_SCHEMA
    by_id: dict[str, dict[str, Any]] = {}
    for path, item in result.get("paths", {}).items():
        for method in HTTP_METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            by_id[operation.get("operationId", "")] = operation
            tool = _returns_tool_result(operation)
            error_body = {"application/json": {"schema": {"$ref": TOOL_RESULT_REF if tool else ERROR_REF}}}
            responses = operation.setdefault("responses", {})
            for code, response in responses.items():
                # A stream is described by one of its events (each is checked on its own).
                if "text/event-stream" in response.get("content", {}):
                    response["content"]["text/event-stream"] = {"schema": {"$ref": SSE_EVENT_REF}}
                # An error declared as a bare object is the API's one error shape.
                if code.startswith("4") and _is_bare_object(response.get("content", {})):
                    response["content"] = {"application/json": {"schema": {"$ref": ERROR_REF}}}
            for code in _error_codes(path, operation):
                responses.setdefault(code, {"description": DESCRIPTIONS[code], "content": error_body})
            # Errors are rendered in the media type negotiated (an SSE `error` event, a TOML
            # document), so an operation that can answer those documents its errors in them too.
            extra = {m for r in responses.values() for m in r.get("content", {}) if m in TEXT_ERROR_SCHEMAS}
            for code, response in responses.items():
                if code.startswith("4"):
                    for media_type in sorted(extra):
                        schema = TEXT_ERROR_SCHEMAS[media_type]
                        response.setdefault("content", {})[media_type] = {"schema": schema}
    for (source, status), (param, expression, targets) in LINKS.items():
        response = by_id.get(source, {}).get("responses", {}).get(status)
        if response is None:
            continue
        links = response.setdefault("links", {})
        for target in targets:
            if target in by_id:
                links[target] = {"operationId": target, "parameters": {param: expression}}
    return result
