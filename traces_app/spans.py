"""A run tree as OpenTelemetry spans, built from what the database holds: runs, tool calls,
approvals and the model turns' events. No timer of the engine is read, so a tree is the same
whichever process builds it, and whenever (docs/deployment.md#traces has the names).

- one trace per root run; a span per run (`invoke_agent {agent}`), per model call
  (`chat {model}`) and per tool call (`execute_tool {tool}`);
- a run started by a tool call (sync spawn, delegate) is a child of that call's span; a
  background child is a child of its parent's run span, linked to the call that started it;
- span ids are derived from the rows' ids (`runs_app.runlog`), so building twice gives the
  same spans.

`build` reads a tree in four queries whatever its size and returns the spans whose end is
known; `readable` turns them into the SDK's `ReadableSpan`s for an exporter."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from runs_app import runlog
from runs_app.models import TERMINAL_STATUSES, Approval, Run, RunEvent, ToolCall

SCOPE = InstrumentationScope("clawboard", "1")
# Provider types (the `<type>` of a `<type>.<alias>` provider ref) and the GenAI conventions'
# `gen_ai.provider.name` values; a type not listed is given as it is.
PROVIDER_NAMES = {"openai": "openai", "anthropic": "anthropic", "scripted": "clawboard.scripted"}
ERROR_CHARS = 500
CRON_PREFIX = re.compile(r"^\[cron:(\d+) ")
UUID_TEXT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# Values of variables with these in their names never leave in a captured text.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|AUTHORIZATION|CREDENTIAL", re.IGNORECASE)


@dataclass
class SpanData:
    """One span as built from the database; `readable` gives the SDK's form."""

    span_id: int
    name: str
    kind: SpanKind
    start: datetime
    end: datetime
    parent_id: int | None
    attributes: dict[str, Any]
    error: str | None = None  # None: not an error; "" or a text: an error (the description)
    events: list[tuple[str, datetime, dict[str, Any]]] = field(default_factory=list)
    links: list[int] = field(default_factory=list)

    @property
    def hex_id(self) -> str:
        return runlog.span_hex(self.span_id)


@dataclass
class Tree:
    root_id: Any
    runs: list[Run]
    spans: list[SpanData]

    @property
    def finished(self) -> bool:
        """Every run of the tree has ended: no span of it is still to come."""
        return all(r.status in TERMINAL_STATUSES for r in self.runs)


def build(root_id: Any, *, capture: bool | None = None) -> Tree:
    """The spans of the tree whose root is `root_id` that have ended (a run still going has
    no span yet; its finished calls and model turns have theirs)."""
    capture = settings.CLAWBOARD_TRACES_CAPTURE if capture is None else capture
    runs = list(Run.objects.filter(root_id=root_id).order_by("created_at"))
    calls = list(ToolCall.objects.filter(run__root_id=root_id).order_by("run_id", "turn", "position"))
    approvals = {a.tool_call_id: a for a in Approval.objects.filter(run__root_id=root_id)}
    turns = list(
        RunEvent.objects.filter(root_id=root_id, type__in=("model.request", "model.response"))
        .order_by("id")
        .values_list("run_id", "type", "at", "data")
    )
    redact = _redactor() if capture else None
    spawned_by = _background_spawns(calls)
    spans: list[SpanData] = []
    by_run: dict[Any, Run] = {r.pk: r for r in runs}
    for run in runs:
        if run.status in TERMINAL_STATUSES and run.finished_at is not None:
            spawn_call = spawned_by.get(str(run.pk)) if run.execution == Run.Execution.BACKGROUND else None
            spans.append(_run_span(run, spawn_call, redact))
    for call in calls:
        owner = by_run.get(call.run_id)
        if owner is not None:
            found = _call_span(call, owner, approvals.get(call.pk), redact)
            if found is not None:
                spans.append(found)
    spans.extend(_chat_spans(turns, by_run, redact))
    return Tree(root_id=root_id, runs=runs, spans=spans)


def _background_spawns(calls: list[ToolCall]) -> dict[str, int]:
    """Run ids named in the answers of spawn_subagent and delegate calls (a background child's
    id is in the call's accepted answer), and the span of the call that named each."""
    found: dict[str, int] = {}
    for call in calls:
        if call.name in ("spawn_subagent", "delegate") and call.result:
            for run_id in UUID_TEXT.findall(str(call.result.get("output") or "")):
                found.setdefault(run_id, runlog.call_span_id(call.pk))
    return found


def provider_name(ref: str) -> str:
    kind = ref.split(".", 1)[0] if ref else ""
    return PROVIDER_NAMES.get(kind, kind)


def _run_span(run: Run, spawn_call: int | None, redact: Any) -> SpanData:
    assert run.finished_at is not None
    parent_id: int | None = None
    links: list[int] = []
    if run.parent_call_id is not None:
        parent_id = runlog.call_span_id(run.parent_call_id)
    elif run.parent_id is not None:
        parent_id = runlog.run_span_id(run.parent_id)
        if spawn_call is not None:
            links.append(spawn_call)
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": run.agent,
        "gen_ai.agent.id": str(run.pk),
        "gen_ai.conversation.id": run.session_key,
        "gen_ai.provider.name": provider_name(run.provider_served or run.provider_ref),
        "gen_ai.request.model": run.model,
        "gen_ai.usage.input_tokens": run.input_tokens,
        "gen_ai.usage.output_tokens": run.output_tokens,
        "openinference.span.kind": "AGENT",
        "agent.name": run.agent,
        "clawboard.run_id": str(run.pk),
        "clawboard.root_id": str(run.root_id or run.pk),
        "clawboard.run.kind": run.kind,
        "clawboard.run.execution": run.execution,
        "clawboard.run.status": run.status,
        "clawboard.spawn_site": run.spawn_site,
        "clawboard.turns": run.turns,
    }
    if run.turns:
        attrs["gen_ai.response.model"] = run.model
    if run.mode:
        attrs["clawboard.run.mode"] = run.mode
    if run.parent_id is not None:
        attrs["clawboard.parent_id"] = str(run.parent_id)
    if run.kind == Run.Kind.SUBAGENT:
        attrs["clawboard.subagent.span"] = f"agent.{run.agent}.subagent.{run.pk}"
    if run.kind == Run.Kind.CRON:
        found = CRON_PREFIX.match(run.prompt)
        attrs.update(
            {
                "subagent.category": "cron",
                "subagent.agent_alias": run.agent,
                "subagent.cron_job_id": found.group(1) if found else "",
                "subagent.run_id": str(run.pk),
                "subagent.spawn_site": "cron",
            }
        )
    if redact is not None:
        attrs["input.value"] = redact(
            run.prompt if not run.context.strip() else f"{run.context}\n\n{run.prompt}"
        )
        attrs["output.value"] = redact(run.output)
    error: str | None = None
    if run.status in (Run.Status.FAILED, Run.Status.TIMED_OUT, Run.Status.LOST):
        error = run.error[:ERROR_CHARS]
        attrs["error.type"] = run.status
    elif run.status == Run.Status.CANCELLED:
        attrs["clawboard.cancel_reason"] = run.error[:ERROR_CHARS]
    return SpanData(
        span_id=runlog.run_span_id(run.pk),
        name=f"invoke_agent {run.agent}",
        kind=SpanKind.INTERNAL,
        start=run.started_at or run.created_at,
        end=run.finished_at,
        parent_id=parent_id,
        attributes=attrs,
        error=error,
        links=links,
    )


def tool_type(name: str) -> str:
    """`extension` for an MCP server's tool (`<server>__<tool>`), `function` for a built-in."""
    return "extension" if "__" in name else "function"


def _call_span(call: ToolCall, run: Run, approval: Approval | None, redact: Any) -> SpanData | None:
    end = call.finished_at
    if end is None and call.status != ToolCall.Status.PENDING:
        end = run.finished_at  # closed before its finish time was recorded
    if end is None and run.status in TERMINAL_STATUSES:
        end = run.finished_at  # still pending when its run ended
    if end is None:
        return None
    result = call.result or {}
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.name,
        "gen_ai.tool.call.id": call.call_id,
        "gen_ai.tool.type": tool_type(call.name),
        "gen_ai.conversation.id": run.session_key,
        "gen_ai.agent.id": str(run.pk),
        "openinference.span.kind": "TOOL",
        "tool.name": call.name,
        "clawboard.run_id": str(run.pk),
        "clawboard.tool.turn": call.turn,
        "clawboard.tool.status": call.status,
    }
    if "__" in call.name:
        attrs["clawboard.mcp.server"] = call.name.split("__", 1)[0]
    if call.wait_kind:
        attrs["clawboard.tool.wait_kind"] = call.wait_kind
    events: list[tuple[str, datetime, dict[str, Any]]] = []
    if approval is not None:
        attrs["clawboard.approval.status"] = approval.status
        events.append(("approval.requested", approval.created_at, {}))
        if approval.decided_at is not None:
            events.append(("approval.decided", approval.decided_at, {"status": approval.status}))
    if redact is not None:
        attrs["gen_ai.tool.call.arguments"] = redact(json.dumps(call.arguments, sort_keys=True))
        attrs["input.value"] = attrs["gen_ai.tool.call.arguments"]
        if result:
            attrs["gen_ai.tool.call.result"] = redact(str(result.get("output") or ""))
            attrs["output.value"] = attrs["gen_ai.tool.call.result"]
    error: str | None = None
    if call.status == ToolCall.Status.DONE and result and not result.get("success", True):
        error = str(result.get("error") or "")[:ERROR_CHARS]
        attrs["error.type"] = (
            "denied" if approval is not None and approval.status == "denied" else "tool_error"
        )
    elif call.status != ToolCall.Status.DONE:
        error = f"not answered: its run ended {run.status}"
        attrs["error.type"] = "cancelled"
    return SpanData(
        span_id=runlog.call_span_id(call.pk),
        name=f"execute_tool {call.name}",
        kind=SpanKind.INTERNAL,
        start=call.created_at,
        end=max(end, call.created_at),
        parent_id=runlog.run_span_id(run.pk),
        attributes=attrs,
        error=error,
        events=events,
    )


def _chat_spans(
    turns: Iterable[tuple[Any, str, datetime, dict[str, Any]]], by_run: dict[Any, Run], redact: Any
) -> list[SpanData]:
    """A model call per `model.request` + `model.response` pair of a run (one per turn)."""
    asked: dict[tuple[Any, int], tuple[datetime, dict[str, Any]]] = {}
    spans: list[SpanData] = []
    for run_id, type_, at, data in turns:
        key = (run_id, int(data.get("turn", 0)))
        if type_ == "model.request":
            asked[key] = (at, data)
            continue
        run = by_run.get(run_id)
        if run is None:
            continue
        request = asked.pop(key, (at, {}))
        start = _when(request[1].get("requested_at")) or request[0]
        end = _when(data.get("answered_at")) or at
        model = data.get("model") or run.model
        usage = data.get("usage") or {}
        tokens_in, tokens_out = int(usage.get("input", 0)), int(usage.get("output", 0))
        attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": provider_name(data.get("provider", "")),
            "gen_ai.request.model": model,
            "gen_ai.response.model": model,
            "gen_ai.usage.input_tokens": tokens_in,
            "gen_ai.usage.output_tokens": tokens_out,
            "gen_ai.conversation.id": run.session_key,
            "gen_ai.agent.id": str(run.pk),
            "openinference.span.kind": "LLM",
            "llm.model_name": model,
            "llm.token_count.prompt": tokens_in,
            "llm.token_count.completion": tokens_out,
            "llm.token_count.total": tokens_in + tokens_out,
            "clawboard.run_id": str(run.pk),
            "clawboard.turn": key[1],
            "clawboard.cost_cents": float(data.get("cost_cents") or 0),
        }
        calls = data.get("tool_calls") or []
        attrs["gen_ai.response.finish_reasons"] = ("tool_call" if calls else "stop",)
        if redact is not None:
            parts: list[dict[str, Any]] = []
            if data.get("text"):
                parts.append({"type": "text", "content": redact(data["text"])})
            for c in calls:
                parts.append(
                    {
                        "type": "tool_call",
                        "id": c.get("id"),
                        "name": c.get("name"),
                        "arguments": json.loads(redact(json.dumps(c.get("arguments") or {}))),
                    }
                )
            finish = "tool_call" if calls else "stop"
            attrs["gen_ai.output.messages"] = json.dumps(
                [{"role": "assistant", "parts": parts, "finish_reason": finish}]
            )
            attrs["output.value"] = redact(data.get("text") or "")
        spans.append(
            SpanData(
                span_id=runlog.chat_span_id(run.pk, key[1]),
                name=f"chat {model}",
                kind=SpanKind.CLIENT,
                start=start,
                end=max(end, start),
                parent_id=runlog.run_span_id(run.pk),
                attributes=attrs,
            )
        )
    return spans


def _when(value: Any) -> datetime | None:
    return parse_datetime(value) if isinstance(value, str) and value else None


def _redactor() -> Any:
    """Captured texts never carry a secret: the values of the process's variables whose names
    say they hold one (API keys, tokens, passwords) are masked."""
    secrets = sorted(
        {v for k, v in os.environ.items() if SECRET_NAME.search(k) and len(v) >= 8}, key=len, reverse=True
    )

    def redact(text: str) -> str:
        for secret in secrets:
            if secret in text:
                text = text.replace(secret, "[redacted]")
        return text

    return redact


def _ns(when: datetime) -> int:
    return int(when.timestamp() * 1_000_000) * 1000


def readable(root_id: Any, spans: Iterable[SpanData], resource: Resource) -> list[ReadableSpan]:
    trace_id = runlog.trace_id_of(root_id)
    flags = TraceFlags(TraceFlags.SAMPLED)

    def ctx(span_id: int) -> SpanContext:
        return SpanContext(trace_id, span_id, is_remote=False, trace_flags=flags)

    found: list[ReadableSpan] = []
    for s in spans:
        if s.error is None:
            status = (
                Status(StatusCode.OK) if s.attributes.get("clawboard.run.status") == "completed" else Status()
            )
        else:
            status = Status(StatusCode.ERROR, s.error or None)
        found.append(
            ReadableSpan(
                name=s.name,
                context=ctx(s.span_id),
                parent=SpanContext(trace_id, s.parent_id, is_remote=False, trace_flags=flags)
                if s.parent_id is not None
                else None,
                resource=resource,
                attributes=s.attributes,
                events=[Event(name, attributes, _ns(when)) for name, when, attributes in s.events],
                links=[Link(ctx(link)) for link in s.links],
                kind=s.kind,
                status=status,
                start_time=_ns(s.start),
                end_time=_ns(s.end),
                instrumentation_scope=SCOPE,
            )
        )
    return found
