from __future__ import annotations

import pytest

from runs_app.models import Run
from runs_app.services import run_start
from tests.runs_app.helpers import configure, wait_for

COORD = """
[providers.models.scripted.coord]
model = "coord-1"
script = [
  { match = "^part:", turns = [ { say = "did {{prompt}}" } ] },
  { turns = [
      { tool_calls = [ { name = "spawn_subagent", arguments = { prompt = "part: outline" } } ] },
      { say = "summary: {{tool_results}}" },
  ] },
]
[agents.coordinator]
model_provider = "scripted.coord"
risk_profile = "team"
"""


@pytest.mark.django_db(transaction=True)
def test_sync_spawn_returns_the_child_text_to_the_parent(worker: object) -> None:
    configure(COORD)
    run = run_start(agent="coordinator", prompt="plan the release")
    run = wait_for(run.pk)
    assert run.status == "completed", run.error
    assert run.output == "summary: did part: outline"
    child = Run.objects.get(parent=run)
    assert child.kind == "subagent"
    assert child.session_key == f"subagent-{child.pk}"
    assert child.output == "did part: outline"
