"""Plain SQL for the statements the engine runs for every child, turn and event.

On this hot path Django's query building costs several times the statement itself (measured
in bench/: an ORM UPDATE by primary key about 450 µs, the same statement through a cursor
about 130 µs). The statements here are few, short and portable between SQLite and
PostgreSQL: `%s` placeholders, table and column names from the models' metadata, and values
prepared by the models' own fields, so a UUID, a date or a JSON document is stored exactly as
the ORM stores it. Everything else stays on the ORM.

They run on the database driver's own cursor (`cursor()` below): Django's cursor wrapper adds
little per statement, but the engine runs sixty statements a child. Errors are still turned
into Django's exceptions, a broken transaction is still refused, and when queries are being
logged (DEBUG, or a test counting them) or wrapped, Django's cursor is used so that they are
seen."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from typing import Any

from django.db import connection, models
from django.db.backends.sqlite3.base import FORMAT_QMARK_REGEX
from django.db.models import Model, QuerySet

from runs_app.models import ACTIVE_STATUSES, Approval, Message, Run, RunEvent, ToolCall
from zeroclaw_site import dbconn

# This thread's connection wrapper, as `django.db.connection` gives it, and a timestamp as
# the datetime field stores it: both without asgiref's lookups (`zeroclaw_site.dbconn`).
conn = dbconn.default
when = dbconn.when


@cache
def table(model: type[Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


@cache
def _native_uuid() -> bool:
    return bool(connection.features.has_native_uuid_field)


def uid(value: Any) -> Any:
    """A run id as the database stores it (hex on SQLite, uuid on PostgreSQL), as
    UUIDField.get_db_prep_value gives it."""
    if not isinstance(value, uuid.UUID):
        value = uuid.UUID(str(value))
    return value if _native_uuid() else value.hex


_EVENT_DATA = RunEvent._meta.get_field("data")


def json(model: type[Model], name: str, value: Any) -> Any:
    """A value for a JSON column, as that field stores it."""
    return model._meta.get_field(name).get_db_prep_save(value, conn())  # type: ignore[union-attr]


_QMARK: dict[str, str] = {}


def _qmark(sql: str) -> str:
    """`%s` placeholders as SQLite's driver takes them (what Django's SQLite cursor does to
    every statement, done once per statement text)."""
    text = _QMARK.get(sql)
    if text is None:
        text = _QMARK[sql] = FORMAT_QMARK_REGEX.sub("?", sql).replace("%%", "%")
    return text


class _Raw:
    """The driver's cursor, taking Django's `%s` statements."""

    __slots__ = ("cursor", "qmark")

    def __init__(self, cursor: Any, qmark: bool) -> None:
        self.cursor, self.qmark = cursor, qmark

    def execute(self, sql: str, params: list[Any]) -> Any:
        return self.cursor.execute(_qmark(sql) if self.qmark else sql, params)

    def executemany(self, sql: str, rows: list[list[Any]]) -> Any:
        return self.cursor.executemany(_qmark(sql) if self.qmark else sql, rows)

    def fetchone(self) -> Any:
        return self.cursor.fetchone()

    def fetchall(self) -> Any:
        return self.cursor.fetchall()

    @property
    def rowcount(self) -> int:
        return int(self.cursor.rowcount)

    @property
    def lastrowid(self) -> Any:
        return self.cursor.lastrowid


@contextmanager
def cursor() -> Iterator[Any]:
    """A cursor for this thread's connection: the driver's own, or Django's when queries are
    logged or wrapped. Both take `%s` placeholders."""
    db = conn()
    if db.queries_logged or db.execute_wrappers:
        with db.cursor() as wrapped:
            yield wrapped
        return
    if db.connection is None:
        db.ensure_connection()
    db.validate_no_broken_transaction()
    with db.wrap_database_errors:
        raw = db.connection.cursor()
        try:
            yield _Raw(raw, db.vendor == "sqlite")
        finally:
            raw.close()


def execute(sql: str, params: list[Any]) -> int:
    """Run one statement; the number of rows it changed."""
    with cursor() as cur:
        cur.execute(sql, params)
        return int(cur.rowcount)


def fetchone(sql: str, params: list[Any]) -> tuple[Any, ...] | None:
    with cursor() as cur:
        cur.execute(sql, params)
        row = cur.fetchone()
        return tuple(row) if row is not None else None


def fetchall(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with cursor() as cur:
        cur.execute(sql, params)
        return [tuple(r) for r in cur.fetchall()]


@cache
def _returning() -> bool:
    return bool(connection.features.can_return_columns_from_insert)


def insert_event(run_id: Any, root_id: Any, type_: str, at: datetime, data: dict[str, Any]) -> int:
    """INSERT one RunEvent row; its id."""
    return insert_row_event(event_row(run_id, root_id, type_, at, data))


def event_row(run_id: Any, root_id: Any, type_: str, at: datetime, data: dict[str, Any]) -> list[Any]:
    """A RunEvent row's values (run_id, root_id, type, at, data), prepared for the database."""
    return [uid(run_id), uid(root_id), type_, when(at), _EVENT_DATA.get_db_prep_save(data, conn())]


_EVENTS_CHUNK = 500  # rows per INSERT: 2,500 parameters, far under SQLite's limit


def insert_events(rows: list[list[Any]]) -> list[int]:
    """INSERT RunEvent rows (from `event_row`) in as few statements as the database allows;
    their ids, in the order of the rows. The ids of one statement are handed out in the order
    of its rows (SQLite's rowids and a PostgreSQL sequence both count up row by row), so the
    ids read back are sorted rather than trusted to come back in that order."""
    ids: list[int] = []
    head = f"INSERT INTO {table(RunEvent)} (run_id, root_id, type, at, data) VALUES "
    for start in range(0, len(rows), _EVENTS_CHUNK):
        chunk = rows[start : start + _EVENTS_CHUNK]
        if not _returning():
            ids += [insert_row_event(row) for row in chunk]
            continue
        with cursor() as cur:
            cur.execute(
                head + ", ".join(["(%s, %s, %s, %s, %s)"] * len(chunk)) + " RETURNING id",
                [v for row in chunk for v in row],
            )
            ids += sorted(int(r[0]) for r in cur.fetchall())
    return ids


def insert_row_event(row: list[Any]) -> int:
    """INSERT one RunEvent row (from `event_row`); its id."""
    sql = f"INSERT INTO {table(RunEvent)} (run_id, root_id, type, at, data) VALUES (%s, %s, %s, %s, %s)"
    with cursor() as cur:
        if _returning():
            cur.execute(sql + " RETURNING id", row)
            return int(cur.fetchone()[0])
        cur.execute(sql, row)
        return int(cur.lastrowid)


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
        db = conn()
        key = (db.alias, db.vendor)
        state = getattr(self._local, "state", None)
        if state is None or state[0] != key:
            first = [a for a, _ in self.samples]
            compiler = self.build(*first).query.get_compiler(using=db.alias)
            sql_text, params = compiler.as_sql()
            slots = []
            for i, (_, other) in enumerate(self.samples):
                values = list(first)
                values[i] = other
                _, other_params = self.build(*values).query.get_compiler(using=db.alias).as_sql()
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
        with cursor() as cur:
            cur.execute(sql_text, params)
            rows = cur.fetchall()
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
        alias = conn().alias
        return [model.from_db(alias, names, row[start:end]) for row in rows]


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


# Field classes whose value, when it already has the Python type named here, is stored as it
# is: `get_db_prep_save` would return it unchanged (after a few method calls per field, which
# for a Run's forty-odd fields cost more than its INSERT).
_PLAIN_TYPES: dict[type[Any], type[Any]] = {
    models.CharField: str,
    models.TextField: str,
    models.IntegerField: int,
    models.PositiveIntegerField: int,
    models.PositiveSmallIntegerField: int,
    models.BigIntegerField: int,
    models.BooleanField: bool,
    models.FloatField: float,
}
_plans: dict[tuple[Any, str], tuple[str, str, list[tuple[Any, str, Any]]]] = {}


def _insert_plan(meta: Any, db: Any) -> tuple[str, str, list[tuple[Any, str, Any]]]:
    """For a model: the INSERT's head, one row's placeholders, and per column (field, its
    attribute, the Python type stored as it is, or None for the field's own preparation)."""
    key = (meta.model, db.alias)
    plan = _plans.get(key)
    if plan is None:
        fields = [f for f in meta.concrete_fields if not getattr(f, "db_returning", False)]
        columns = ", ".join(db.ops.quote_name(f.column) for f in fields)
        head = f"INSERT INTO {table(meta.model)} ({columns}) VALUES "
        marks = "(" + ", ".join(["%s"] * len(fields)) + ")"
        plan = _plans[key] = (head, marks, [(f, f.attname, _PLAIN_TYPES.get(type(f))) for f in fields])
    return plan


def insert(objs: list[Any], *, returning: bool = False) -> None:
    """INSERT new rows of one model: what `bulk_create` does, field by field the same
    (`pre_save` stamps auto_now_add), without building the query. A Run's id is a UUID set in
    Python; `returning=True` reads generated ids back (one multi-row INSERT ... RETURNING, in
    the order of the rows, as bulk_create relies on too) where the database can, and leaves
    them None where it cannot."""
    if not objs:
        return
    db = conn()
    meta = objs[0]._meta
    head, marks, columns = _insert_plan(meta, db)
    rows = []
    for obj in objs:
        values = obj.__dict__
        row = []
        for f, attname, plain in columns:
            value = values.get(attname)
            if plain is None or (type(value) is not plain and value is not None):
                value = f.get_db_prep_save(f.pre_save(obj, True), db)
            row.append(value)
        rows.append(row)
        obj._state.adding, obj._state.db = False, db.alias
    with cursor() as cur:
        if returning and db.features.can_return_rows_from_bulk_insert:
            pk = db.ops.quote_name(meta.pk.column)
            cur.execute(
                head + ", ".join([marks] * len(rows)) + f" RETURNING {pk}", [v for r in rows for v in r]
            )
            for obj, (value,) in zip(objs, cur.fetchall(), strict=True):
                obj.pk = value
        else:
            cur.executemany(head + marks, rows)


def active_children(parent_id: Any, kind: str) -> int:
    """How many children of this kind a run has that are not terminal yet (an index seek per
    active status on (parent, status), however many children the run had)."""
    active = sorted(ACTIVE_STATUSES)
    row = fetchone(
        f"SELECT COUNT(*) FROM {table(Run)} WHERE parent_id = %s AND status IN ({', '.join(['%s'] * len(active))})"
        " AND kind = %s",
        [uid(parent_id), *active, kind],
    )
    return int(row[0]) if row else 0
