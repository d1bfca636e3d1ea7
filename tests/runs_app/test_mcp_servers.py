"""Real MCP servers in Clawboard's sandbox: the npm filesystem and everything
servers and PyPI's mcp-server-time over stdio, everything over streamable HTTP, and the suite's
own misbehaving server. Each attack is checked on the file system, the process, the network or
the secret itself, not only on the refusal's text."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agents_app import secrets
from agents_app.snapshot import McpServerSpec, SecretValue
from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec
from runs_app.engine.tools import mcp_tools
from runs_app.engine.tools.mcp_client import MAX_LINE_BYTES, POOL, McpError, Sandbox
from runs_app.models import McpServerState
from tests.runs_app.mcp_support import (
    EVERYTHING_JS,
    filesystem,
    misbehaving,
    raw,
    require_servers,
    time_server,
)

pytestmark = pytest.mark.django_db(transaction=True)

CANARY = "clawboard-canary-3b9e-provider-key"


@pytest.fixture(autouse=True)
def servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    require_servers()
    monkeypatch.setenv("OPENAI_API_KEY", CANARY)  # what a Clawboard process holds
    yield
    POOL.close_all()


def spec(data: dict[str, Any]) -> McpServerSpec:
    return McpServerSpec(
        name=data["name"],
        transport=data.get("transport", "stdio"),
        command=data.get("command", ""),
        args=tuple(data.get("args", ())),
        env=data.get("env", {}),
        url=data.get("url", ""),
        tool_timeout_secs=data.get("tool_timeout_secs"),
    )


def where(workspace: Path, **risk: Any) -> Sandbox:
    runtime = risk.pop("runtime", RuntimeProfileSpec(alias="rt"))
    workspace.mkdir(parents=True, exist_ok=True)
    return Sandbox(RiskProfileSpec(alias="r", **risk), runtime, str(workspace))


def text(result: Any) -> str:
    return mcp_tools.result_text(result)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_the_filesystem_server_reads_the_workspace_but_nothing_outside_it(tmp_path: Path) -> None:
    ws = where(tmp_path / "ws")
    (tmp_path / "ws" / "in.txt").write_text("inside")
    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("outside secret")
    # The server itself is told it may read "/": only the sandbox stands in the way.
    fs = spec(filesystem("filesystem", "/"))
    assert text(POOL.call(fs, ws, "read_text_file", {"path": str(tmp_path / "ws" / "in.txt")})) == "inside"
    refused = POOL.call(fs, ws, "read_text_file", {"path": str(secret)})
    assert refused.is_error and "outside secret" not in text(refused)
    assert "ENOENT" in text(refused) or "no such file" in text(refused).lower()
    host = POOL.call(fs, ws, "read_text_file", {"path": "/etc/hostname"})
    assert host.is_error and secret.read_text() == "outside secret"


def test_a_server_cannot_read_files_outside_the_workspace_whatever_its_code_does(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret 91c2")
    bad = spec(misbehaving("bad"))
    result = POOL.call(bad, where(tmp_path / "ws"), "read", {"path": str(secret)})
    assert text(result).startswith("cannot read: [Errno 2] No such file or directory")
    assert secret.read_text() == "top secret 91c2"
    assert text(POOL.call(bad, where(tmp_path / "ws"), "read", {"path": "/etc/shadow"})).startswith(
        "cannot read: [Errno 2] No such file or directory"
    )


def test_a_server_reaches_no_network_unless_the_profile_allows_it(tmp_path: Path) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(1)
    port = listener.getsockname()[1]
    bad = spec(misbehaving("bad"))
    answer = text(POOL.call(bad, where(tmp_path / "ws"), "connect", {"port": port}))
    assert answer.startswith("no connection")
    with pytest.raises(TimeoutError):
        listener.accept()
    opened = text(POOL.call(bad, where(tmp_path / "ws2", shell_network=True), "connect", {"port": port}))
    assert opened == "connected"
    conn, _ = listener.accept()
    assert conn.recv(100) == b"hello from the sandbox\n"
    conn.close()
    listener.close()


def test_a_server_sees_only_its_declared_env_and_none_of_clawboards_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEAM_TOKEN_SOURCE", "from-a-named-variable")
    env = {
        "DECLARED": SecretValue(token=secrets.encrypt("kept-in-clawboard")),
        "NAMED": SecretValue(env="TEAM_TOKEN_SOURCE"),
    }
    server = McpServerSpec(name="everything", command="node", args=(str(EVERYTHING_JS), "stdio"), env=env)
    shown = json.loads(text(POOL.call(server, where(tmp_path / "ws"), "get-env", {})))
    assert shown["DECLARED"] == "kept-in-clawboard" and shown["NAMED"] == "from-a-named-variable"
    assert set(shown) <= {"DECLARED", "NAMED", "PATH", "HOME", "LANG", "PWD"}
    assert CANARY not in json.dumps(shown)
    # Nor through /proc: the sandbox has its own, holding only its processes.
    environ = POOL.call(spec(misbehaving("bad")), where(tmp_path / "ws"), "read", {"path": "/proc/1/environ"})
    assert CANARY not in text(environ)


def test_a_flooding_server_is_cut_off_and_started_again_for_the_next_call(tmp_path: Path) -> None:
    flood, ws = spec(raw("raw")), where(tmp_path / "ws")
    POOL.tools(flood, ws)
    [pid] = POOL.server_pids()
    with pytest.raises(McpError) as failed:
        POOL.call(flood, ws, "flood", {})
    assert str(failed.value) == f"MCP server 'raw' sent a message longer than {MAX_LINE_BYTES} bytes"
    assert not alive(pid)
    POOL.tools(flood, ws)
    assert POOL.server_pids() and POOL.server_pids() != [pid]


def test_a_hanging_server_fails_its_call_within_the_timeout_and_is_replaced(tmp_path: Path) -> None:
    bad, ws = spec(misbehaving("bad", tool_timeout_secs=2)), where(tmp_path / "ws")
    POOL.call(bad, ws, "echo", {"text": "warm"})
    [pid] = POOL.server_pids()
    began = time.monotonic()
    with pytest.raises(McpError) as failed:
        POOL.call(bad, ws, "hang", {})
    assert time.monotonic() - began < 10
    assert str(failed.value) == (
        "MCP server 'bad' did not answer 'hang' within 2s; the outcome is unknown and the call was not "
        "repeated (the server is restarted for the next call)"
    )
    assert not alive(pid)
    assert text(POOL.call(bad, ws, "echo", {"text": "back"})) == "back"


def test_a_dying_server_and_a_garbage_answer_name_the_server_and_why(tmp_path: Path) -> None:
    bad, ws = spec(misbehaving("bad")), where(tmp_path / "ws")
    with pytest.raises(McpError) as died:
        POOL.call(bad, ws, "die", {})
    assert str(died.value) == "MCP server 'bad' exited with status 3"
    with pytest.raises(McpError) as garbage:
        POOL.call(spec(raw("raw")), ws, "garbage", {})
    assert (
        str(garbage.value) == "MCP server 'raw' answered something that is not JSON-RPC: 'this is not json'"
    )


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    missing = McpServerSpec(name="ghost", command=str(tmp_path / "no-such-server"))
    with pytest.raises(McpError) as failed:
        POOL.tools(missing, where(tmp_path / "ws"))
    assert str(failed.value).startswith("MCP server 'ghost' failed to start: exited with status 127")


def test_a_secret_to_enter_again_stops_the_server_before_it_starts(tmp_path: Path) -> None:
    unread = McpServerSpec(
        name="github", command=str(tmp_path / "never-started"), env={"GITHUB_TOKEN": SecretValue()}
    )
    with pytest.raises(McpError) as failed:
        POOL.tools(unread, where(tmp_path / "ws"))
    assert str(failed.value) == (
        "MCP server 'github' cannot start: env.GITHUB_TOKEN is a secret to enter again "
        "(it could not be imported)"
    )


def test_cpu_is_counted_per_call_not_over_the_servers_life(tmp_path: Path) -> None:
    runtime = RuntimeProfileSpec(alias="rt", mcp_max_cpu_secs=2)
    bad, ws = spec(misbehaving("bad")), where(tmp_path / "ws", runtime=runtime)
    for _ in range(3):  # 3 x 1.2 s is more than 2 s in all, less in each call
        assert text(POOL.call(bad, ws, "burn", {"seconds": 1.2})).startswith("burned")
    with pytest.raises(McpError) as failed:
        POOL.call(bad, ws, "burn", {"seconds": 6})
    assert str(failed.value).startswith("MCP server 'bad' died (signal 24)")  # SIGXCPU


def test_the_time_server_from_pypi_answers_over_stdio(tmp_path: Path) -> None:
    answer = json.loads(
        text(
            POOL.call(
                spec(time_server("time")), where(tmp_path / "ws"), "get_current_time", {"timezone": "UTC"}
            )
        )
    )
    assert answer["timezone"] == "UTC" and answer["datetime"][:4].isdigit()


@contextmanager
def everything_over(mode: str, path: str) -> Iterator[str]:
    """server-everything serving `mode` (streamableHttp or sse) on a free port of 127.0.0.1."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc = subprocess.Popen(
        ["node", str(EVERYTHING_JS), mode],
        env={"PATH": "/usr/bin:/bin", "PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "server-everything did not listen"
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}{path}"
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def http_everything() -> Iterator[str]:
    with everything_over("streamableHttp", "/mcp") as url:
        yield url


def test_a_streamable_http_server_is_reached_at_its_url(tmp_path: Path, http_everything: str) -> None:
    server = spec({"name": "remote", "transport": "http", "url": http_everything})
    tools, _ = POOL.tools(server, where(tmp_path / "ws"))
    assert "echo" in [t.name for t in tools]
    assert (
        text(POOL.call(server, where(tmp_path / "ws"), "echo", {"message": "over http"})) == "Echo: over http"
    )


def test_link_local_and_metadata_addresses_are_refused(tmp_path: Path) -> None:
    for url, why in [
        (
            "http://169.254.169.254/mcp",
            "169.254.169.254 resolves to 169.254.169.254, a link-local or metadata address",
        ),
        ("http://metadata.google.internal/mcp", "metadata.google.internal is a cloud metadata address"),
        ("http://[fe80::1]/mcp", "fe80::1 resolves to fe80::1, a link-local or metadata address"),
    ]:
        with pytest.raises(McpError) as failed:
            POOL.tools(spec({"name": "meta", "transport": "http", "url": url}), where(tmp_path / "ws"))
        assert str(failed.value) == f"MCP server 'meta' cannot be reached: {why}"


def test_the_dashboard_state_records_tools_errors_and_calls(tmp_path: Path) -> None:
    from tests.runs_app.mcp_support import misbehaving as bad_server

    mcp = mcp_tools.RunMcp(
        (spec(bad_server("bad", tool_timeout_secs=2)),),
        False,
        (),
        RiskProfileSpec(alias="r"),
        RuntimeProfileSpec(alias="rt"),
        str(tmp_path / "ws"),
    )
    offer = mcp_tools.offered(mcp)
    failed = mcp_tools.call(mcp, offer, "bad__die", {}, tracker_key="t", limit=6000)
    assert failed.error == "MCP server 'bad' exited with status 3"
    state = McpServerState.objects.get(server="bad")
    assert "echo" in [t["name"] for t in state.tools]
    assert state.last_error == "exited with status 3" and state.last_call_at is not None


def test_a_server_process_is_reused_for_one_profile_and_workspace_and_never_shared_across_them(
    tmp_path: Path,
) -> None:
    bad = spec(misbehaving("bad"))
    POOL.call(bad, where(tmp_path / "a"), "echo", {"text": "1"})
    POOL.call(bad, where(tmp_path / "a"), "echo", {"text": "2"})
    assert len(POOL.server_pids()) == 1
    POOL.call(bad, where(tmp_path / "b"), "echo", {"text": "3"})
    POOL.call(bad, where(tmp_path / "a", shell_network=True), "echo", {"text": "4"})
    assert len(set(POOL.server_pids())) == 3


def test_an_sse_server_is_reached_at_its_url(tmp_path: Path) -> None:
    with everything_over("sse", "/sse") as url:
        server = spec({"name": "legacy", "transport": "sse", "url": url})
        assert (
            text(POOL.call(server, where(tmp_path / "ws"), "echo", {"message": "over sse"}))
            == "Echo: over sse"
        )
