"""MCP tools through the model tool path, against real servers installed by `make mcp-servers`:
a scripted model calls `filesystem__read_text_file` of @modelcontextprotocol/server-filesystem
and reads the file's real text, directly, from a subagent and from a bounded delegate; policy
(exclusions, annotations, deferred loading) decides what the model is offered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runs_app.engine.tools.mcp_client import POOL
from runs_app.models import McpServerState, RunEvent, ToolCall
from tests.runs_app.engine_support import (
    agent,
    call_results,
    configure,
    engine,  # noqa: F401 - fixture
    finish,
    provider,
    toml_value,
)
from tests.runs_app.mcp_support import filesystem, grant, misbehaving, require_servers, set_risk

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

READ = "filesystem__read_text_file"


@pytest.fixture(autouse=True)
def servers() -> Any:
    require_servers()
    yield
    POOL.close_all()


def read_call(path: str) -> dict[str, Any]:
    return {"name": READ, "arguments": {"path": path}}


def workspace_with_note(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "note.txt").write_text("the real file text 7f3a\n")
    return workspace


def test_an_agent_reads_a_file_through_the_real_filesystem_server(tmp_path: Path) -> None:
    workspace = workspace_with_note(tmp_path)
    configure(
        provider(
            "fs",
            [
                {
                    "turns": [
                        {"tool_calls": [read_call(str(workspace / "note.txt"))]},
                        {"say": "{{tool_results}}"},
                    ]
                }
            ],
        )
        + agent("reader", "scripted.fs", workspace=str(workspace))
    )
    grant({"reader": ["filesystem"]}, filesystem("filesystem", str(workspace)))
    run = finish("reader", "read the note", timeout=60)
    assert run.status == "completed", run.error
    [result] = call_results(run, READ)
    assert result["success"] is True
    assert result["output"] == (
        '<mcp-result server="filesystem" tool="read_text_file" trust="untrusted-external">\n'
        "the real file text 7f3a\n\n"
        "</mcp-result>"
    )
    assert run.output == result["output"]
    call = ToolCall.objects.get(run=run, name=READ)
    assert call.finished_at is not None and call.finished_at >= call.created_at
    [event] = RunEvent.objects.filter(run=run, type="tool.call")
    assert event.data["server"] == "filesystem"
    state = McpServerState.objects.get(server="filesystem")
    assert "read_text_file" in [t["name"] for t in state.tools]
    assert state.last_call_at is not None


def test_a_subagent_and_a_bounded_delegate_use_the_parents_mcp_tools(tmp_path: Path) -> None:
    workspace = workspace_with_note(tmp_path)
    note = str(workspace / "note.txt")
    configure(
        provider(
            "boss",
            [
                {
                    "match": "^sub:",
                    "turns": [{"tool_calls": [read_call(note)]}, {"say": "sub got {{tool_results}}"}],
                },
                {
                    "turns": [
                        {"tool_calls": [{"name": "spawn_subagent", "arguments": {"prompt": "sub: read it"}}]},
                        {
                            "tool_calls": [
                                {"name": "delegate", "arguments": {"agent": "helper", "prompt": "read it"}}
                            ]
                        },
                        {"say": "done"},
                    ]
                },
            ],
        )
        + provider(
            "helper", [{"turns": [{"tool_calls": [read_call(note)]}, {"say": "helper got {{tool_results}}"}]}]
        )
        + agent("boss", "scripted.boss", workspace=str(workspace))
        + agent("helper", "scripted.helper", runtime="agentic", workspace=str(workspace))
        + "[runtime_profiles.agentic]\nagentic = true\n"
    )
    # Only the caller holds a bundle: the bounded delegate works with the caller's servers.
    grant({"boss": ["filesystem"]}, filesystem("filesystem", str(workspace)))
    run = finish("boss", "go", timeout=90)
    assert run.status == "completed", run.error
    spawned, delegated = call_results(run, "spawn_subagent")[0], call_results(run, "delegate")[0]
    assert "sub got <mcp-result" in spawned["output"] and "the real file text 7f3a" in spawned["output"]
    assert delegated["success"] is True, delegated
    assert (
        "helper got <mcp-result" in delegated["output"] and "the real file text 7f3a" in delegated["output"]
    )


def test_an_independent_delegate_gets_its_own_bundles_not_the_callers(tmp_path: Path) -> None:
    workspace = workspace_with_note(tmp_path)
    note = str(workspace / "note.txt")
    configure(
        provider(
            "boss",
            [
                {
                    "turns": [
                        {
                            "tool_calls": [
                                {"name": "delegate", "arguments": {"agent": "loner", "prompt": "x"}}
                            ]
                        },
                        {"say": "done"},
                    ]
                }
            ],
        )
        + provider(
            "loner", [{"turns": [{"tool_calls": [read_call(note)]}, {"say": "loner: {{tool_results}}"}]}]
        )
        + agent(
            "boss",
            "scripted.boss",
            workspace=str(workspace),
            delegates=[{"agent": "loner", "mode": "independent"}],
        )
        + agent("loner", "scripted.loner", runtime="agentic")
        + "[runtime_profiles.agentic]\nagentic = true\n"
    )
    grant({"boss": ["filesystem"]}, filesystem("filesystem", str(workspace)))
    run = finish("boss", "go", timeout=60)
    [delegated] = call_results(run, "delegate")
    assert f"loner: Error: Tool '{READ}' is not available to this agent" in delegated["output"]


def test_excluded_tools_block_an_mcp_tool_and_a_non_empty_allow_list_admits_the_rest(tmp_path: Path) -> None:
    workspace = workspace_with_note(tmp_path)
    note = str(workspace / "note.txt")
    calls = [read_call(note), {"name": "filesystem__list_directory", "arguments": {"path": str(workspace)}}]
    configure(
        "[risk_profiles.narrow]\n"
        + f"allowed_tools = {toml_value(['file_read'])}\nexcluded_tools = {toml_value([READ])}\n"
        + provider("fs", [{"turns": [{"tool_calls": calls}, {"say": "done"}]}])
        + agent("reader", "scripted.fs", risk="narrow", workspace=str(workspace))
    )
    grant({"reader": ["filesystem"]}, filesystem("filesystem", str(workspace)))
    set_risk("narrow", excluded_tools=[READ])
    run = finish("reader", "go", timeout=60)
    blocked, listed = call_results(run)
    assert blocked == {
        "success": False,
        "output": "",
        "error": f"Tool '{READ}' is not available to this agent",
    }
    assert listed["success"] is True and "[FILE] note.txt" in listed["output"]


def test_a_destructive_annotated_tool_waits_for_approval_unless_auto_approved(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    wipe = {"name": "bad__wipe", "arguments": {}}
    echo = {"name": "bad__echo", "arguments": {"text": "plain"}}
    configure(
        provider("p", [{"turns": [{"tool_calls": [echo, wipe]}, {"say": "done"}]}])
        + agent("asker", "scripted.p", workspace=str(workspace))
        + "[risk_profiles.trusting]\n"
        + agent("trusting", "scripted.p", risk="trusting", workspace=str(workspace))
    )
    grant({"asker": ["bad"], "trusting": ["bad"]}, misbehaving("bad"))
    set_risk("trusting", auto_approve=["bad__wipe", "file_read", "memory_recall"])
    from tests.runs_app.engine_support import start, wait_for

    held = wait_for(start("asker", "go").pk, statuses={"awaiting_approval"}, timeout=60)
    pending = ToolCall.objects.get(run=held, name="bad__wipe")
    assert pending.status == "pending" and pending.wait_kind == "approval"
    echoed = ToolCall.objects.get(run=held, name="bad__echo")
    assert echoed.status == "done" and "plain" in (echoed.result or {})["output"]
    from runs_app.services import run_cancel

    run_cancel(run=held, check_owner=False)
    trusted = finish("trusting", "go", timeout=60)
    assert trusted.status == "completed", trusted.error
    assert call_results(trusted, "bad__wipe")[0]["output"].endswith("wiped\n</mcp-result>")


def test_deferred_loading_offers_only_tool_search_until_a_tool_is_selected(tmp_path: Path) -> None:
    workspace = workspace_with_note(tmp_path)
    note = str(workspace / "note.txt")
    turns = [
        {"tool_calls": [read_call(note)]},
        {"tool_calls": [{"name": "tool_search", "arguments": {"query": f"select:{READ}"}}]},
        {"tool_calls": [read_call(note)]},
        {"say": "done"},
    ]
    configure(
        "[risk_profiles.deny_write]\n"
        + provider("fs", [{"turns": turns}])
        + agent("reader", "scripted.fs", risk="deny_write", workspace=str(workspace))
    )
    grant({"reader": ["filesystem"]}, filesystem("filesystem", str(workspace)), deferred=True)
    set_risk("deny_write", excluded_tools=["filesystem__write_file"])
    run = finish("reader", "go", timeout=60)
    assert run.status == "completed", run.error
    before, search, after = call_results(run)
    assert before["error"] == f"Tool '{READ}' is not available to this agent"
    assert search["success"] is True and f'"name": "{READ}"' in search["output"]
    assert "the real file text 7f3a" in after["output"]
    found = call_results_of_search(run, "write file")
    assert "filesystem__write_file" not in found


def call_results_of_search(run: Any, query: str) -> str:
    from runs_app.engine.frozen import policy_of
    from runs_app.engine.tools import mcp_tools

    mcp = mcp_tools.run_mcp(policy_of(run), run.workspace)
    return mcp_tools.tool_search(mcp_tools.offered(mcp), {"query": query, "max_results": 50}).output


def test_an_mcp_tool_named_like_a_built_in_never_replaces_it(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    calls = [
        {"name": "shell", "arguments": {"command": "echo built-in"}},
        {"name": "bad__shell", "arguments": {"command": "echo built-in"}},
    ]
    configure(
        provider("p", [{"turns": [{"tool_calls": calls}, {"say": "done"}]}])
        + agent("a", "scripted.p", workspace=str(workspace))
    )
    grant({"a": ["bad"]}, misbehaving("bad"))
    run = finish("a", "go", timeout=60)
    builtin, prefixed = call_results(run)
    assert builtin == {"success": True, "output": "built-in\n", "error": None}
    assert prefixed["output"] == (
        '<mcp-result server="bad" tool="shell" trust="untrusted-external">\n'
        "misbehaving shell would run: echo built-in\n"
        "</mcp-result>"
    )


def test_results_are_cut_to_max_tool_result_chars_inside_the_untrusted_marking(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    calls = [{"name": "bad__long_text", "arguments": {"size": 5000}}]
    configure(
        provider("p", [{"turns": [{"tool_calls": calls}, {"say": "done"}]}])
        + agent("a", "scripted.p", runtime="small", workspace=str(workspace))
        + "[runtime_profiles.small]\nmax_tool_result_chars = 100\n"
    )
    grant({"a": ["bad"]}, misbehaving("bad"))
    run = finish("a", "go", timeout=60)
    [result] = call_results(run)
    assert result["output"] == (
        '<mcp-result server="bad" tool="long_text" trust="untrusted-external">\n'
        + "y" * 100
        + "\n[... truncated: 4900 more characters]\n</mcp-result>"
    )


def test_a_read_only_profile_calls_only_tools_annotated_read_only(tmp_path: Path) -> None:
    workspace = workspace_with_note(tmp_path)
    calls = [
        read_call(str(workspace / "note.txt")),
        {"name": "filesystem__create_directory", "arguments": {"path": str(workspace / "d")}},
    ]
    configure(
        '[risk_profiles.reader]\nlevel = "readonly"\n'
        + provider("p", [{"turns": [{"tool_calls": calls}, {"say": "done"}]}])
        + agent("a", "scripted.p", risk="reader", workspace=str(workspace))
    )
    grant({"a": ["filesystem"]}, filesystem("filesystem", str(workspace)))
    run = finish("a", "go", timeout=60)
    read, made = call_results(run)
    assert "the real file text 7f3a" in read["output"]
    assert made["error"] == "Security policy: read-only mode, cannot perform 'filesystem__create_directory'"
    assert not (workspace / "d").exists()


def test_a_server_that_dies_gives_the_model_an_error_and_the_run_goes_on(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    calls = [{"name": "bad__die", "arguments": {}}]
    configure(
        provider("p", [{"turns": [{"tool_calls": calls}, {"say": "after: {{tool_results}}"}]}])
        + agent("a", "scripted.p", workspace=str(workspace))
    )
    grant({"a": ["bad"]}, misbehaving("bad"))
    run = finish("a", "go", timeout=60)
    assert run.status == "completed"
    assert run.output == "after: Error: MCP server 'bad' exited with status 3"


def test_the_run_page_shows_each_mcp_call_and_the_mcp_tools_granted_gated_and_blocked(tmp_path: Path) -> None:
    from django.test import Client

    from tests.runs_app.engine_support import make_user

    workspace = workspace_with_note(tmp_path)
    configure(
        "[risk_profiles.narrow]\n"
        + provider(
            "fs", [{"turns": [{"tool_calls": [read_call(str(workspace / "missing.txt"))]}, {"say": "done"}]}]
        )
        + agent("reader", "scripted.fs", risk="narrow", workspace=str(workspace))
    )
    grant({"reader": ["filesystem"]}, filesystem("filesystem", str(workspace)))
    set_risk("narrow", excluded_tools=["filesystem__write_file"], always_ask=["filesystem__move_file"])
    run = finish("reader", "go", timeout=60)
    client = Client()
    client.force_login(make_user("watcher", "viewer"))
    page = client.get(f"/runs/{run.pk}/detail/").content.decode()
    call = ToolCall.objects.get(run=run, name=READ)
    assert f'<span class="badge mcp" id="tool-call-{call.pk}-server">MCP server filesystem</span>' in page
    assert "missing.txt" in page and "ENOENT" in page  # the arguments, and the server's error
    rows = {
        "filesystem__read_text_file": "admitted</td><td>no allow-list",
        "filesystem__write_file": "blocked</td><td>listed in excluded_tools",
        "filesystem__move_file": "gated</td><td>listed in always_ask",
    }
    for name, row in rows.items():
        assert f"<td>{name}</td><td>filesystem</td><td>{row}</td>" in page


def test_a_configuration_change_never_alters_the_mcp_servers_of_a_run_in_flight(tmp_path: Path) -> None:
    from agents_app.models import McpBundle, McpServer
    from agents_app.selectors import config_snapshot_forget
    from runs_app.models import Approval
    from runs_app.services import approval_decide
    from tests.runs_app.engine_support import make_user, start, wait_for

    workspace = tmp_path / "ws"
    calls = [{"name": "bad__echo", "arguments": {"text": "still here"}}]
    configure(
        "[risk_profiles.careful]\n"
        + provider("p", [{"turns": [{"tool_calls": calls}, {"say": "{{tool_results}}"}]}])
        + agent("a", "scripted.p", risk="careful", workspace=str(workspace))
    )
    grant({"a": ["bad"]}, misbehaving("bad"))
    set_risk("careful", always_ask=["bad__echo"])
    held = wait_for(start("a", "go").pk, statuses={"awaiting_approval"}, timeout=60)
    McpServer.objects.all().delete()
    McpBundle.objects.all().delete()
    config_snapshot_forget()
    approval_decide(approval=Approval.objects.get(run=held), user=make_user(), approve=True)
    run = wait_for(held.pk, timeout=60)
    assert run.status == "completed", run.error
    assert "still here" in run.output and run.output.startswith('<mcp-result server="bad"')


def test_a_server_that_cannot_start_gives_its_calls_an_error_naming_it_and_why(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    calls = [{"name": "ghost__anything", "arguments": {}}]
    configure(
        provider("p", [{"turns": [{"tool_calls": calls}, {"say": "after: {{tool_results}}"}]}])
        + agent("a", "scripted.p", workspace=str(workspace))
    )
    grant({"a": ["ghost"]}, {"name": "ghost", "command": str(tmp_path / "no-such-server")})
    run = finish("a", "go", timeout=90)
    assert run.status == "completed"
    assert run.output.startswith("after: Error: MCP server 'ghost' failed to start: exited with status 127")
    assert McpServerState.objects.get(server="ghost").last_error.startswith(
        "failed to start: exited with status 127"
    )
