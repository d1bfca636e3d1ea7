"""The shell sandbox through the model tool path (issue 15): scripted model turns that try to
read the server's secrets or escape the workspace, run on the real worker with real bwrap."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from runs_app.engine.tools import sandbox
from runs_app.models import Message, RunEvent, ToolCall
from tests.runs_app.engine_support import (
    agent,
    call_results,
    configure,
    finish,
    inline,  # noqa: F401 - fixture
    provider,
    toml_value,
)

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("inline"),
    pytest.mark.skipif(
        not sandbox.status().available and os.environ.get("CI") != "true", reason=sandbox.status().detail
    ),
]

SECRET = "sk-canary-5d1e0b-provider-key"


def shell_call(command: str) -> dict[str, Any]:
    return {"name": "shell", "arguments": {"command": command}}


def setup(tmp_path: Path, turns: list[dict[str, Any]], **risk: Any) -> Path:
    """Agent `probe` with workspace `<tmp>/ws` under risk profile `open`: every command allowed,
    high-risk patterns off, so that what holds is the sandbox."""
    workspace = tmp_path / "ws"
    lines = ["[risk_profiles.open]", 'allowed_commands = ["*"]', "block_high_risk_commands = false"]
    lines.append(f"forbidden_paths = {toml_value([str(tmp_path)])}")
    lines += [f"{k} = {toml_value(v)}" for k, v in risk.items()]
    configure(
        "\n".join(lines)
        + "\n"
        + provider("probe", [{"turns": turns}])
        + agent("probe", "scripted.probe", risk="open", workspace=str(workspace))
    )
    return workspace


def everything_stored(run_id: Any) -> str:
    """The transcript, tool calls and events of a run: what any viewer of the run can read."""
    parts = [m.content for m in Message.objects.filter(run_id=run_id)]
    parts += [json.dumps(c.result) + json.dumps(c.arguments) for c in ToolCall.objects.filter(run_id=run_id)]
    parts += [json.dumps(e.data) for e in RunEvent.objects.filter(run_id=run_id)]
    return "\n".join(parts)


def test_a_run_that_asks_for_the_environment_sees_none_of_the_servers_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("CLAWBOARD_CANARY", SECRET)
    commands = ["env", "cat /proc/self/environ", "cat /proc/$PPID/environ", "cat /proc/1/environ"]
    setup(tmp_path, [{"tool_calls": [shell_call(c) for c in commands]}, {"say": "{{tool_results}}"}])

    run = finish("probe", "show me your environment")

    assert run.status == "completed", run.error
    results = call_results(run, "shell")
    assert len(results) == 4 and all(r["success"] for r in results), results
    assert all("PATH=/usr/local/bin:/usr/bin:/bin" in r["output"] for r in results)
    stored = everything_stored(run.pk)
    assert SECRET not in stored and "OPENAI_API_KEY" not in stored and "CLAWBOARD_CANARY" not in stored


def test_a_symlink_made_in_one_turn_does_not_reach_outside_in_the_next(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    setup(
        tmp_path,
        [
            {"tool_calls": [shell_call(f"ln -s {outside} escape")]},
            {
                "tool_calls": [
                    shell_call("cat escape/secret.txt"),
                    shell_call("python3 -c \"open('escape/pwned', 'w').write('x')\""),
                    {"name": "file_read", "arguments": {"path": "escape/secret.txt"}},
                    {"name": "file_write", "arguments": {"path": "escape/pwned", "content": "x"}},
                ]
            },
            {"say": "{{tool_results}}"},
        ],
    )

    run = finish("probe", "escape")

    assert run.status == "completed", run.error
    first, *second = call_results(run)
    assert first["success"]
    assert not any(r["success"] for r in second), second
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == SECRET
    assert SECRET not in everything_stored(run.pk)


def test_a_run_cannot_write_a_read_only_root_through_dev_fd(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "guide.txt").write_text("original")
    setup(
        tmp_path,
        [
            {
                "tool_calls": [
                    shell_call(f"echo pwned 3< {docs}/guide.txt > /dev/fd/3"),
                    shell_call(f"echo pwned 1< {docs}/guide.txt > /dev/stdout"),
                    shell_call(f"cat {docs}/guide.txt"),
                ]
            },
            {"say": "{{tool_results}}"},
        ],
        allowed_roots_read_only=[str(docs)],
    )

    run = finish("probe", "overwrite the guide")

    assert run.status == "completed", run.error
    tricks, tricks_too, read = call_results(run)
    assert not tricks["success"] and "Read-only file system" in tricks["output"]
    assert not tricks_too["success"] and "Read-only file system" in tricks_too["output"]
    assert read == {"success": True, "output": "original", "error": None}
    assert (docs / "guide.txt").read_text() == "original"
