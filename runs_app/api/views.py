"""REST API for runs, approvals, background results and schedules (SPEC §10).

One APIView per URL; every state change goes through `runs_app.services` or the engine's tool
functions (`spawn_subagent`, `delegate_tool`, `runs_app.engine.results`), the same code the
model's tool calls use."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.db import IntegrityError
from django.http import HttpRequest, HttpResponseBase, StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import renderers, serializers, status
from rest_framework.exceptions import APIException, NotFound, ParseError, UnsupportedMediaType
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents_app.api.params import page_params
from agents_app.api.parsers import JSONParser
from agents_app.api.permissions import IsOperator, IsViewer
from agents_app.roles import has_role
from runs_app import events, live, selectors, services
from runs_app.api import serializers as out
from runs_app.api.throttling import RunStartThrottle
from runs_app.engine import results
from runs_app.engine.delegate import delegate_tool
from runs_app.engine.frozen import policy_of
from runs_app.engine.outcomes import background_tasks, child_result, parallel_result
from runs_app.engine.results import (
    await_result,
    cancel_task,
    check_result,
    list_results,
    parse_task_id,
    pending_tasks,
    validate_await,
)
from runs_app.engine.spawn import spawn_subagent
from runs_app.engine.tools.base import ToolResult
from runs_app.models import Run, Schedule

MAX_WAIT_SECS = 300
SPAWN_DEFAULT_WAIT_SECS = 30
SERVICE_STATUS = {"invalid": 400, "not_found": 404, "forbidden": 403, "conflict": 409}
# Admission codes of the tool functions -> HTTP status (SPEC §10). A provider build failure
# ("error") is a tool that ran and answered success=false, hence 200.
ADMISSION_STATUS = {
    "ok": 200,
    "error": 200,
    "pending": 202,
    "accepted": 202,
    "invalid": 400,
    "policy": 403,
    "not_found": 404,
    "budget": 429,
}
RESULT_ACTIONS = ("check_result", "list_results", "cancel_task", "await_sessions")

RUN_ID = OpenApiParameter("run_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
TASK_ID = OpenApiParameter("task_id", OpenApiTypes.UUID, OpenApiParameter.PATH)
APPROVAL_ID = OpenApiParameter("approval_id", OpenApiTypes.INT, OpenApiParameter.PATH)
SCHEDULE_ID = OpenApiParameter("schedule_id", OpenApiTypes.INT, OpenApiParameter.PATH)
ERROR = OpenApiResponse(OpenApiTypes.OBJECT, description='{"detail", "code"} or {"errors": [...]}')
TOOL_RESPONSES: dict[int, Any] = {code: out.ToolResultSerializer for code in (200, 202, 400, 403, 404, 429)}


log = logging.getLogger(__name__)


class AwaitRuns(Response):
    """The answer of a view that waits for runs: `finish(finished)` gives its body and status
    once every run of `run_ids` is terminal (finished=True) or `timeout` seconds have passed.
    `waits_on_loop` does the waiting; until then it is a DRF response like any other, so
    content negotiation, headers and throttling stay DRF's."""

    def __init__(self, run_ids: list[Any], timeout: float, finish: Callable[[bool], Response]) -> None:
        super().__init__(None)
        self.run_ids = [str(i) for i in run_ids]
        self.timeout = timeout
        self.finish = finish

    def complete(self, finished: bool) -> None:
        final = self.finish(finished)
        self.data, self.status_code = final.data, final.status_code


def waits_on_loop(view: Callable[..., HttpResponseBase]) -> Callable[..., Any]:
    """A DRF view as an async view: the view itself (authentication, permissions, validation,
    throttling, the quick work) runs on a thread; when it answers `AwaitRuns`, the waiting is
    done on the event loop (`live.wait_terminal`), holding no thread and no database
    connection, and only the final answer is read on a thread again."""

    def call(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        if isinstance(response, AwaitRuns):
            live.release_connection()
        return response

    def complete(response: AwaitRuns, finished: bool) -> None:
        try:
            response.complete(finished)
        finally:
            live.release_connection()

    @functools.wraps(view)
    async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        response = await sync_to_async(call, thread_sensitive=True)(request, *args, **kwargs)
        if isinstance(response, AwaitRuns):
            finished = await live.wait_terminal(response.run_ids, response.timeout)
            await sync_to_async(complete, thread_sensitive=True)(response, finished)
        return response

    return wrapper


def sse_event(event: dict[str, Any]) -> bytes:
    return f"id: {event['id']}\nevent: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


class ServiceRefusal(APIException):
    """A `RunServiceError` as an HTTP error with its message and code."""

    def __init__(self, exc: services.RunServiceError) -> None:
        self.status_code = SERVICE_STATUS.get(exc.code, 400)
        # A 403 carries the documented code (docs/api.md: permission_denied), like DRF's own.
        super().__init__(
            detail=exc.message, code="permission_denied" if exc.code == "forbidden" else exc.code
        )


class ReadViewerWriteOperator(BasePermission):
    message = "You need the operator role."

    def has_permission(self, request: Any, view: Any) -> bool:
        if request.method in SAFE_METHODS:
            self.message = IsViewer.message
            return has_role(request.user, "viewer")
        return has_role(request.user, "operator")


class EventStreamRenderer(renderers.BaseRenderer):
    """Lets `Accept: text/event-stream` through content negotiation; the stream itself is a
    StreamingHttpResponse, so this only renders error bodies, as one `error` event."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(
        self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None
    ) -> bytes:
        return f"event: error\ndata: {json.dumps(data, default=str)}\n\n".encode()


class ToolApiView(APIView):
    """A view whose answers are tool results (SPEC §10: "the body is always the tool result"):
    an error raised before the tool ran (401, 403, 413, 429, ...) is one as well, keeping its
    `detail` and `code`."""

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        data = getattr(response, "data", None)
        if isinstance(data, dict) and "success" not in data:
            error = data.get("detail") or "; ".join(
                f"{e.get('field')}: {e.get('message')}" for e in data.get("errors", []) if isinstance(e, dict)
            )
            response.data = {"success": False, "output": "", "error": str(error), **data}
        return response


def _run_or_404(run_id: str) -> Run:
    run = selectors.run_get(run_id)
    if run is None:
        raise NotFound(f"No run '{run_id}'.")
    return run


def _validated(
    serializer_class: type[serializers.Serializer[Any]], data: Any, **kwargs: Any
) -> dict[str, Any]:
    serializer = serializer_class(data=data, **kwargs)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def _run_data(run: Run) -> dict[str, Any]:
    return dict(out.RunSerializer(run).data)


# -- tool calls on behalf of a run (spawn, delegate) ------------------------------------------


def _tool_response(result: ToolResult | dict[str, Any], http_status: int, **extra: Any) -> Response:
    body = result.as_dict() if isinstance(result, ToolResult) else dict(result)
    body.update({k: v for k, v in extra.items() if v is not None})
    return Response(body, status=http_status)


def _tool_request(request: Request, run_id: str) -> tuple[Run, dict[str, Any], float] | Response:
    """The tool input, the `wait` and the run a spawn/delegate request acts for, or the answer
    that refuses it (400 for a bad body, 404 for an unknown run), in the tool-result shape."""
    parsed = _tool_body(request, SPAWN_DEFAULT_WAIT_SECS)
    if isinstance(parsed, Response):
        return parsed
    args, wait = parsed
    run = selectors.run_get(run_id)
    if run is None:
        return _tool_response(ToolResult.fail(f"No run '{run_id}'"), 404)
    return run, args, wait


def _tool_body(request: Request, default_wait: float) -> tuple[dict[str, Any], float] | Response:
    """The tool input and `wait`, or a 400 tool result saying what is wrong with the body."""
    try:
        data = request.data
    except (ParseError, UnsupportedMediaType) as exc:
        return _tool_response(ToolResult.fail(str(exc.detail)), 400)
    if not isinstance(data, dict):
        return _tool_response(ToolResult.fail("The request body must be a JSON object"), 400)
    body = dict(data)
    wait = body.pop("wait", default_wait)
    if wait is None:
        wait = default_wait
    if isinstance(wait, bool) or not isinstance(wait, int | float) or not 0 <= wait <= MAX_WAIT_SECS:
        return _tool_response(
            ToolResult.fail(f"'wait' must be a number of seconds from 0 to {MAX_WAIT_SECS}"), 400
        )
    return body, float(wait)


def _result_limit(caller: Run) -> int:
    return policy_of(caller).runtime.effective_max_tool_result_chars


def _admission_response(admission: Any, wait: float, caller: Run) -> Response:
    """The HTTP answer to a spawn/delegate admission: the tool result at once, or after the
    sync child(ren) finished within `wait`, or 202 with the child run(s) still going."""
    parallel = bool(admission.children)
    children: list[Run] = list(admission.children or ([admission.child] if admission.child else []))
    ids = [str(c.pk) for c in children]
    id_fields: dict[str, Any] = {"run_ids": ids} if parallel else {"run_id": ids[0] if ids else None}
    if admission.result is not None:
        return _tool_response(admission.result, ADMISSION_STATUS.get(admission.code, 200), **id_fields)
    if not children:
        return _tool_response(ToolResult.fail("The tool admitted no child run"), 200)

    def answer(finished: bool) -> Response:
        return _children_answer(children, finished, caller, id_fields)

    return AwaitRuns(ids, wait, answer) if wait > 0 else answer(False)


def _children_answer(children: list[Run], finished: bool, caller: Run, id_fields: dict[str, Any]) -> Response:
    parallel = "run_ids" in id_fields
    ids = [c.pk for c in children]
    if not finished:
        current = dict(Run.objects.filter(pk__in=ids).values_list("pk", "status"))
        state = "running" if parallel else str(current.get(children[0].pk, children[0].status))
        return _tool_response({"success": True, "output": "", "error": None}, 202, **id_fields, status=state)
    fresh = {r.pk: r for r in Run.objects.filter(pk__in=ids)}
    ordered = [fresh[c.pk] for c in children]
    limit = _result_limit(caller)
    if parallel:
        return _tool_response(parallel_result(ordered, limit), 200, **id_fields)
    child = ordered[0]
    return _tool_response(child.tool_result or child_result(child, limit), 200, **id_fields)


def _results_response(result: ToolResult) -> Response:
    return _tool_response(result, ADMISSION_STATUS.get(result.code or "ok", 200))


def _await_sessions(args: dict[str, Any], caller: Run | None) -> Response:
    """await_sessions: the result at once, or once the pending tasks settled or the timeout
    passed (the request waits on the event loop, see `waits_on_loop`)."""
    checked = validate_await(args)
    if isinstance(checked, ToolResult):
        return _results_response(checked)
    ids, timeout_ms = checked

    def answer(finished: bool) -> Response:
        return _results_response(await_result(ids, caller=caller))

    pending = pending_tasks(ids, caller=caller)
    return AwaitRuns(pending, timeout_ms / 1000, answer) if pending and timeout_ms > 0 else answer(True)


def _cancel_task(task_id: Any, caller: Run | None, user: Any) -> Response:
    parsed = parse_task_id(task_id, "cancel_task")
    task = background_tasks(caller).filter(pk=parsed).first() if not isinstance(parsed, ToolResult) else None
    if task is not None and not task.is_terminal:
        try:
            services.ensure_can_control(user, task, "cancel")
        except services.RunServiceError as exc:
            return _tool_response(ToolResult.fail(exc.message), SERVICE_STATUS.get(exc.code, 400))
    return _results_response(cancel_task(task_id, caller))


class SpawnInputSerializer(serializers.Serializer[dict[str, Any]]):
    """Documentation only: the tool checks its own input, with the exact messages of SPEC §5."""

    prompt = serializers.CharField()
    background = serializers.BooleanField(required=False, default=False)
    task_name = serializers.CharField(required=False)
    label = serializers.CharField(required=False)  # type: ignore[assignment]
    context = serializers.ChoiceField(choices=["isolated", "fork"], required=False)  # type: ignore[assignment]
    wait = serializers.FloatField(
        required=False, min_value=0, max_value=MAX_WAIT_SECS, help_text="seconds to wait for a sync child"
    )


class DelegateInputSerializer(serializers.Serializer[dict[str, Any]]):
    """Documentation only: the tool checks its own input, with the exact messages of SPEC §6."""

    action = serializers.ChoiceField(
        choices=["delegate", *RESULT_ACTIONS], required=False, default="delegate"
    )
    agent = serializers.CharField(required=False)
    prompt = serializers.CharField(required=False)
    context = serializers.CharField(required=False)  # type: ignore[assignment]
    background = serializers.BooleanField(required=False, default=False)
    parallel = serializers.ListField(child=serializers.CharField(), required=False)
    task_id = serializers.UUIDField(required=False)
    task_ids = serializers.ListField(child=serializers.UUIDField(), required=False)
    timeout_ms = serializers.IntegerField(required=False, min_value=0, max_value=120000)
    wait = serializers.FloatField(
        required=False, min_value=0, max_value=MAX_WAIT_SECS, help_text="seconds to wait for sync children"
    )


class RunSpawnApi(ToolApiView):
    permission_classes = [IsOperator]
    parser_classes = [JSONParser]
    throttle_classes = [RunStartThrottle]

    @extend_schema(
        operation_id="runs_spawn",
        tags=["runs"],
        parameters=[RUN_ID],
        request=SpawnInputSerializer,
        responses=TOOL_RESPONSES,
    )
    def post(self, request: Request, run_id: str) -> Response:
        parsed = _tool_request(request, run_id)
        if isinstance(parsed, Response):
            return parsed
        run, args, wait = parsed
        admission = spawn_subagent(parent=run, args=args, parent_call=None, via_api=True, user=request.user)
        return _admission_response(admission, wait, caller=run)


class RunDelegateApi(ToolApiView):
    permission_classes = [IsOperator]
    parser_classes = [JSONParser]
    throttle_classes = [RunStartThrottle]

    @extend_schema(
        operation_id="runs_delegate",
        tags=["runs"],
        parameters=[RUN_ID],
        request=DelegateInputSerializer,
        responses=TOOL_RESPONSES,
    )
    def post(self, request: Request, run_id: str) -> Response:
        parsed = _tool_request(request, run_id)
        if isinstance(parsed, Response):
            return parsed
        run, args, wait = parsed
        action = args.get("action")
        if action == "check_result":
            return _results_response(results.check_result(args.get("task_id"), run))
        if action == "list_results":
            return _results_response(results.list_results(run))
        if action == "cancel_task":
            return _cancel_task(args.get("task_id"), run, request.user)
        if action == "await_sessions":
            return _await_sessions(args, caller=run)
        admission = delegate_tool(caller=run, args=args, parent_call=None, via_api=True, user=request.user)
        return _admission_response(admission, wait, caller=run)


# -- runs ---------------------------------------------------------------------------------------


class RunPageSerializer(serializers.Serializer[dict[str, Any]]):
    count = serializers.IntegerField()
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)
    results = out.RunSerializer(many=True)


class RunPagination(LimitOffsetPagination):
    default_limit = 50
    max_limit = 500


class RunListApi(APIView):
    """GET: runs, newest first (filters, limit/offset). POST: start a top-level run."""

    permission_classes = [ReadViewerWriteOperator]
    parser_classes = [JSONParser]
    throttle_classes = [RunStartThrottle]  # POST only

    class FilterSerializer(serializers.Serializer[dict[str, Any]]):
        status = serializers.CharField(required=False, help_text="one status or several, comma-separated")
        outcome = serializers.CharField(
            required=False,
            help_text="runs that met it on the way: denied, refused, tool_error (several, comma-separated: all of them)",
        )
        agent = serializers.CharField(required=False, max_length=64)
        kind = serializers.ChoiceField(choices=Run.Kind.choices, required=False)
        root = serializers.UUIDField(required=False)  # type: ignore[assignment]
        since = serializers.DateTimeField(required=False)
        q = serializers.CharField(
            required=False,
            max_length=500,
            help_text="full-text search: runs whose prompt, output or error holds every word (also as a prefix)",
        )

        class Meta:
            ref_name = "RunListFilter"

        def validate_status(self, value: str) -> list[str]:
            statuses = [s.strip() for s in value.split(",") if s.strip()]
            unknown = [s for s in statuses if s not in Run.Status.values]
            if unknown:
                raise serializers.ValidationError(
                    f"Unknown status '{unknown[0]}'. Use one of: {', '.join(Run.Status.values)}"
                )
            return statuses

        def validate_outcome(self, value: str) -> list[str]:
            outcomes = [o.strip() for o in value.split(",") if o.strip()]
            unknown = [o for o in outcomes if o not in selectors.OUTCOMES]
            if unknown:
                raise serializers.ValidationError(
                    f"Unknown outcome '{unknown[0]}'. Use one of: {', '.join(selectors.OUTCOMES)}"
                )
            return outcomes

    class InputSerializer(serializers.Serializer[dict[str, Any]]):
        agent = serializers.CharField(max_length=64)
        prompt = serializers.CharField(allow_blank=True, trim_whitespace=False)
        context = serializers.CharField(required=False, allow_blank=True, default="", trim_whitespace=False)  # type: ignore[assignment]
        wait = serializers.FloatField(
            required=False, min_value=0, max_value=MAX_WAIT_SECS, default=0, help_text="seconds"
        )
        idempotency_key = serializers.CharField(required=False, allow_null=True, max_length=200)

        class Meta:
            ref_name = "RunStartInput"

    @extend_schema(
        operation_id="runs_list",
        tags=["runs"],
        parameters=[
            FilterSerializer,
            OpenApiParameter("limit", int),
            OpenApiParameter("offset", int),
        ],
        responses={200: RunPageSerializer, 400: ERROR},
    )
    def get(self, request: Request) -> Response:
        filters = _validated(self.FilterSerializer, request.query_params)
        # As documented: out of range is a field error, not silently the default or the cap.
        page_params(request, default_limit=RunPagination.default_limit, max_limit=RunPagination.max_limit)
        paginator = RunPagination()
        page = paginator.paginate_queryset(selectors.run_list(filters), request, view=self)
        return paginator.get_paginated_response(out.RunSerializer(page, many=True).data)

    @extend_schema(
        operation_id="runs_start",
        tags=["runs"],
        request=InputSerializer,
        responses={201: out.RunSerializer, 400: ERROR, 403: ERROR, 404: ERROR, 429: ERROR},
    )
    def post(self, request: Request) -> Response:
        data = _validated(self.InputSerializer, request.data)
        start = {
            "agent": data["agent"],
            "prompt": data["prompt"],
            "context": data["context"],
            "user": request.user,
            "idempotency_key": data.get("idempotency_key") or None,
            "spawn_site": Run.SpawnSite.REST,
        }
        try:
            try:
                run = services.run_start(**start)
            except IntegrityError:
                # Two requests with one idempotency key raced; the other one created the run.
                run = services.run_start(**start)
        except services.RunServiceError as exc:
            raise ServiceRefusal(exc) from exc
        if data["wait"] > 0:
            run_id = str(run.pk)
            return AwaitRuns(
                [run_id],
                data["wait"],
                lambda _: Response(_run_data(_run_or_404(run_id)), status=status.HTTP_201_CREATED),
            )
        return Response(_run_data(run), status=status.HTTP_201_CREATED)


class RunDetailApi(APIView):
    @extend_schema(
        operation_id="runs_retrieve",
        tags=["runs"],
        parameters=[RUN_ID],
        responses={200: out.RunSerializer, 404: ERROR},
    )
    def get(self, request: Request, run_id: str) -> Response:
        return Response(_run_data(_run_or_404(run_id)))


class RunTreeApi(APIView):
    @extend_schema(
        operation_id="runs_tree",
        tags=["runs"],
        parameters=[RUN_ID],
        responses={200: OpenApiTypes.OBJECT, 404: ERROR},
        description="The whole tree of the run's root; every node has `subtree` usage sums and `children`.",
    )
    def get(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        try:
            return Response(selectors.run_tree(run.root_id or run.pk))
        except Run.DoesNotExist as exc:
            raise NotFound(f"No run '{run_id}'.") from exc


class RunTranscriptApi(APIView):
    @extend_schema(
        operation_id="runs_transcript",
        tags=["runs"],
        parameters=[RUN_ID],
        responses={200: out.TranscriptSerializer, 404: ERROR},
    )
    def get(self, request: Request, run_id: str) -> Response:
        return Response(selectors.run_transcript(_run_or_404(run_id)))


KEEPALIVE_SECS = 15.0


async def event_stream(run: Run, after: int, timeout: float) -> AsyncIterator[bytes]:
    """SSE chunks of the run's event log after `after` (the whole tree's for a root run), live,
    until every run it covers is terminal or `timeout` seconds pass; a keep-alive comment after
    KEEPALIVE_SECS of silence."""
    root_id = str(run.root_id or run.pk)
    scope = selectors.event_scope(run)
    run_id = scope.get("run_id")
    check = True  # whether the runs may have finished since the last look
    last = after
    quiet_since = time.monotonic()
    stream = live.tree_events(
        root_id, after, run_id=run_id, idle=KEEPALIVE_SECS, until=time.monotonic() + timeout
    )
    async with contextlib.aclosing(stream):  # unsubscribed at once when the client goes away
        async for event in stream:
            if event is not None:
                yield sse_event(event)
                last = int(event["id"])
                quiet_since = time.monotonic()
                check = check or event["type"] in live.TERMINAL_EVENT_TYPES
                continue
            # Caught up, or quiet for a while.
            if check:
                check = False
                if await live.read(lambda: selectors.run_events_finished(run)):
                    # A terminal event commits with its status: whatever came after the events
                    # sent so far is in the table now.
                    async for rest in live.stored_events(root_id, last, run_id=run_id):
                        yield sse_event(rest)
                    return
            if time.monotonic() - quiet_since >= KEEPALIVE_SECS:
                yield b": keep-alive\n\n"
                quiet_since = time.monotonic()


class RunEventsApi(APIView):
    """The run's event log (the whole tree's for a root run): JSON, or live Server-Sent Events
    with `Accept: text/event-stream`."""

    renderer_classes = [renderers.JSONRenderer, renderers.BrowsableAPIRenderer, EventStreamRenderer]

    class QuerySerializer(serializers.Serializer[dict[str, Any]]):
        after = serializers.IntegerField(required=False, min_value=0, default=0)
        limit = serializers.IntegerField(required=False, min_value=1, max_value=5000, default=1000)
        timeout = serializers.FloatField(
            required=False, min_value=0, max_value=3600, default=60, help_text="SSE only: seconds"
        )

        class Meta:
            ref_name = "RunEventsQuery"

    @extend_schema(
        operation_id="runs_events",
        tags=["runs"],
        parameters=[RUN_ID, QuerySerializer],
        responses={
            (200, "application/json"): out.EventSerializer(many=True),
            (200, "text/event-stream"): OpenApiTypes.STR,  # see agents_app.api.schema
            404: ERROR,
        },
    )
    def get(self, request: Request, run_id: str) -> HttpResponseBase:
        query = _validated(self.QuerySerializer, request.query_params)
        run = _run_or_404(run_id)
        if getattr(request.accepted_renderer, "format", "") != "sse":
            rows = selectors.run_events(run, after=query["after"], limit=query["limit"])
            return Response([events.event_json(e) for e in rows])
        after = query["after"]
        last_event_id = request.headers.get("Last-Event-ID", "").strip()
        if last_event_id:
            if not last_event_id.isdigit():
                raise ParseError("Last-Event-ID must be an event id")
            after = int(last_event_id)
        response = StreamingHttpResponse(
            event_stream(run, after, query["timeout"]), content_type="text/event-stream"
        )
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


class RunCancelApi(APIView):
    permission_classes = [IsOperator]

    @extend_schema(
        operation_id="runs_cancel",
        tags=["runs"],
        parameters=[RUN_ID],
        request=None,
        responses={200: out.CancelResultSerializer, 403: ERROR, 404: ERROR, 409: ERROR},
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        try:
            changed = services.run_cancel(run=run, user=request.user)
        except services.RunServiceError as exc:
            raise ServiceRefusal(exc) from exc
        return Response({"cancelled": changed, "run": _run_data(_run_or_404(run_id))})


class RunSteerApi(APIView):
    permission_classes = [IsOperator]
    parser_classes = [JSONParser]

    class InputSerializer(serializers.Serializer[dict[str, Any]]):
        # Length and blankness are the service's to judge, with its exact messages.
        message = serializers.CharField(required=False, allow_blank=True, trim_whitespace=False, default="")

        class Meta:
            ref_name = "RunSteerInput"

    @extend_schema(
        operation_id="runs_steer",
        tags=["runs"],
        parameters=[RUN_ID],
        request=InputSerializer,
        responses={202: out.SteerResultSerializer, 400: ERROR, 403: ERROR, 404: ERROR, 409: ERROR},
    )
    def post(self, request: Request, run_id: str) -> Response:
        data = _validated(self.InputSerializer, request.data)
        run = _run_or_404(run_id)
        try:
            steer = services.run_steer(run=run, user=request.user, message=data["message"])
        except services.RunServiceError as exc:
            raise ServiceRefusal(exc) from exc
        return Response(
            {
                "id": steer.pk,
                "run_id": str(run.pk),
                "message": steer.text,
                "created_at": steer.created_at.isoformat(),
            },
            status=status.HTTP_202_ACCEPTED,
        )


class RunContinueApi(APIView):
    permission_classes = [IsOperator]
    parser_classes = [JSONParser]
    throttle_classes = [RunStartThrottle]

    class InputSerializer(serializers.Serializer[dict[str, Any]]):
        prompt = serializers.CharField(allow_blank=True, trim_whitespace=False)

        class Meta:
            ref_name = "RunContinueInput"

    @extend_schema(
        operation_id="runs_continue",
        tags=["runs"],
        parameters=[RUN_ID],
        request=InputSerializer,
        responses={201: out.RunSerializer, 400: ERROR, 404: ERROR, 409: ERROR, 429: ERROR},
    )
    def post(self, request: Request, run_id: str) -> Response:
        data = _validated(self.InputSerializer, request.data)
        run = _run_or_404(run_id)
        try:
            new = services.run_continue(
                run=run, user=request.user, prompt=data["prompt"], spawn_site=Run.SpawnSite.REST
            )
        except services.RunServiceError as exc:
            raise ServiceRefusal(exc) from exc
        return Response(_run_data(new), status=status.HTTP_201_CREATED)


class RunResumeApi(APIView):
    permission_classes = [IsOperator]
    throttle_classes = [RunStartThrottle]

    @extend_schema(
        operation_id="runs_resume",
        tags=["runs"],
        parameters=[RUN_ID],
        request=None,
        responses={201: out.RunSerializer, 404: ERROR, 409: ERROR, 429: ERROR},
    )
    def post(self, request: Request, run_id: str) -> Response:
        run = _run_or_404(run_id)
        try:
            new = services.run_resume(run=run, user=request.user, spawn_site=Run.SpawnSite.REST)
        except services.RunServiceError as exc:
            raise ServiceRefusal(exc) from exc
        return Response(_run_data(new), status=status.HTTP_201_CREATED)


# -- approvals ----------------------------------------------------------------------------------


def _approval_or_404(approval_id: str) -> Any:
    approval = selectors.approval_get(approval_id)
    if approval is None:
        raise NotFound(f"No approval '{approval_id}'.")
    return approval


class ApprovalListApi(APIView):
    class FilterSerializer(serializers.Serializer[dict[str, Any]]):
        status = serializers.ChoiceField(
            choices=["pending", "approved", "denied", "cancelled"], required=False
        )
        limit = serializers.IntegerField(required=False, min_value=1, max_value=1000, default=200)

        class Meta:
            ref_name = "ApprovalListFilter"

    @extend_schema(
        operation_id="approvals_list",
        tags=["approvals"],
        parameters=[FilterSerializer],
        responses={200: out.ApprovalSerializer(many=True), 400: ERROR},
    )
    def get(self, request: Request) -> Response:
        filters = _validated(self.FilterSerializer, request.query_params)
        return Response(selectors.approval_list(status=filters.get("status"), limit=filters["limit"]))


def _decide(request: Request, approval_id: str, *, approve: bool, reason: str = "") -> Response:
    approval = _approval_or_404(approval_id)
    try:
        decided = services.approval_decide(
            approval=approval, user=request.user, approve=approve, reason=reason
        )
    except services.RunServiceError as exc:
        raise ServiceRefusal(exc) from exc
    fresh = selectors.approval_get(decided.pk)
    return Response(selectors.approval_json(fresh or decided))


class ApprovalApproveApi(APIView):
    permission_classes = [IsOperator]

    @extend_schema(
        operation_id="approvals_approve",
        tags=["approvals"],
        parameters=[APPROVAL_ID],
        request=None,
        responses={200: out.ApprovalSerializer, 404: ERROR, 409: ERROR},
    )
    def post(self, request: Request, approval_id: str) -> Response:
        return _decide(request, approval_id, approve=True)


class ApprovalDenyApi(APIView):
    permission_classes = [IsOperator]
    parser_classes = [JSONParser]

    class InputSerializer(serializers.Serializer[dict[str, Any]]):
        reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=2000)

        class Meta:
            ref_name = "ApprovalDenyInput"

    @extend_schema(
        operation_id="approvals_deny",
        tags=["approvals"],
        parameters=[APPROVAL_ID],
        request=InputSerializer,
        responses={200: out.ApprovalSerializer, 400: ERROR, 404: ERROR, 409: ERROR},
    )
    def post(self, request: Request, approval_id: str) -> Response:
        data = _validated(self.InputSerializer, request.data)
        return _decide(request, approval_id, approve=False, reason=data["reason"])


# -- background delegate results ----------------------------------------------------------------


class ResultListApi(ToolApiView):
    @extend_schema(
        operation_id="results_list",
        tags=["results"],
        responses={200: out.ToolResultSerializer},
        description="list_results over every background delegate task.",
    )
    def get(self, request: Request) -> Response:
        return _results_response(list_results(None))


class ResultDetailApi(ToolApiView):
    @extend_schema(
        operation_id="results_retrieve",
        tags=["results"],
        parameters=[TASK_ID],
        responses={code: out.ToolResultSerializer for code in (200, 400, 404)},
        description="check_result of one background delegate task.",
    )
    def get(self, request: Request, task_id: str) -> Response:
        return _results_response(check_result(task_id, None))


class ResultCancelApi(ToolApiView):
    permission_classes = [IsOperator]

    @extend_schema(
        operation_id="results_cancel",
        tags=["results"],
        parameters=[TASK_ID],
        request=None,
        responses={code: out.ToolResultSerializer for code in (200, 400, 403, 404)},
        description="cancel_task: only the task's creator or an admin may cancel it.",
    )
    def post(self, request: Request, task_id: str) -> Response:
        return _cancel_task(task_id, None, request.user)


class ResultAwaitApi(ToolApiView):
    permission_classes = [IsOperator]
    parser_classes = [JSONParser]

    class InputSerializer(serializers.Serializer[dict[str, Any]]):
        """Documentation only: await_sessions checks its own input (SPEC §6.3 messages)."""

        task_ids = serializers.ListField(child=serializers.UUIDField(), min_length=1, max_length=128)
        timeout_ms = serializers.IntegerField(required=False, min_value=0, max_value=120000, default=30000)

        class Meta:
            ref_name = "ResultAwaitInput"

    @extend_schema(
        operation_id="results_await",
        tags=["results"],
        request=InputSerializer,
        responses={code: out.ToolResultSerializer for code in (200, 400)},
        description="await_sessions: blocks until the tasks settle or timeout_ms passes.",
    )
    def post(self, request: Request) -> Response:
        try:
            data = request.data
        except (ParseError, UnsupportedMediaType) as exc:
            return _tool_response(ToolResult.fail(str(exc.detail)), 400)
        if not isinstance(data, dict):
            return _tool_response(ToolResult.fail("The request body must be a JSON object"), 400)
        return _await_sessions(dict(data), caller=None)


# -- schedules ----------------------------------------------------------------------------------


def _schedule_or_404(schedule_id: str) -> Schedule:
    schedule = (
        Schedule.objects.select_related("created_by").filter(pk=schedule_id).first()
        if schedule_id.isdigit()
        else None
    )
    if schedule is None:
        raise NotFound(f"No schedule '{schedule_id}'.")
    return schedule


class ScheduleListApi(APIView):
    permission_classes = [ReadViewerWriteOperator]
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="schedules_list", tags=["schedules"], responses=out.ScheduleSerializer(many=True)
    )
    def get(self, request: Request) -> Response:
        rows = Schedule.objects.select_related("created_by").order_by("name", "id")
        return Response(out.ScheduleSerializer(rows, many=True).data)

    @extend_schema(
        operation_id="schedules_create",
        tags=["schedules"],
        request=out.ScheduleSerializer,
        responses={201: out.ScheduleSerializer, 400: ERROR},
    )
    def post(self, request: Request) -> Response:
        serializer = out.ScheduleSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        schedule = serializer.save(created_by=request.user)
        return Response(out.ScheduleSerializer(schedule).data, status=status.HTTP_201_CREATED)


class ScheduleDetailApi(APIView):
    permission_classes = [ReadViewerWriteOperator]
    parser_classes = [JSONParser]

    @extend_schema(
        operation_id="schedules_retrieve",
        tags=["schedules"],
        parameters=[SCHEDULE_ID],
        responses={200: out.ScheduleSerializer, 404: ERROR},
    )
    def get(self, request: Request, schedule_id: str) -> Response:
        return Response(out.ScheduleSerializer(_schedule_or_404(schedule_id)).data)

    def _update(self, request: Request, schedule_id: str, *, partial: bool) -> Response:
        schedule = _schedule_or_404(schedule_id)
        serializer = out.ScheduleSerializer(schedule, data=request.data, partial=partial)
        serializer.is_valid(raise_exception=True)
        return Response(out.ScheduleSerializer(serializer.save()).data)

    @extend_schema(
        operation_id="schedules_update",
        tags=["schedules"],
        parameters=[SCHEDULE_ID],
        request=out.ScheduleSerializer,
        responses={200: out.ScheduleSerializer, 400: ERROR, 404: ERROR},
    )
    def put(self, request: Request, schedule_id: str) -> Response:
        return self._update(request, schedule_id, partial=False)

    @extend_schema(
        operation_id="schedules_partial_update",
        tags=["schedules"],
        parameters=[SCHEDULE_ID],
        request=out.ScheduleSerializer,
        responses={200: out.ScheduleSerializer, 400: ERROR, 404: ERROR},
    )
    def patch(self, request: Request, schedule_id: str) -> Response:
        return self._update(request, schedule_id, partial=True)

    @extend_schema(
        operation_id="schedules_destroy",
        tags=["schedules"],
        parameters=[SCHEDULE_ID],
        responses={204: None, 404: ERROR},
    )
    def delete(self, request: Request, schedule_id: str) -> Response:
        _schedule_or_404(schedule_id).delete()
        return Response(status=status.HTTP_204_NO_CONTENT)
