"""Every migration of the runs table keeps its full-text search (0002_run_search's triggers):
SQLite drops a table's triggers when a migration rebuilds it."""

from __future__ import annotations

import pytest
from django.db import connection

from runs_app.models import Run
from runs_app.selectors import run_search

pytestmark = pytest.mark.django_db


def test_a_run_created_after_the_last_migration_is_found_by_its_words() -> None:
    Run.objects.create(agent="main", prompt="find the heliotrope invoice")
    Run.objects.create(agent="main", prompt="something else")

    found = list(run_search(Run.objects.all(), "heliotrope").values_list("prompt", flat=True))

    assert found == ["find the heliotrope invoice"]


def test_the_search_triggers_exist_after_every_migration() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the triggers are SQLite's; PostgreSQL searches through an index")
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'runs_app_run'")
        names = sorted(row[0] for row in cursor.fetchall())
    assert names == ["runs_app_run_fts_delete", "runs_app_run_fts_insert", "runs_app_run_fts_update"]
