"""The reaper acts on what it read: a run it saw stale, which another reaper queued again and a
worker claimed before this reaper's move, is left to the worker that holds it now."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from runs_app import supervision
from runs_app.models import Run, RunEvent

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_run_claimed_again_after_the_reaper_read_it_is_not_queued_a_second_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    long_ago = timezone.now() - timedelta(minutes=5)
    run = Run.objects.create(
        agent="main", status="running", owner="gone:1:dead", heartbeat_at=long_ago, model_call_at=long_ago
    )
    real_tree_tx = supervision.events.tree_tx

    def claimed_meanwhile(root_id: Any, **kwargs: Any) -> Any:
        # Between the reaper's read and its move: queued again elsewhere, then claimed.
        Run.objects.filter(pk=run.pk).update(
            owner="alive:2:w", heartbeat_at=timezone.now(), model_call_at=timezone.now()
        )
        return real_tree_tx(root_id, **kwargs)

    monkeypatch.setattr(supervision.events, "tree_tx", claimed_meanwhile)

    assert supervision.reap_once()["recalled"] == 0

    run.refresh_from_db()
    assert (run.status, run.owner) == ("running", "alive:2:w")
    assert not RunEvent.objects.filter(run=run, type="run.queued").exists()
