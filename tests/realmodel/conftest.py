"""Real trees against a real model: SmolLM2-135M-Instruct served by llama-cpp-python on
127.0.0.1 (`make model-server` installs it; `make realmodel` runs this suite).

The model is small and often wrong: the tests assert what must hold whatever it says. One
server serves the whole session; its one slot answers the calls in turn, so runs here keep
their trees small (few turns, few children).

Under CI=true a missing model environment fails the session instead of skipping it.

Adding a tool to a real-model agent: `real_agent(..., tools=[...], extra_toml=...)` takes any
tool name its risk profile may allow (an MCP tool `<server>__<tool>` once the agent has an
`mcp_bundles` grant, through `mcp_bundles=[...]` and the `[mcp]` sections in `extra_toml`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from runs_app.models import Run, RunEvent
from tests.realmodel import server as model
from tests.runs_app.engine_support import engine, toml_value  # noqa: F401 - fixture
from tests.runs_app.helpers import configure

IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")

# The provider every real-model agent uses, unless a test names another.
PROVIDER = "openai.smol"

# The calls and runs seen by this session, for bench/real_model.py (CLAWBOARD_REALMODEL_FIGURES).
_FIGURES: dict[str, list[Any]] = {"calls": [], "runs": []}


@pytest.fixture(scope="session")
def model_server() -> Iterator[model.ModelServer]:
    missing = model.missing_reason()
    if missing:
        if IN_CI:
            pytest.fail(f"CI=true and the real model is not installed: {missing}", pytrace=False)
        pytest.skip(missing)
    server = model.start()
    try:
        yield server
    finally:
        server.stop()


def real_provider(alias: str, url: str, **fields: Any) -> str:
    """An `openai`-compatible provider section pointing at a real server. Temperature 0: the
    same prompt gets the same answer, so a failure can be reproduced."""
    values: dict[str, Any] = {
        "model": model.MODEL_ALIAS,
        "uri": url,
        "temperature": 0.0,
        "timeout_secs": model.CALL_TIMEOUT_SECS,
        "max_tokens": 96,
    }
    values.update(fields)
    return f"[providers.models.openai.{alias}]\n" + "".join(
        f"{k} = {toml_value(v)}\n" for k, v in values.items()
    )


def real_agent(
    alias: str,
    *,
    tools: Sequence[str],
    system_prompt: str,
    provider: str = PROVIDER,
    runtime: dict[str, Any] | None = None,
    mcp_bundles: Sequence[str] = (),
    **fields: Any,
) -> str:
    """An agent whose risk profile (`<alias>_risk`) allows exactly `tools`, with a runtime
    profile of its own (`<alias>_rt`) that keeps its runs short unless `runtime` says
    otherwise."""
    limits: dict[str, Any] = {
        "max_tool_iterations": 2,
        "max_children_per_run": 2,
        "subagent_timeout_secs": 600,
    }
    limits.update(runtime or {})
    text = (
        f"[risk_profiles.{alias}_risk]\n"
        f"allowed_tools = {toml_value(list(tools))}\n"
        'allowed_commands = ["*"]\n'
        f"[risk_profiles.{alias}_risk.delegation_policy]\n"
        'mode = "allow"\n'
        f"[runtime_profiles.{alias}_rt]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in limits.items())
    )
    text += (
        f"[agents.{alias}]\n"
        f"model_provider = {toml_value(provider)}\n"
        f"risk_profile = {toml_value(alias + '_risk')}\n"
        f"runtime_profile = {toml_value(alias + '_rt')}\n"
        f"system_prompt = {toml_value(system_prompt)}\n"
    )
    if mcp_bundles:
        text += f"mcp_bundles = {toml_value(list(mcp_bundles))}\n"
    text += "".join(f"{k} = {toml_value(v)}\n" for k, v in fields.items())
    return text


def configure_real(model_server: model.ModelServer, *sections: str, extra_toml: str = "") -> None:
    """Replace the configuration: the real provider `openai.smol`, then `sections`."""
    configure(real_provider("smol", model_server.url) + "".join(sections) + extra_toml)


def tree_of(root: Run) -> list[Run]:
    return list(Run.objects.filter(root_id=root.pk).order_by("created_at")) + [root]


@pytest.fixture(autouse=True)
def _figures(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, before its database is flushed: the latency of every model call (from
    its request to its recorded answer) and the model calls of every run."""
    yield
    if "transactional_db" not in request.fixturenames:
        return
    responses = RunEvent.objects.filter(type="model.response").order_by("id")
    requests = {
        (e.run_id, e.data.get("turn")): e.data.get("requested_at")
        for e in RunEvent.objects.filter(type="model.request")
    }
    from django.utils.dateparse import parse_datetime

    for event in responses:
        asked = parse_datetime(str(requests.get((event.run_id, event.data.get("turn"))) or ""))
        if asked is not None:
            usage = event.data.get("usage") or {}
            _FIGURES["calls"].append(
                {
                    "test": request.node.name,
                    "seconds": (event.at - asked).total_seconds(),
                    "input_tokens": usage.get("input", 0),
                    "output_tokens": usage.get("output", 0),
                    "tool_calls": len(event.data.get("tool_calls") or []),
                }
            )
    for run in Run.objects.all():
        _FIGURES["runs"].append(
            {"test": request.node.name, "kind": run.kind, "turns": run.turns, "status": run.status}
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = os.environ.get("CLAWBOARD_REALMODEL_FIGURES", "")
    if path:
        with open(path, "w") as out:
            json.dump(_FIGURES, out)
