"""A real model meets a real MCP server: SmolLM2-135M-Instruct is offered the tools of PyPI's
mcp-server-time (started in the shell sandbox) and nothing else. Whatever it asks, its calls
reach the server through the engine, come back marked as untrusted external content, and the
run ends."""

from __future__ import annotations

import pytest

from runs_app.engine.tools.mcp_client import POOL
from runs_app.models import TERMINAL_STATUSES, McpServerState, ToolCall
from runs_app.services import run_start
from tests.realmodel import server as model
from tests.realmodel.conftest import configure_real, real_agent
from tests.runs_app.engine_support import toml_value
from tests.runs_app.helpers import wait_for
from tests.runs_app.mcp_support import TIME_SERVER, require_servers

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

TIME_TOML = (
    "[mcp]\n"
    "enabled = true\n"
    "[[mcp.servers]]\n"
    'name = "time"\n'
    f"command = {toml_value(str(TIME_SERVER))}\n"
    'args = ["--local-timezone", "UTC"]\n'
    "[mcp_bundles.clock]\n"
    'servers = ["time"]\n'
)


def test_a_real_model_calls_a_real_mcp_server_through_the_engine(model_server: model.ModelServer) -> None:
    require_servers()
    configure_real(
        model_server,
        real_agent(
            "clock",
            tools=["time__get_current_time"],
            system_prompt="You tell the time. Always call a function before you answer.",
            mcp_bundles=["clock"],
        ),
        extra_toml=TIME_TOML,
    )
    try:
        run = wait_for(run_start(agent="clock", prompt="What time is it now in UTC?").pk, timeout=600)
    finally:
        POOL.close_all()

    assert run.status in TERMINAL_STATUSES
    assert not run.error.startswith("internal error"), run.error
    calls = list(ToolCall.objects.filter(run=run).order_by("turn", "position"))
    assert calls, "the model was offered the time server's tools and never called one"
    assert all(c.name.startswith("time__") for c in calls), [c.name for c in calls]
    assert all(c.status == "done" and c.finished_at is not None for c in calls)
    # At least one call reached the real server: its answer is the server's, wrapped as
    # untrusted external content; a call with bad arguments is the server's own refusal.
    answered = [c for c in calls if c.result and c.result["success"]]
    assert answered, [c.result for c in calls]
    for call in answered:
        output = (call.result or {})["output"]
        assert output.startswith(
            '<mcp-result server="time" tool="get_current_time" trust="untrusted-external">'
        )
        assert output.endswith("</mcp-result>")
        assert '"timezone": "UTC"' in output or '"timezone":"UTC"' in output, output
    state = McpServerState.objects.get(server="time")
    assert state.last_call_at is not None
    assert any((t["name"] if isinstance(t, dict) else t) == "get_current_time" for t in state.tools)
