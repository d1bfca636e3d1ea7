"""The engine's tables carry no one-column index that a composite index of the same table
already leads (migrations runs_app 0007, policies_app 0002): each would be written on every
insert for nothing. The composite indexes that serve those lookups are there."""

from __future__ import annotations

import pytest
from django.db import connection

pytestmark = pytest.mark.django_db


def indexes(table: str) -> list[tuple[str, ...]]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, table)
    return sorted(
        tuple(i["columns"])
        for i in found.values()
        if (i["index"] or i["unique"]) and not i["primary_key"] and not i.get("foreign_key")
    )


@pytest.mark.parametrize(
    ("table", "dropped", "kept"),
    [
        ("runs_app_run", [("parent_id",), ("root_id",), ("status",)],
         [("parent_id", "status"), ("root_id", "created_at"), ("status", "heartbeat_at")]),
        ("runs_app_runevent", [("root_id",)], [("root_id", "id"), ("run_id",)]),
        ("runs_app_toolcall", [("run_id",)], [("run_id", "status"), ("run_id", "turn"), ("status",)]),
        ("runs_app_message", [("run_id",)], [("run_id", "seq")]),
        ("policies_app_trackeraction", [("tracker_id",)], [("tracker_id", "at"), ("at",)]),
        ("policies_app_trackercost", [("tracker_id",)], [("tracker_id", "day")]),
    ],
)  # fmt: skip
def test_no_index_is_led_by_a_composite_one(
    table: str, dropped: list[tuple[str, ...]], kept: list[tuple[str, ...]]
) -> None:
    found = indexes(table)
    assert [d for d in dropped if d in found] == []
    assert [k for k in kept if k not in found] == []


@pytest.mark.parametrize(
    ("query", "index"),
    [
        ("SELECT id FROM runs_app_run WHERE root_id = 'x'", "(root_id=?)"),
        ("SELECT id FROM runs_app_run WHERE parent_id = 'x'", "(parent_id=?)"),
        ("SELECT COUNT(*) FROM runs_app_run WHERE status = 'running'", "(status=?)"),
        (
            "SELECT id FROM runs_app_runevent WHERE root_id = 'x' AND id > 5 ORDER BY id",
            "(root_id=? AND id>?)",
        ),
        ("SELECT id FROM runs_app_message WHERE run_id = 'x' ORDER BY seq", "(run_id=?)"),
        ("SELECT id FROM runs_app_toolcall WHERE run_id = 'x'", "(run_id=?)"),
        ("SELECT id FROM policies_app_trackeraction WHERE tracker_id = 1", "(tracker_id=?)"),
    ],
)
def test_the_lookups_of_a_dropped_index_still_search_an_index(query: str, index: str) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's query plan")
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + query)
        plan = [row[-1] for row in cursor.fetchall()]
    assert (
        len(plan) == 1 and plan[0].startswith("SEARCH ") and "INDEX" in plan[0] and plan[0].endswith(index)
    ), plan
