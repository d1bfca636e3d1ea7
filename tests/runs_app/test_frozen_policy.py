"""A run's frozen snapshot (runs_app/engine/frozen.py): its policy and provider chain, scripts
included, stored once by content and shared by a parent and its subagents; a configuration
change made later never reaches a run already admitted."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs_app.engine.frozen import FrozenPolicy, policy_of, snapshot_for
from runs_app.models import PolicySnapshot, Run
from runs_app.services import run_start
from tests.runs_app.engine_support import (
    agent,
    configure,
    engine,  # noqa: F401 - fixture
    finish,
    provider,
    wait_for,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

SPAWN = {"name": "spawn_subagent", "arguments": {"prompt": "sub: x"}}


def configure_boss(say: str) -> None:
    script: list[dict[str, Any]] = [
        {"match": "^sub:", "turns": [{"say": f"sub {say}"}]},
        {"turns": [{"tool_calls": [SPAWN] * 3}, {"say": say}]},
    ]
    configure(provider("boss", script) + agent("boss", "scripted.boss"))


def test_a_policy_round_trips_through_its_snapshot() -> None:
    configure_boss("hi")
    run = finish("boss", "go")
    policy = policy_of(run)
    assert FrozenPolicy.from_json(policy.to_json()) == policy
    assert snapshot_for(policy) == run.snapshot_id  # the same content, the same row


def test_subagents_share_their_parents_snapshot_and_its_script_is_stored_once() -> None:
    configure_boss("hi")
    run = finish("boss", "go")
    assert run.output == "hi"
    children = list(Run.objects.filter(parent=run))
    assert len(children) == 3 and {c.snapshot_id for c in children} == {run.snapshot_id}
    assert PolicySnapshot.objects.count() == 1
    script = PolicySnapshot.objects.get().data["chain"]["scripted.boss"]["script"]
    assert script[1]["turns"][1] == {"say": "hi"}


def test_a_run_keeps_the_script_it_was_admitted_with() -> None:
    configure(
        provider("slow", [{"turns": [{"sleep_ms": 400}, {"say": "old script"}]}])
        + agent("slow", "scripted.slow")
    )
    run = run_start(agent="slow", prompt="go")
    configure(provider("slow", [{"turns": [{"say": "new script"}]}]) + agent("slow", "scripted.slow"))
    assert wait_for(run.pk).output == "old script"
    assert finish("slow", "again").output == "new script"
    assert PolicySnapshot.objects.count() == 2


def test_later_runs_of_an_agent_reuse_its_stored_snapshot_until_the_configuration_changes() -> None:
    configure_boss("hi")
    first = finish("boss", "one")
    with CaptureQueriesContext(connection) as queries:
        second = run_start(agent="boss", prompt="two")
    assert second.snapshot_id == first.snapshot_id
    assert not [q["sql"] for q in queries.captured_queries if "runs_app_policysnapshot" in q["sql"]]
    wait_for(second.pk)
    configure_boss("changed")
    third = finish("boss", "three")
    assert third.output == "changed" and third.snapshot_id != first.snapshot_id
    assert PolicySnapshot.objects.filter(digest=third.snapshot_id).exists()
