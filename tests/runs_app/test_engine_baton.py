"""One worker thread steps runs at a time (runs_app/engine/baton.py); a thread waiting on a
model or a tool lets the others step."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import transaction

from runs_app.engine import baton, loop
from runs_app.models import Run
from tests.runs_app.engine_support import (
    agent,
    configure,
    configure_turn_of_twenty,
    engine,  # noqa: F401 - fixture
    finish,
    provider,
    start,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]


def test_worker_threads_never_step_runs_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    configure_turn_of_twenty()
    lock = threading.Lock()
    stepping: set[str] = set()
    most = [0]
    threads: set[str] = set()
    real = loop.Stepper.step

    def watched(self: Any) -> bool:
        me = threading.current_thread().name
        with lock:
            stepping.add(me)
            threads.add(me)
            most[0] = max(most[0], len(stepping))
        try:
            time.sleep(0.001)  # a step long enough for another thread to overlap, if it could
            return real(self)
        finally:
            with lock:
                stepping.discard(me)

    monkeypatch.setattr(loop.Stepper, "step", watched)
    run = finish("boss", "go")
    assert run.status == "completed", run.error
    assert Run.objects.filter(parent=run, status="completed").count() == 20
    assert len(threads) == 2  # both worker threads took part
    assert most[0] == 1


def test_a_run_waiting_on_its_model_lets_the_others_step() -> None:
    configure(
        provider(
            "boss",
            [
                {"match": "^slow", "turns": [{"sleep_ms": 3000}, {"say": "slow done"}]},
                {"turns": [{"say": "quick done"}]},
            ],
        )
        + agent("boss", "scripted.boss")
    )
    slow = start("boss", "slow one")
    quick = wait_for(start("boss", "quick one").pk, timeout=2.5)
    assert quick.status == "completed" and quick.output == "quick done"
    assert Run.objects.get(pk=slow.pk).status == "running"  # still in its model call
    assert wait_for(slow.pk).output == "slow done"


def test_the_baton_is_kept_inside_a_transaction() -> None:
    with baton.held():
        assert baton.holding()
        with transaction.atomic(), baton.released():
            assert baton.holding()  # a thread in a transaction never waits for the baton
        with baton.released():
            assert not baton.holding()
        assert baton.holding()
    assert not baton.holding()
