"""The `delegate` schema a run offers its model: it names the agents the caller may reach, as
ZeroClaw's does, and requires `agent` and `prompt` (docs/delegation.md#delegate)."""

from __future__ import annotations

from typing import Any

import pytest

from runs_app.engine.calls import Step
from runs_app.engine.frozen import policy_of
from runs_app.engine.step import offered_tools
from runs_app.engine.transcript import Transcript
from runs_app.services import run_start
from tests.runs_app.engine_support import agent, configure, provider

pytestmark = pytest.mark.django_db

SAY = [{"turns": [{"say": "ok"}]}]


def offered_delegate(alias: str) -> dict[str, Any]:
    run = run_start(agent=alias, prompt="go")
    specs, _ = offered_tools(Step(run, policy_of(run), Transcript()))
    (spec,) = [s for s in specs if s.name == "delegate"]
    return spec.parameters


def test_the_delegate_schema_names_the_agents_the_caller_reaches_and_only_them() -> None:
    configure(
        provider("p", SAY)
        + agent("lead", "scripted.p", delegates=["writer", "reviewer"], delegate_same_risk_profile=False)
        + agent("writer", "scripted.p")
        + agent("reviewer", "scripted.p")
        + agent("bystander", "scripted.p")
    )
    parameters = offered_delegate("lead")
    assert parameters["properties"]["agent"] == {
        "type": "string",
        "minLength": 1,
        "description": "Name of the agent to delegate to. Available: reviewer, writer",
        "enum": ["reviewer", "writer"],
    }
    assert parameters["required"] == ["agent", "prompt"]
    assert parameters["properties"]["prompt"] == {"type": "string", "minLength": 1}


def test_a_caller_that_reaches_no_agent_is_told_so_and_offered_no_name() -> None:
    configure(provider("p", SAY) + agent("alone", "scripted.p", delegate_same_risk_profile=False))
    agent_property = offered_delegate("alone")["properties"]["agent"]
    assert agent_property == {
        "type": "string",
        "minLength": 1,
        "description": "Name of the agent to delegate to. Available: (none configured)",
    }
