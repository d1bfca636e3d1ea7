"""Plain SQL for the statements the engine runs for every child, turn and event.

On this hot path Django's query building costs several times the statement itself (measured
in bench/: an ORM UPDATE by primary key about 450 µs, the same statement through a cursor
about 130 µs). The statements here are few, short and portable between SQLite and
PostgreSQL: `%s` placeholders (Django's SQLite cursor rewrites them), table and column names
from the models' metadata, and values prepared by the models' own fields, so a UUID, a date
or a JSON document is stored exactly as the ORM stores it. Everything else stays on the ORM."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Model, QuerySet

from runs_app.models import TERMINAL_STATUSES, Approval, Message, Run, RunEvent, ToolCall


def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def uid(value: Any) -> Any:
    """A run id as the database stores it (hex on SQLite, uuid on PostgreSQL), as
    UUIDField.get_db_prep_value gives it."""
    if not isinstance(value, uuid.UUID):
        value = uuid.UUID(str(value))
    return value if connection.features.has_native_uuid_field else value.hex


def when(value: datetime | None) -> Any:
    return connection.ops.adapt_datetimefield_value(value)


_EVENT_DATA = RunEvent._meta.get_field("data")


def json(model: type[Model], name: str, value: Any) -> Any:
    """A value for a JSON column, as that field stores it."""
    return model._meta.get_field(name).get_db_prep_save(value, connection)  # type: ignore[union-attr]


def execute(sql: str, params: list[Any]) -> int:
    """Run one statement; the number of rows it changed."""
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


def fetchone(sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchone()


def fetchall(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def insert_event(run_id: Any, root_id: Any, type_: str, at: datetime, data: dict[str, Any]) -> int:
    """INSERT one RunEvent row; its id."""
    sql = f"INSERT INTO {table(RunEvent)} (run_id, root_id, type, at, data) VALUES (%s, %s, %s, %s, %s)"
    params = [uid(run_id), uid(root_id), type_, when(at), _EVENT_DATA.get_db_prep_save(data, connection)]
    with connection.cursor() as cursor:
        if connection.features.can_return_columns_from_insert:
            cursor.execute(sql + " RETURNING id", params)
            return int(cursor.fetchone()[0])
        cursor.execute(sql, params)
        return int(cursor.lastrowid)


class Prepared:
    """A queryset compiled once per thread and connection, then run again with other values
    for its parameters: the ORM's own SQL, converters and model loading, without building the
    query each time. `build(*values)` must give a queryset whose SQL does not depend on the
    values (a filter on equality, say); the values are passed already prepared for the
    database (`uid()` for a run id)."""

    def __init__(self, build: Callable[..., QuerySet[Any]], *samples: tuple[Any, Any]) -> None:
        self.build = build
        self.samples = samples  # two distinct sample values per parameter, to find its slot
        self._local = threading.local()

    def _compiled(self) -> tuple[Any, str, list[Any], list[int], Any, Any]:
        key = (connection.alias, connection.vendor)
        state = getattr(self._local, "state", None)
        if state is None or state[0] != key:
            first = [a for a, _ in self.samples]
            compiler = self.build(*first).query.get_compiler(using=connection.alias)
            sql_text, params = compiler.as_sql()
            slots = []
            for i, (_, other) in enumerate(self.samples):
                values = list(first)
                values[i] = other
                _, other_params = self.build(*values).query.get_compiler(using=connection.alias).as_sql()
                diff = [j for j, (x, y) in enumerate(zip(params, other_params, strict=True)) if x != y]
                assert len(diff) == 1, "a prepared query's parameter must appear once"
                slots.append(diff[0])
            fields = [col[0] for col in compiler.select[0 : compiler.col_count]]
            state = (key, sql_text, list(params), slots, compiler, compiler.get_converters(fields))
            self._local.state = state
        return state

    def _rows(self, values: tuple[Any, ...]) -> tuple[Any, list[tuple[Any, ...]]]:
        _, sql_text, params, slots, compiler, converters = self._compiled()
        params = list(params)
        for slot, value in zip(slots, values, strict=True):
            params[slot] = value
        with connection.cursor() as cursor:
            cursor.execute(sql_text, params)
            rows = cursor.fetchall()
        if converters:
            rows = [tuple(r) for r in compiler.apply_converters(rows, converters)]
        return compiler, rows

    def values(self, *values: Any) -> list[tuple[Any, ...]]:
        """For a `values_list()` queryset: its rows."""
        return self._rows(values)[1]

    def models(self, *values: Any) -> list[Any]:
        """For a queryset of model instances (no select_related): the instances."""
        compiler, rows = self._rows(values)
        info = compiler.klass_info
        start, end = info["select_fields"][0], info["select_fields"][-1] + 1
        names = [s[0].target.attname for s in compiler.select[start:end]]
        model = info["model"]
        return [model.from_db(connection.alias, names, row[start:end]) for row in rows]


RUN_BY_PK = Prepared(lambda pk: Run.objects.filter(pk=pk).order_by(), *[(uuid.UUID(int=1), uuid.UUID(int=2))])


def run_get(pk: Any) -> Run | None:
    """The run with this primary key, loaded as `Run.objects.filter(pk=pk).first()` would."""
    found = RUN_BY_PK.models(uid(pk))
    return found[0] if found else None


MESSAGES_FROM = Prepared(
    lambda run_id, seq: Message.objects.filter(run_id=run_id, seq__gte=seq).order_by("seq"),
    (uuid.UUID(int=1), uuid.UUID(int=2)),
    (1, 2),
)
CALLS_OF_TURN = Prepared(
    lambda run_id, turn: ToolCall.objects.filter(run_id=run_id, turn=turn).order_by("position"),
    (uuid.UUID(int=1), uuid.UUID(int=2)),
    (1, 2),
)
CALL_BY_PK = Prepared(lambda pk: ToolCall.objects.filter(pk=pk).order_by(), (1, 2))
CHILDREN_OF_CALL = Prepared(
    lambda pk: Run.objects.filter(parent_call_id=pk).order_by("created_at", "id"), (1, 2)
)


def blocking_counts(run_id: Any) -> tuple[int, int]:
    """How many pending tool calls a run still waits on, and how many of those are approvals
    not yet given. An approved call is pending until the run executes it, but it blocks
    nothing: the run itself runs it when it resumes. (The one place this rule is written.)"""
    row = fetchone(
        f"SELECT COUNT(*), COALESCE(SUM(CASE WHEN c.wait_kind = %s THEN 1 ELSE 0 END), 0)"
        f" FROM {table(ToolCall)} c LEFT OUTER JOIN {table(Approval)} a ON a.tool_call_id = c.id"
        " WHERE c.run_id = %s AND c.status = %s"
        " AND NOT (c.wait_kind = %s AND COALESCE(a.status, '') = %s)",
        ["approval", uid(run_id), "pending", "approval", "approved"],
    )
    return (int(row[0]), int(row[1])) if row else (0, 0)


def insert(objs: list[Any]) -> None:
    """INSERT new rows of one model whose generated ids nobody reads back (a Run's id is a
    UUID set in Python; a Message's or ToolCall's is not needed): what `bulk_create` does,
    field by field the same (`pre_save` stamps auto_now_add), without building the query."""
    if not objs:
        return
    meta = objs[0]._meta
    fields = [f for f in meta.concrete_fields if not getattr(f, "db_returning", False)]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    marks = ", ".join(["%s"] * len(fields))
    rows = []
    for obj in objs:
        rows.append([f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields])
        obj._state.adding, obj._state.db = False, connection.alias
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {table(type(objs[0]))} ({columns}) VALUES ({marks})", rows)


def active_children(parent_id: Any, kind: str) -> int:
    """How many children of this kind a run has that are not terminal yet."""
    terminal = sorted(TERMINAL_STATUSES)
    row = fetchone(
        f"SELECT COUNT(*) FROM {table(Run)} WHERE parent_id = %s AND kind = %s"
        f" AND status NOT IN ({', '.join(['%s'] * len(terminal))})",
        [uid(parent_id), kind, *terminal],
    )
    return int(row[0]) if row else 0
