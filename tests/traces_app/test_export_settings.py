"""When export is on, what it sends beyond the tree's shape: nothing without the endpoint,
content only when asked (never a secret), the sampler, the service name, a cron run's fields,
a long run's spans as its calls end."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from runs_app import runlog
from runs_app.models import Approval, Run, Schedule, ToolCall
from runs_app.services import approval_decide, run_start, schedules_fire_due
from tests.runs_app.engine_support import (
    agent,
    configure,
    engine,  # noqa: F401 - fixture
    finish,
    make_user,
    provider,
    wait_for,
    wait_until,
)
from tests.traces_app.scenario import BOSS, HELPER
from traces_app import config, services
from traces_app.models import TraceExport


@pytest.mark.parametrize(
    ("environ", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:6006"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:6006/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://x", "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
    ],
)
def test_export_is_on_only_with_an_endpoint(environ: dict[str, str], on: bool) -> None:
    assert config.export_enabled(environ) is on


@pytest.mark.parametrize(
    ("value", "on"),
    [
        ("", False),
        ("NO_CONTENT", False),
        ("SPAN_ONLY", True),
        ("span_and_event", True),
        ("true", True),
        ("EVENT_ONLY", False),
    ],
)
def test_content_is_captured_only_when_asked(value: str, on: bool) -> None:
    assert config.capture_content({"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": value}) is on


@pytest.fixture
def sdk_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The SDK's variables as a test sets them, read afresh."""
    services.resource.cache_clear()
    services.sampler.cache_clear()
    yield monkeypatch
    monkeypatch.undo()
    services.resource.cache_clear()
    services.sampler.cache_clear()


def simple() -> None:
    configure(
        provider(
            "solo",
            [
                {
                    "turns": [
                        {"tool_calls": [{"name": "memory_recall", "arguments": {"query": "q"}}]},
                        {"say": "ok"},
                    ]
                }
            ],
        )
        + agent("solo", "scripted.solo")
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("engine")
def test_without_the_endpoint_nothing_is_exported_nor_recorded(settings: Any) -> None:
    settings.CLAWBOARD_TRACES_EXPORT = False
    found = InMemorySpanExporter()
    services.use_exporter(found)
    try:
        simple()
        run = finish("solo", "go")
        assert run.status == "completed"
        assert services.sweep() == 0
        assert services.export_tree(root_id=run.pk) == 0
        assert not TraceExport.objects.exists()
        assert found.get_finished_spans() == ()
    finally:
        services.use_exporter(None)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("engine")
def test_content_is_exported_when_asked_with_secrets_masked(
    memory_exporter: InMemorySpanExporter, settings: Any, sdk_env: pytest.MonkeyPatch
) -> None:
    settings.CLAWBOARD_TRACES_CAPTURE = True
    sdk_env.setenv("SEARCH_API_KEY", "sk-test-0123456789")
    configure(
        provider(
            "solo",
            [
                {
                    "turns": [
                        {
                            "tool_calls": [
                                {"name": "memory_recall", "arguments": {"query": "sk-test-0123456789"}}
                            ]
                        },
                        {"say": "ok"},
                    ]
                }
            ],
        )
        + agent("solo", "scripted.solo")
    )
    run = finish("solo", "find it")
    assert services.drain(timeout=20)
    spans: dict[str, Any] = {s.name: s for s in memory_exporter.get_finished_spans()}
    tool = spans["execute_tool memory_recall"]
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"query": "[redacted]"}'
    assert tool.attributes["gen_ai.tool.call.result"] == "No memories found."
    agent_span = spans["invoke_agent solo"]
    assert agent_span.attributes["input.value"] == "find it"
    assert agent_span.attributes["output.value"] == run.output == "ok"
    chats: list[Any] = [s for s in memory_exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert '"[redacted]"' in chats[0].attributes["gen_ai.output.messages"]
    assert all(
        "sk-test-0123456789" not in str(dict(s.attributes or {}))
        for s in memory_exporter.get_finished_spans()
    )


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("engine")
def test_the_sampler_of_the_environment_decides_for_the_whole_tree(
    memory_exporter: InMemorySpanExporter, sdk_env: pytest.MonkeyPatch
) -> None:
    sdk_env.setenv("OTEL_TRACES_SAMPLER", "always_off")
    simple()
    run = finish("solo", "go")
    assert services.drain(timeout=20)
    assert memory_exporter.get_finished_spans() == ()
    row = TraceExport.objects.get(root_id=run.pk)
    assert (row.complete, row.sampled) == (True, False)


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("engine")
def test_the_service_name_is_clawboard_unless_the_environment_names_one(
    memory_exporter: InMemorySpanExporter, sdk_env: pytest.MonkeyPatch
) -> None:
    assert services.resource().attributes["service.name"] == "clawboard"
    sdk_env.setenv("OTEL_SERVICE_NAME", "clawboard-prod")
    sdk_env.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=prod")
    services.resource.cache_clear()
    simple()
    finish("solo", "go")
    assert services.drain(timeout=20)
    resource = memory_exporter.get_finished_spans()[0].resource
    assert resource.attributes["service.name"] == "clawboard-prod"
    assert resource.attributes["deployment.environment.name"] == "prod"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("engine")
def test_a_cron_run_carries_the_subagent_fields(memory_exporter: InMemorySpanExporter) -> None:
    simple()
    schedule = Schedule.objects.create(name="nightly", agent="solo", prompt="tidy", cron="* * * * *")
    Schedule.objects.filter(pk=schedule.pk).update(created_at=schedule.created_at.replace(year=2020))
    (started,) = schedules_fire_due()
    run = wait_for(started.pk)
    assert run.spawn_site == "cron"
    assert services.drain(timeout=20)
    span: Any = next(
        s for s in memory_exporter.get_finished_spans() if s.context.span_id == runlog.run_span_id(run.pk)
    )
    assert {k: v for k, v in span.attributes.items() if k.startswith("subagent.")} == {
        "subagent.category": "cron",
        "subagent.agent_alias": "solo",
        "subagent.cron_job_id": str(schedule.pk),
        "subagent.run_id": str(run.pk),
        "subagent.spawn_site": "cron",
    }
    assert span.attributes["clawboard.spawn_site"] == "cron"


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("engine")
def test_a_long_run_exports_its_calls_as_they_end_and_the_rest_once_it_ends(
    memory_exporter: InMemorySpanExporter,
) -> None:
    configure(
        provider("boss", BOSS, model="boss-model-1")
        + provider("helper", HELPER, model="helper-model-1")
        + '[risk_profiles.gated]\nallowed_commands = ["*"]\nalways_ask = ["memory_recall"]\n'
        + '[risk_profiles.gated.delegation_policy]\nmode = "allow"\n'
        + "[runtime_profiles.agentic]\nagentic = true\n"
        + agent("boss", "scripted.boss", risk="gated", delegates=["helper"])
        + agent("helper", "scripted.helper", runtime="agentic")
    )
    user = make_user()
    root = wait_for(run_start(agent="boss", prompt="go", user=user).pk, {"awaiting_approval"})
    # Only the root still runs (it waits for its approval); its children have ended.
    wait_until(lambda: Run.objects.filter(root_id=root.pk, finished_at__isnull=True).count() == 1)
    # The calls that ended asked for a partial export a few seconds later: done here at once
    # (or by the worker, if it came first: then this sends nothing).
    while services.export_tree(root_id=root.pk) is None:
        time.sleep(0.05)
    early = {s.context.span_id for s in memory_exporter.get_finished_spans()}
    assert runlog.run_span_id(root.pk) not in early, "the run still waits: its span has no end yet"
    delegate_call = ToolCall.objects.get(run=root, name="delegate")
    assert runlog.call_span_id(delegate_call.pk) in early
    assert runlog.chat_span_id(root.pk, 0) in early
    assert not TraceExport.objects.get(root_id=root.pk).complete

    approval_decide(approval=Approval.objects.get(run=root), user=user, approve=True)
    assert wait_for(root.pk).status == "completed"
    assert services.drain(timeout=20)
    ids = [s.context.span_id for s in memory_exporter.get_finished_spans()]
    assert len(ids) == len(set(ids)) == 17
    assert runlog.run_span_id(root.pk) in ids


@pytest.mark.django_db
def test_the_export_adds_no_statement_to_the_engines_transactions(
    settings: Any, django_capture_on_commit_callbacks: Any
) -> None:
    """What runs inside an engine transaction is the receiver of the written events: with
    export on it only registers a task message for after the commit."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext

    from runs_app import events

    run = Run.objects.create(agent="solo")
    Run.objects.filter(pk=run.pk).update(root_id=run.pk)
    run.root_id = run.pk

    def statements(on: bool) -> list[str]:
        settings.CLAWBOARD_TRACES_EXPORT = on
        with django_capture_on_commit_callbacks() as registered:
            with CaptureQueriesContext(connection) as queries, transaction.atomic():
                with events.tree_tx(run.pk):
                    events.emit(run, "tool.result", {"call_id": "c1"})
                    events.emit(run, "model.response", {"turn": 0})
                    events.emit(run, "run.completed", {})
        assert len(registered) >= (2 if on else 1)
        return [q["sql"].split(" ")[0] for q in queries.captured_queries]

    assert statements(True) == statements(False)
