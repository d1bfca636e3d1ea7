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
