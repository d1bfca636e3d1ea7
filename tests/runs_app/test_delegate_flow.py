from __future__ import annotations

import json

import pytest
from django.db import transaction

from runs_app.models import Run
from runs_app.services import run_start
from tests.runs_app.helpers import configure, wait_for

EXAMPLE = """
[providers.models.scripted.coord]
model = "coord-1"
script = [
  { match = "^part:", turns = [ { say = "did {{prompt}}" } ] },
  { turns = [
      { tool_calls = [ { name = "spawn_subagent", arguments = { prompt = "part: outline" } } ] },
      { tool_calls = [ { name = "delegate", arguments = { agent = "reviewer", prompt = "review the outline" } } ] },
      { say = "summary: {{tool_results}}" },
  ] },
]
[providers.models.scripted.review]
model = "review-1"
script = [ { turns = [ { say = "looks fine: {{prompt}}" } ] } ]
[agents.coordinator]
model_provider = "scripted.coord"
risk_profile = "team"
[agents.reviewer]
model_provider = "scripted.review"
risk_profile = "team"
"""


@pytest.mark.django_db(transaction=True)
def test_the_coordinator_example_spawns_delegates_and_sums_up(worker: object) -> None:
    configure(EXAMPLE)
    run = wait_for(run_start(agent="coordinator", prompt="plan the release").pk)
    assert run.status == "completed", run.error
    assert run.output == "summary: [Agent 'reviewer' (scripted/review-1)]\nlooks fine: review the outline"
    kinds = {(c.kind, c.agent, c.mode, c.output) for c in Run.objects.filter(parent=run)}
    assert kinds == {
        ("subagent", "coordinator", "", "did part: outline"),
        ("delegate", "reviewer", "bounded", "looks fine: review the outline"),
    }


PARALLEL = """
[providers.models.scripted.boss]
model = "boss-1"
script = [ { turns = [
  { tool_calls = [ { name = "delegate", arguments = { parallel = ["a", "b"], prompt = "go" } } ] },
  { say = "{{tool_results}}" },
] } ]
[providers.models.scripted.worker]
model = "w-1"
script = [ { turns = [ { say = "{{agent}} did {{prompt}}" } ] } ]
[agents.boss]
model_provider = "scripted.boss"
risk_profile = "team"
[agents.a]
model_provider = "scripted.worker"
risk_profile = "team"
[agents.b]
model_provider = "scripted.worker"
risk_profile = "team"
"""


@pytest.mark.django_db(transaction=True)
def test_parallel_delegation_gives_blocks_in_input_order(worker: object) -> None:
    configure(PARALLEL)
    run = wait_for(run_start(agent="boss", prompt="start").pk)
    assert run.status == "completed", run.error
    assert run.output == (
        "[Parallel delegation: 2 agents]\n\n"
        "--- a (success=true) ---\n[Agent 'a' (scripted/w-1)]\na did go\n\n"
        "--- b (success=true) ---\n[Agent 'b' (scripted/w-1)]\nb did go"
    )


BACKGROUND = """
[providers.models.scripted.boss]
model = "boss-1"
script = [ { turns = [
  { tool_calls = [ { name = "delegate", arguments = { agent = "a", prompt = "slow job", background = true } } ] },
  { say = "started: {{tool_results}}" },
] } ]
[providers.models.scripted.worker]
model = "w-1"
script = [ { turns = [ { sleep_ms = 300 }, { say = "{{agent}} finished {{prompt}}" } ] } ]
[agents.boss]
model_provider = "scripted.boss"
risk_profile = "team"
[agents.a]
model_provider = "scripted.worker"
risk_profile = "team"
"""


@pytest.mark.django_db(transaction=True)
def test_background_delegate_mirrors_its_result_to_a_json_file(worker: object) -> None:
    configure(BACKGROUND)
    run = wait_for(run_start(agent="boss", prompt="start").pk)
    assert run.status == "completed", run.error
    child = Run.objects.get(parent=run)
    assert run.output == (
        "started: Background task started for agent 'a'.\n"
        f"task_id: {child.pk}\n"
        f"Use action='check_result' with task_id='{child.pk}' to retrieve the result."
    )
    child = wait_for(child.pk)
    import time
    from pathlib import Path

    path = Path(run.workspace) / "delegate_results" / f"{child.pk}.json"
    for _ in range(100):
        if path.exists() and json.loads(path.read_text())["status"] == "completed":
            break
        time.sleep(0.05)
    data = json.loads(path.read_text())
    assert data["status"] == "completed"
    assert data["output"] == "[Agent 'a' (scripted/w-1)]\na finished slow job"
    assert set(data) == {"task_id", "agent", "status", "output", "error", "started_at", "finished_at"}


@pytest.mark.django_db(transaction=True)
def test_the_mirror_is_final_before_the_end_of_the_task_is_published(worker: object) -> None:
    # Whoever the terminal event wakes (results/await, a REST wait) reads a final file: the
    # mirror is written by an earlier commit hook than the one that publishes the event.
    import threading
    from pathlib import Path

    from runs_app import events

    seen: list[str] = []
    heard = threading.Event()

    def listener(event: dict[str, object]) -> None:
        if event["type"] == "run.completed":
            run = Run.objects.get(pk=str(event["run_id"]))
            if run.kind == Run.Kind.DELEGATE:
                path = Path(run.results_dir) / f"{run.pk}.json"
                seen.append(json.loads(path.read_text())["status"] if path.exists() else "no file")
                heard.set()

    configure(BACKGROUND)
    with transaction.atomic():  # subscribed to the tree before its first event is published
        root = run_start(agent="boss", prompt="start")
        events.subscribe(root.pk, listener)
    try:
        run = wait_for(root.pk)
        child = wait_for(Run.objects.get(parent=run).pk)
        assert child.status == "completed"
        # the event is published after the commit that wait_for may have read already
        assert heard.wait(10), "the task's run.completed was never published"
    finally:
        events.unsubscribe(root.pk, listener)
    assert seen == ["completed"]
