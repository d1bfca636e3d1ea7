"""runs_app.engine.sql: the engine's plain statements read and write exactly what the ORM would."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.utils import timezone

from runs_app.engine import sql
from runs_app.models import Message, Run, RunEvent, ToolCall

pytestmark = pytest.mark.django_db


def make_run(**fields: Any) -> Run:
    defaults: dict[str, Any] = {
        "agent": "boss",
        "prompt": "go",
        "policy": {"a": [1, "x"]},
        "tools": ["shell"],
    }
    return Run.objects.create(**{**defaults, **fields})


def field_values(obj: Any) -> dict[str, Any]:
    return {f.attname: getattr(obj, f.attname) for f in type(obj)._meta.concrete_fields}


def test_uid_is_what_the_uuid_field_stores() -> None:
    value = uuid.uuid4()
    expected = Run._meta.pk.get_db_prep_value(value, connection)  # type: ignore[union-attr]
    assert sql.uid(value) == expected
    assert sql.uid(str(value)) == expected


@pytest.mark.parametrize(
    "value",
    [
        None,
        datetime(2026, 11, 30, 21, 5, 7, 123456, tzinfo=UTC),
        datetime(2026, 11, 30, 21, 5, 7, tzinfo=UTC),  # no microseconds
        datetime(2026, 11, 30, 23, 5, 7, 5, tzinfo=dt_timezone(timedelta(hours=2))),
        datetime(2026, 11, 30, 23, 5, 7, 5, tzinfo=ZoneInfo("Europe/Paris")),
    ],
)
def test_when_is_what_the_datetime_field_stores(value: datetime | None) -> None:
    field = Run._meta.get_field("finished_at")
    assert sql.when(value) == field.get_db_prep_save(value, connection)


def test_when_stores_a_timestamp_that_reads_back_the_same() -> None:
    run = make_run()
    at = timezone.now()
    sql.execute(
        f"UPDATE {sql.table(Run)} SET finished_at = %s WHERE id = %s", [sql.when(at), sql.uid(run.pk)]
    )
    assert Run.objects.get(pk=run.pk).finished_at == at


def test_run_get_loads_the_same_run_as_the_orm() -> None:
    parent = make_run()
    run = make_run(
        parent=parent, root=parent, has_inbox=True, started_at=timezone.now(), tool_result={"ok": 1}
    )
    loaded = sql.run_get(run.pk)
    assert loaded is not None
    assert field_values(loaded) == field_values(Run.objects.get(pk=run.pk))
    assert loaded._state.adding is False
    assert sql.run_get(uuid.uuid4()) is None


def test_prepared_queries_follow_their_parameters() -> None:
    run = make_run()
    for seq, role in enumerate(["system", "user", "assistant"]):
        Message.objects.create(run=run, seq=seq, role=role, content=role, tool_calls=[{"id": str(seq)}])
    other = make_run()
    Message.objects.create(run=other, seq=0, role="user", content="other")
    rows = sql.MESSAGES_FROM.models(sql.uid(run.pk), 1)
    assert [(m.seq, m.role, m.tool_calls) for m in rows] == [
        (1, "user", [{"id": "1"}]),
        (2, "assistant", [{"id": "2"}]),
    ]
    assert [m.content for m in sql.MESSAGES_FROM.models(sql.uid(other.pk), 0)] == ["other"]


def test_insert_writes_what_bulk_create_writes() -> None:
    run_id = uuid.uuid4()
    fast = Run(id=run_id, agent="boss", prompt="p", policy={"k": "v"}, tools=["a"], agentic=False)
    sql.insert([fast])
    assert fast._state.adding is False
    stored = Run.objects.get(pk=run_id)
    assert (stored.agent, stored.policy, stored.tools, stored.agentic, stored.status) == (
        "boss", {"k": "v"}, ["a"], False, "queued"
    )  # fmt: skip
    assert stored.created_at is not None  # auto_now_add stamped by pre_save
    sql.insert([Message(run=stored, seq=0, role="user", content="hi", tool_calls=[{"id": "c"}])])
    assert list(stored.messages.values_list("seq", "role", "content", "tool_calls")) == [
        (0, "user", "hi", [{"id": "c"}])
    ]


def test_insert_returning_reads_the_generated_ids_back_in_order() -> None:
    run = make_run()
    calls = [
        ToolCall(run=run, turn=0, position=i, call_id=f"c{i}", name="shell", arguments={"i": i})
        for i in range(3)
    ]
    sql.insert(calls, returning=True)
    stored = {c.pk: (c.position, c.arguments) for c in ToolCall.objects.filter(run=run)}
    if connection.features.can_return_rows_from_bulk_insert:
        assert [stored[c.pk] for c in calls] == [(0, {"i": 0}), (1, {"i": 1}), (2, {"i": 2})]
    else:
        assert all(c.pk is None for c in calls) and len(stored) == 3


def test_insert_event_returns_the_new_id() -> None:
    run = make_run()
    at = timezone.now()
    event_id = sql.insert_event(run.pk, run.pk, "run.started", at, {"owner": "w", "n": [1, 2]})
    event = RunEvent.objects.get(pk=event_id)
    assert (event.run_id, event.root_id, event.type, event.at, event.data) == (
        run.pk, run.pk, "run.started", at, {"owner": "w", "n": [1, 2]}
    )  # fmt: skip


def test_blocking_counts_leave_out_approved_calls() -> None:
    from runs_app.models import Approval

    run = make_run()
    waiting = ToolCall.objects.create(run=run, turn=0, position=0, call_id="a", name="spawn_subagent",
                                      wait_kind="children")  # fmt: skip
    asked = ToolCall.objects.create(
        run=run, turn=0, position=1, call_id="b", name="shell", wait_kind="approval"
    )
    approved = ToolCall.objects.create(
        run=run, turn=0, position=2, call_id="c", name="shell", wait_kind="approval"
    )
    ToolCall.objects.create(run=run, turn=0, position=3, call_id="d", name="shell", status="done")
    Approval.objects.create(tool_call=asked, run=run)
    Approval.objects.create(tool_call=approved, run=run, status="approved")
    assert sql.blocking_counts(run.pk) == (2, 1)
    ToolCall.objects.filter(pk=waiting.pk).update(status="done")
    assert sql.blocking_counts(run.pk) == (1, 1)


def test_active_children_counts_non_terminal_children_of_a_kind() -> None:
    parent = make_run()
    for status in ("queued", "running", "waiting", "completed", "failed"):
        make_run(parent=parent, root=parent, kind="subagent", status=status)
    make_run(parent=parent, root=parent, kind="delegate", status="running")
    assert sql.active_children(parent.pk, "subagent") == 3
    assert sql.active_children(parent.pk, "delegate") == 1
