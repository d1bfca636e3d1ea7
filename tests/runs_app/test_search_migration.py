"""Migration runs_app 0002 (the full-text index) goes both ways, and indexes the runs that
existed before it (its backfill)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from runs_app import selectors
from runs_app.models import Run


@pytest.mark.django_db(transaction=True)
def test_the_search_index_is_built_for_existing_runs_and_can_be_removed() -> None:
    call_command("migrate", "runs_app", "0001", verbosity=0)
    try:
        # The model as it was at 0001 (later migrations add columns the current class has).
        state = MigrationExecutor(connection).loader.project_state(("runs_app", "0001_initial"))
        OldRun = state.apps.get_model("runs_app", "Run")
        old = OldRun.objects.create(agent="alpha", prompt="an old run about lighthouses")
    finally:
        call_command("migrate", "runs_app", verbosity=0)
    found = selectors.run_search(Run.objects.all(), "lighthouse")
    assert list(found.values_list("pk", flat=True)) == [old.pk]
    new = Run.objects.create(agent="alpha", output="another lighthouse")
    found = selectors.run_search(Run.objects.all(), "lighthouse")
    assert set(found.values_list("pk", flat=True)) == {old.pk, new.pk}
