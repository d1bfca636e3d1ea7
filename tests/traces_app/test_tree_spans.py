"""A run tree exported through the SDK's in-memory exporter: names, parents, attributes and
statuses as docs/deployment.md#traces describes them."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from runs_app import runlog
from runs_app.models import ToolCall
from tests.runs_app.engine_support import at, engine  # noqa: F401 - fixture
from tests.traces_app.scenario import make_tree
from traces_app import services
from traces_app.models import TraceExport

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]


def by_name(spans: Any) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for s in spans:
        found.setdefault(s.name, []).append(s)
    return found


def test_a_three_level_tree_exports_every_run_model_call_and_tool_call(
    memory_exporter: InMemorySpanExporter,
) -> None:
    made = make_tree()
    assert services.drain(timeout=20)
    spans: Any = memory_exporter.get_finished_spans()
    ids = [s.context.span_id for s in spans]
    assert len(ids) == len(set(ids)), "each span exported once"
    names = by_name(spans)
    assert sorted(names) == [
        "chat boss-model-1",
        "chat helper-model-1",
        "execute_tool delegate",
        "execute_tool file_read",
        "execute_tool memory_recall",
        "execute_tool spawn_subagent",
        "invoke_agent boss",
        "invoke_agent helper",
    ]
    assert len(names["invoke_agent boss"]) == 2  # the root and its background subagent
    assert len(names["invoke_agent helper"]) == 2  # the delegate and its subagent
    assert len(names["chat boss-model-1"]) == 3 + 1  # the root's three turns, the background's one
    assert {s.context.trace_id for s in spans} == {runlog.trace_id_of(made.boss.pk)}

    span: dict[int, Any] = {s.context.span_id: s for s in spans}
    root = span[runlog.run_span_id(made.boss.pk)]
    assert root.parent is None
    assert root.status.status_code == StatusCode.OK
    assert root.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert root.attributes["gen_ai.agent.name"] == "boss"
    assert root.attributes["gen_ai.agent.id"] == str(made.boss.pk)
    assert root.attributes["gen_ai.conversation.id"] == made.boss.session_key
    assert root.attributes["gen_ai.provider.name"] == "clawboard.scripted"
    assert root.attributes["openinference.span.kind"] == "AGENT"
    assert root.attributes["clawboard.spawn_site"] == "rest"
    assert "input.value" not in root.attributes, "content only when the operator opts in"

    delegate_call = ToolCall.objects.get(run=made.boss, name="delegate")
    helper = span[runlog.run_span_id(made.helper.pk)]
    assert helper.parent.span_id == runlog.call_span_id(delegate_call.pk)
    assert span[runlog.call_span_id(delegate_call.pk)].parent.span_id == root.context.span_id
    assert helper.attributes["clawboard.spawn_site"] == "delegate"
    assert helper.attributes["clawboard.run.mode"] == "bounded"

    spawn_call = ToolCall.objects.get(run=made.helper, name="spawn_subagent")
    leaf = span[runlog.run_span_id(made.leaf.pk)]
    assert leaf.parent.span_id == runlog.call_span_id(spawn_call.pk)
    assert leaf.attributes["clawboard.subagent.span"] == f"agent.helper.subagent.{made.leaf.pk}"
    assert leaf.attributes["clawboard.spawn_site"] == "spawn_subagent"

    background = span[runlog.run_span_id(made.background.pk)]
    started_it = ToolCall.objects.get(run=made.boss, name="spawn_subagent")
    assert background.parent.span_id == root.context.span_id
    assert [link.context.span_id for link in background.links] == [runlog.call_span_id(started_it.pk)]
    assert background.attributes["clawboard.run.execution"] == "background"

    failed = ToolCall.objects.get(run=made.leaf, name="file_read")
    tool = span[runlog.call_span_id(failed.pk)]
    assert tool.parent.span_id == leaf.context.span_id
    assert tool.status.status_code == StatusCode.ERROR
    assert tool.status.description == (failed.result or {})["error"]
    assert tool.attributes["error.type"] == "tool_error"
    assert tool.attributes["gen_ai.tool.name"] == "file_read"
    assert tool.attributes["gen_ai.tool.call.id"] == failed.call_id
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.attributes["openinference.span.kind"] == "TOOL"
    assert tool.start_time <= tool.end_time
    assert tool.start_time == int(failed.created_at.timestamp() * 1_000_000) * 1000
    assert tool.end_time == int(at(failed.finished_at).timestamp() * 1_000_000) * 1000

    approved = ToolCall.objects.get(run=made.boss, name="memory_recall")
    asked = span[runlog.call_span_id(approved.pk)]
    assert asked.status.status_code == StatusCode.UNSET
    assert asked.attributes["clawboard.approval.status"] == "approved"
    assert [e.name for e in asked.events] == ["approval.requested", "approval.decided"]

    chat = span[runlog.chat_span_id(made.boss.pk, 0)]
    assert chat.parent.span_id == root.context.span_id
    assert chat.attributes["gen_ai.operation.name"] == "chat"
    assert chat.attributes["gen_ai.request.model"] == "boss-model-1"
    assert chat.attributes["gen_ai.response.model"] == "boss-model-1"
    assert chat.attributes["openinference.span.kind"] == "LLM"
    assert chat.attributes["gen_ai.response.finish_reasons"] == ("tool_call",)
    assert chat.start_time <= chat.end_time
    # Every span lies inside its run's span.
    for s in spans:
        if s.parent is not None and s.parent.span_id in span and s.name.startswith(("chat", "execute_tool")):
            owner = span[s.parent.span_id]
            assert owner.start_time <= s.start_time and s.end_time <= owner.end_time, s.name

    assert TraceExport.objects.get(root_id=made.boss.pk).complete


def test_exporting_again_sends_nothing_and_a_rebuild_gives_the_same_spans(
    memory_exporter: InMemorySpanExporter,
) -> None:
    made = make_tree()
    assert services.drain(timeout=20)
    first = {
        s.context.span_id: (s.name, s.parent, s.start_time, s.end_time)
        for s in memory_exporter.get_finished_spans()
    }
    assert services.export_tree(root_id=made.boss.pk) == 0
    TraceExport.objects.all().delete()  # as if the receiver's acknowledgement were lost
    memory_exporter.clear()
    assert services.drain(timeout=20)
    again = {
        s.context.span_id: (s.name, s.parent, s.start_time, s.end_time)
        for s in memory_exporter.get_finished_spans()
    }
    assert again == first
