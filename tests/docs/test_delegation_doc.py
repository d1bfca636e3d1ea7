"""docs/delegation.md runs as written: its `console` examples are executed against a real
server (`manage.py serve` in a subprocess, with its own DATA_DIR and the demo configuration),
and every status line, JSON key/value and text line they show must appear in the real output.

In an expected output, `…` stands for any text (an id, a timestamp). A JSON object shown
matches when each key it shows has a matching value; a list matches element by element."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "delegation.md"
ELLIPSIS = "…"
ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=\$\((.*)\)$", re.DOTALL)
STATUS_LINE = re.compile(r"^\d{3}$")
COMMAND_TIMEOUT_SECS = 60


@dataclass
class Example:
    block: int
    command: str
    expected: list[str] = field(default_factory=list)

    @property
    def expected_text(self) -> str:
        return "\n".join(self.expected).strip("\n")


def console_examples(markdown: str) -> list[Example]:
    """Every `$ ` command of the ```console blocks, with the lines shown after it."""
    examples: list[Example] = []
    blocks = re.findall(r"^```console\n(.*?)^```", markdown, re.DOTALL | re.MULTILINE)
    for number, block in enumerate(blocks, 1):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if not line.startswith("$ "):
                assert not examples or examples[-1].block == number, (
                    f"block {number}: output before a command"
                )
                examples[-1].expected.append(line)
                i += 1
                continue
            command = line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command += "\n" + lines[i]
            examples.append(Example(block=number, command=command))
            i += 1
    return examples


def text_matches(expected: str, actual: str) -> bool:
    pattern = ".*?".join(re.escape(part) for part in expected.split(ELLIPSIS))
    return re.fullmatch(pattern, actual, re.DOTALL) is not None


def json_problems(expected: Any, actual: Any, where: str = "$") -> list[str]:
    if expected == ELLIPSIS:
        return []
    if isinstance(expected, str):
        if isinstance(actual, str) and text_matches(expected, actual):
            return []
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{where}: expected an object, got {actual!r}"]
        problems: list[str] = []
        for key, value in expected.items():
            if key not in actual:
                problems.append(f"{where}: missing key {key!r}")
            else:
                problems += json_problems(value, actual[key], f"{where}.{key}")
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{where}: expected {expected!r}, got {actual!r}"]
        return [
            p
            for i, (e, a) in enumerate(zip(expected, actual, strict=True))
            for p in json_problems(e, a, f"{where}[{i}]")
        ]
    if type(expected) is not type(actual) or expected != actual:
        return [f"{where}: expected {expected!r}, got {actual!r}"]
    return []


def output_problems(expected_text: str, actual: str) -> list[str]:
    """What differs between the output a doc shows and the real one."""
    expected_lines = expected_text.splitlines()
    actual_text = actual.strip("\n")
    problems: list[str] = []
    if expected_lines and STATUS_LINE.match(expected_lines[0]):
        first, _, actual_text = actual_text.partition("\n")
        if first != expected_lines[0]:
            problems.append(f"HTTP status: expected {expected_lines[0]}, got {first!r}")
        expected_lines = expected_lines[1:]
    expected_rest = "\n".join(expected_lines).strip("\n")
    if not expected_rest:
        return problems
    try:
        expected_json = json.loads(expected_rest)
    except ValueError:
        if not text_matches(expected_rest, actual_text.strip("\n")):
            problems.append(f"text: expected\n{expected_rest}\ngot\n{actual_text}")
        return problems
    try:
        actual_json = json.loads(actual_text)
    except ValueError:
        return [*problems, f"expected JSON, got\n{actual_text}"]
    return problems + json_problems(expected_json, actual_json)


def test_matchers() -> None:
    assert text_matches("task_id: …\nUse '…'.", "task_id: 12ab\nUse 'x y'.")
    assert not text_matches("a…c", "a-b-d")
    assert (
        json_problems({"id": ELLIPSIS, "ok": True, "s": "x-…"}, {"id": 3, "ok": True, "s": "x-1", "n": 1})
        == []
    )
    assert json_problems({"ok": True}, {"ok": 1})
    assert json_problems([1, 2], [1, 2, 3])
    assert output_problems('201\n{"a": "…"}', '201\n{"a": "z", "b": 1}\n') == []
    assert output_problems("404", "200\n")
    examples = console_examples("x\n```console\n$ curl a \\\n  b\n200\n{}\n$ X=$(jq -r .id out.json)\n```\n")
    assert [(e.command, e.expected) for e in examples] == [
        ("curl a \\\n  b", ["200", "{}"]),
        ("X=$(jq -r .id out.json)", []),
    ]


# -- the server ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def _wait_until_up(base: str, server: subprocess.Popen[str], log: Path) -> None:
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the server stopped:\n{log.read_text()}")
        try:
            with urllib.request.urlopen(f"{base}/api/schema/", timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    pytest.fail(f"the server did not answer within 40 s:\n{log.read_text()}")


@pytest.fixture
def server(tmp_path: Path) -> Iterator[dict[str, str]]:
    """A real Clawboard (embedded mode) on a free port; yields the environment of the examples."""
    data_dir = tmp_path / "server-data"
    data_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    env.update(
        DJANGO_SETTINGS_MODULE="zeroclaw_site.settings",
        DATA_DIR=str(data_dir),
        DATABASE_URL=f"sqlite:///{data_dir / 'clawboard.sqlite3'}",
        CELERY_BROKER_URL="memory://localhost/",
        CHANNEL_LAYER_URL="",
        CELERY_TASK_ALWAYS_EAGER="false",
        ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    _manage(env, "migrate", "--noinput")
    _manage(env, "demo")
    created = _manage(env, "clawboard_user", "admin", "--role", "admin")
    token = re.search(r"^token: (\S+)$", created, re.MULTILINE)
    assert token is not None, created
    port = _free_port()
    log = tmp_path / "serve.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_until_up(base, server, log)
        yield {"TOKEN": token.group(1), "BASE": base}
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=10)


def run_examples(examples: list[Example], variables: dict[str, str], cwd: Path) -> list[str]:
    """Run the examples in order; return what differs from the doc."""
    failures: list[str] = []
    for example in examples:
        env = {**os.environ, **variables}
        assignment = ASSIGNMENT.match(example.command)
        script = assignment.group(2) if assignment else example.command
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", script],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT_SECS,
        )
        where = f"block {example.block}: $ {example.command}"
        if done.returncode != 0:
            failures.append(f"{where}\nexit status {done.returncode}\n{done.stdout}{done.stderr}")
            if assignment:
                break  # later examples need this variable
            continue
        if assignment:
            variables[assignment.group(1)] = done.stdout.strip()
            assert variables[assignment.group(1)], f"{where}: set an empty value"
            continue
        problems = output_problems(example.expected_text, done.stdout)
        if problems:
            failures.append(where + "\n" + "\n".join(problems) + f"\n--- real output:\n{done.stdout}")
    return failures


def test_delegation_doc_examples_run_as_shown(server: dict[str, str], tmp_path: Path) -> None:
    assert shutil.which("jq"), "the examples of docs/delegation.md use jq"
    examples = console_examples(DOC.read_text())
    assert len(examples) >= 30, "docs/delegation.md lost its examples"
    assert all(e.command.startswith(("curl ", "jq ")) or ASSIGNMENT.match(e.command) for e in examples)
    workdir = tmp_path / "work"
    workdir.mkdir()
    failures = run_examples(examples, dict(server), workdir)
    assert not failures, "\n\n".join(failures)
