"""The export against a real OTLP receiver no one on the team wrote: Arize Phoenix, served
locally (`make phoenix` installs it in a virtual environment of its own, offline once
installed), read back through Phoenix's own REST API.

Without Phoenix installed these tests skip, except under CI=true, where they fail."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from runs_app import runlog
from runs_app.models import ToolCall
from tests.runs_app.engine_support import engine  # noqa: F401 - fixture
from tests.traces_app import receivers
from tests.traces_app.scenario import Made, make_tree
from traces_app import services
from traces_app.models import TraceExport

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]


@pytest.fixture(scope="module")
def phoenix_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not receivers.installed():
        message = f"Arize Phoenix is not installed at {receivers.PHOENIX} (make phoenix)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    with receivers.phoenix(tmp_path_factory.mktemp("phoenix")) as base:
        yield base


@pytest.fixture
def export_to(settings: Any) -> Iterator[Any]:
    settings.CLAWBOARD_TRACES_EXPORT = True

    def use(endpoint: str) -> None:
        services.use_exporter(OTLPSpanExporter(endpoint=f"{endpoint}/v1/traces", timeout=2))

    yield use
    services.use_exporter(None)


def read_back(base: str, root_id: Any, count: int, timeout: float = 30) -> list[dict[str, Any]]:
    """Phoenix writes what it received in the background: wait until `count` spans are there."""
    deadline = time.monotonic() + timeout
    while True:
        found = receivers.spans_of(base, runlog.trace_hex(root_id))
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.3)


def expected_count(made: Made) -> int:
    return TraceExport.objects.get(root_id=made.boss.pk).spans_sent


def test_phoenix_receives_the_tree_with_its_parents_kinds_attributes_and_statuses(
    phoenix_url: str, export_to: Any
) -> None:
    export_to(phoenix_url)
    made = make_tree()
    assert services.drain(timeout=30)
    sent = expected_count(made)
    assert sent == 4 + 5 + 8  # runs, tool calls, model turns (boss 3, its background child 1, helpers 2 + 2)
    found = read_back(phoenix_url, made.boss.pk, sent)
    by_id = {s["context"]["span_id"]: s for s in found}
    assert len(found) == len(by_id) == sent

    root = by_id[runlog.span_hex(runlog.run_span_id(made.boss.pk))]
    assert root["name"] == "invoke_agent boss"
    assert root["span_kind"] == "AGENT"
    assert root["parent_id"] is None
    assert root["status_code"] == "OK"
    assert root["attributes"]["gen_ai.agent.id"] == str(made.boss.pk)

    delegate_call = ToolCall.objects.get(run=made.boss, name="delegate")
    helper = by_id[runlog.span_hex(runlog.run_span_id(made.helper.pk))]
    assert helper["parent_id"] == runlog.span_hex(runlog.call_span_id(delegate_call.pk))
    assert by_id[helper["parent_id"]]["span_kind"] == "TOOL"
    assert by_id[helper["parent_id"]]["parent_id"] == root["context"]["span_id"]

    leaf = by_id[runlog.span_hex(runlog.run_span_id(made.leaf.pk))]
    spawn = ToolCall.objects.get(run=made.helper, name="spawn_subagent")
    assert leaf["parent_id"] == runlog.span_hex(runlog.call_span_id(spawn.pk))
    assert leaf["attributes"]["clawboard.subagent.span"] == f"agent.helper.subagent.{made.leaf.pk}"

    background = by_id[runlog.span_hex(runlog.run_span_id(made.background.pk))]
    assert background["parent_id"] == root["context"]["span_id"]
    assert background["attributes"]["clawboard.run.execution"] == "background"

    failed = by_id[runlog.span_hex(runlog.call_span_id(ToolCall.objects.get(run=made.leaf).pk))]
    assert failed["name"] == "execute_tool file_read"
    assert failed["span_kind"] == "TOOL"
    assert failed["status_code"] == "ERROR"
    assert failed["parent_id"] == leaf["context"]["span_id"]
    assert failed["attributes"]["error.type"] == "tool_error"

    approved = by_id[
        runlog.span_hex(runlog.call_span_id(ToolCall.objects.get(run=made.boss, name="memory_recall").pk))
    ]
    assert approved["attributes"]["clawboard.approval.status"] == "approved"
    assert [e["name"] for e in approved["events"]] == ["approval.requested", "approval.decided"]

    chats = [s for s in found if s["name"].startswith("chat ")]
    assert {s["span_kind"] for s in chats} == {"LLM"}
    assert {s["attributes"]["llm.model_name"] for s in chats} == {"boss-model-1", "helper-model-1"}


def test_a_receiver_down_then_up_gets_every_span_once(phoenix_url: str, export_to: Any) -> None:
    gate = receivers.Gate(int(phoenix_url.rsplit(":", 1)[1]))
    export_to(f"http://127.0.0.1:{gate.port}")
    made = make_tree()
    assert services.drain(timeout=30) is False  # nothing listens
    row = TraceExport.objects.get(root_id=made.boss.pk)
    assert (row.complete, row.spans_sent, row.sent) == (False, 0, [])
    assert row.attempts >= 1 and row.last_error and row.next_try_at is not None
    assert services.sweep() == 0, "not before its pause is over"

    gate.open()
    try:
        later = timezone.now() + timedelta(seconds=services.MAX_PAUSE_SECS + 1)
        assert services.sweep(now=later) == 1  # asks the worker for it
        deadline = time.monotonic() + 30
        while not TraceExport.objects.get(root_id=made.boss.pk).complete:
            assert time.monotonic() < deadline, TraceExport.objects.get(root_id=made.boss.pk).last_error
            time.sleep(0.1)
        sent = expected_count(made)
        assert services.sweep(now=later) == 0
        assert services.export_tree(root_id=made.boss.pk) == 0
        found = read_back(phoenix_url, made.boss.pk, sent)
        ids = [s["context"]["span_id"] for s in found]
        assert len(ids) == len(set(ids)) == sent
    finally:
        gate.close()


def test_phoenix_runs_without_reaching_outside(phoenix_url: str, tmp_path: Path) -> None:
    """It was started with external resources and telemetry off; its page names no host but
    its own (the UI's assets ship in the wheel)."""
    import urllib.request

    with urllib.request.urlopen(phoenix_url, timeout=10) as answer:
        page = answer.read().decode()
    assert "fonts.googleapis.com" not in page
