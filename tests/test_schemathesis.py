"""Hostile input: Schemathesis against `/api/schema/` of a live server (the issue's hardening item).

`manage.py serve` (daphne, in-process worker) runs on a free port with a DATA_DIR of its own,
the demo configuration and an admin token. Real objects (runs of several statuses, a pending
approval, a background delegate task, a schedule, config revisions) are made first, and the
fuzzer draws path parameters and some body fields from them (80 % of the time; the rest is
generated), so the operations reach their logic instead of answering 404.

The Schemathesis CLI then runs every operation of the schema, every method, in its coverage,
fuzzing and stateful phases (the schema's links: a created run feeds every `/runs/{run_id}/`
operation, a created schedule or configuration entry its detail operations), positive and
negative data, with the checks `not_a_server_error`, `response_schema_conformance`,
`status_code_conformance` and `content_type_conformance`. Two passes: everything but the
operations that replace or delete configuration first, those alone second (they would
otherwise empty the configuration the other operations need).

It fails on any 5xx, any response that does not match the schema, any network error, or fewer
than 1,000 generated cases. Tunables: CLAWBOARD_FUZZ_SEED (default fixed, so a run is
repeatable), CLAWBOARD_FUZZ_EXAMPLES (cases per operation and phase)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

BASE_DIR = Path(__file__).resolve().parent.parent
MIN_CASES = 1000
SEED = os.environ.get("CLAWBOARD_FUZZ_SEED", "20261130")
EXAMPLES = int(os.environ.get("CLAWBOARD_FUZZ_EXAMPLES", "25"))
CHECKS = "not_a_server_error,response_schema_conformance,status_code_conformance,content_type_conformance"
# Replacing or deleting configuration (and schedules): the second pass, on its own.
DESTRUCTIVE = [
    ("POST", "/api/v1/config/"),
    ("POST", "/api/v1/config/revisions/{id}/restore/"),
    *[
        (method, f"/api/v1/{kind}/{{key}}/")
        for kind in ("agents", "risk-profiles", "runtime-profiles", "providers")
        for method in ("PUT", "PATCH", "DELETE")
    ],
    ("DELETE", "/api/v1/schedules/{schedule_id}/"),
]
# Environment of a developer's scale-out setup must not leak into this embedded server.
SCALE_OUT_ENV = ("DATABASE_URL", "CELERY_BROKER_URL", "CHANNEL_LAYER_URL", "CACHE_URL")


@dataclass
class Live:
    url: str
    token: str
    log: Path
    ids: dict[str, list[Any]] = field(default_factory=dict)

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Token {self.token}"}, timeout=60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def manage(*args: str, env: dict[str, str]) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, f"manage.py {' '.join(args)}: {result.stdout}{result.stderr}"
    return result.stdout


def wait_until_up(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"the server exited ({proc.returncode}):\n{log.read_text()[-4000:]}")
        try:
            if httpx.get(f"{url}/api/schema/", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"the server did not answer in 90 s:\n{log.read_text()[-4000:]}")


def poll(check: Any, what: str, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what}: not reached in {timeout} s")


def seed_objects(live: Live, env: dict[str, str]) -> None:
    """Real objects for the fuzzer's path parameters: finished, waiting and lost runs, a
    pending approval, a background delegate task, a schedule, configuration revisions."""
    with live.client() as api:
        finished = api.post("/api/v1/runs/", json={"agent": "coordinator", "prompt": "plan", "wait": 60})
        assert finished.status_code == 201, finished.text
        root = finished.json()
        assert root["status"] == "completed", root
        tree = api.get(f"/api/v1/runs/{root['id']}/tree/").json()
        children = [c["id"] for c in tree.get("children", [])]
        task = api.post(
            f"/api/v1/runs/{root['id']}/delegate/",
            json={"agent": "explorer", "prompt": "background: look", "background": True},
        )
        assert task.status_code == 202, task.text
        task_id = task.json()["run_id"]
        gated = api.post("/api/v1/runs/", json={"agent": "sysadmin", "prompt": "check the disks"})
        assert gated.status_code == 201, gated.text
        approvals = poll(
            lambda: api.get("/api/v1/approvals/", params={"status": "pending"}).json(),
            "a pending approval",
        )
        spare = api.post("/api/v1/runs/", json={"agent": "reviewer", "prompt": "to be lost", "wait": 30})
        assert spare.status_code == 201 and spare.json()["status"] == "completed", spare.text
        schedule = api.post(
            "/api/v1/schedules/",
            json={"name": "nightly", "agent": "reviewer", "prompt": "review", "cron": "0 3 * * *"},
        )
        assert schedule.status_code == 201, schedule.text
        api.patch("/api/v1/agents/verifier/", json={"system_prompt": "Verify, briefly."}).raise_for_status()
        revisions = [r["id"] for r in api.get("/api/v1/config/revisions/").json()]
        config = api.get("/api/v1/config/").json()
    # `lost` is only ever set by the reaper after a worker died; make one for /resume/.
    manage(
        "shell",
        "-c",
        f"from runs_app.models import Run; Run.objects.filter(pk='{spare.json()['id']}').update(status='lost')",
        env=env,
    )
    live.ids = {
        "runs": [root["id"], *children[:3], task_id, gated.json()["id"], spare.json()["id"]],
        "tasks": [task_id],
        "approvals": [a["id"] for a in approvals],
        "schedules": [schedule.json()["id"]],
        "revisions": revisions,
        "agents": sorted(config["agents"]),
        "risk-profiles": sorted(config["risk_profiles"]),
        "runtime-profiles": sorted(config["runtime_profiles"]),
        "providers": sorted(f"{t}.{n}" for t, names in config["providers"]["models"].items() for n in names),
    }


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    data_dir = tmp_path_factory.mktemp("schemathesis-data")
    env = {k: v for k, v in os.environ.items() if k not in SCALE_OUT_ENV}
    # No run rate limit here: the fuzzer starts runs far faster than any person would.
    env.update(DATA_DIR=str(data_dir), CLAWBOARD_RUN_RATE="off", LOG_LEVEL="ERROR", DJANGO_DEBUG="true")
    manage("migrate", "--noinput", env=env)
    manage("demo", env=env)
    out = manage("clawboard_user", "fuzzer", "--role", "admin", env=env)
    token = next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("token:"))
    port = free_port()
    log = data_dir / "server.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "serve", "--host", "127.0.0.1", "--port", str(port)],
            cwd=BASE_DIR,
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        live = Live(url=f"http://127.0.0.1:{port}", token=token, log=log)
        wait_until_up(live.url, proc, log)
        seed_objects(live, env)
        yield live
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)


def toml_value(value: Any) -> str:
    return json.dumps(value)  # a JSON string or number is a TOML one too


def config_file(live: Live, path: Path) -> Path:
    """schemathesis.toml: dictionaries of real ids and names, drawn 80 % of the time."""
    ids = live.ids
    dictionaries = {
        "runs": ids["runs"],
        "tasks": ids["tasks"],
        "approvals": ids["approvals"],
        "schedules": ids["schedules"],
        "revisions": ids["revisions"],
        "agents": ids["agents"],
        "risk-profiles": ids["risk-profiles"],
        "runtime-profiles": ids["runtime-profiles"],
        "providers": ids["providers"],
        "crons": ["0 3 * * *", "*/5 * * * *", "0 0 1 1 *"],
        "waits": [0, 0.5, 2],
        "timeouts": [0, 100, 1000],
    }
    lines = ["[cache]", "enabled = false", ""]
    for name, values in dictionaries.items():
        lines += [f'[dictionaries."{name}"]', f"values = [{', '.join(toml_value(v) for v in values)}]", ""]

    def bind(dictionary: str, probability: float = 0.8) -> str:
        return f'{{ dictionary = "{dictionary}", probability = {probability} }}'

    lines += [
        "[parameters]",
        f'"path.run_id" = {bind("runs")}',
        f'"path.task_id" = {bind("tasks")}',
        f'"path.approval_id" = {bind("approvals")}',
        f'"path.schedule_id" = {bind("schedules")}',
        f'"path.id" = {bind("revisions")}',
        f'"path.alias" = {bind("agents")}',
        f'"body.agent" = {bind("agents", 0.6)}',
        f'"body.caller" = {bind("agents")}',
        f'"body.target" = {bind("agents")}',
        f'"body.cron" = {bind("crons", 0.6)}',
        # Waiting is allowed (`wait` up to 300 s, an event stream's `timeout` up to an hour,
        # await_sessions' `timeout_ms` up to 120 s); most cases need not spend the time on it.
        f'"body.wait" = {bind("waits", 0.9)}',
        f'"query.timeout" = {bind("waits", 0.9)}',
        f'"body.timeout_ms" = {bind("timeouts", 0.9)}',
        "",
    ]
    for kind in ("agents", "risk-profiles", "runtime-profiles", "providers"):
        lines += [
            "[[operations]]",
            f'include-path-regex = "^/api/v1/{kind}/\\\\{{key\\\\}}/$"',
            f'parameters = {{ "path.key" = {bind(kind)} }}',
            "",
        ]
    path.write_text("\n".join(lines))
    return path


def run_schemathesis(
    live: Live, tmp: Path, name: str, selection: list[str], phases: str = "examples,coverage,fuzzing,stateful"
) -> dict[str, Any]:
    report = tmp / f"{name}.json"
    cmd = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config_file(live, tmp / "schemathesis.toml")),
        "--no-color",
        "run",
        f"{live.url}/api/schema/",
        "--header",
        f"Authorization: Token {live.token}",
        "--checks",
        CHECKS,
        "--phases",
        phases,
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        SEED,
        # One worker: CPython 3.11.7's ast.parse is not thread-safe ("AST constructor recursion
        # depth mismatch"), and hypothesis parses lambda sources while schemathesis generates.
        "--workers",
        "1",
        "--request-timeout",
        "120",
        "--generation-database",
        "none",
        "--report",
        "json",
        "--report-json-path",
        str(report),
        *selection,
    ]
    result = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=600, check=False)
    output = result.stdout + result.stderr
    (tmp / f"{name}.txt").write_text(output)
    if not report.exists():
        raise AssertionError(f"schemathesis wrote no report (exit {result.returncode}):\n{output[-6000:]}")
    data: dict[str, Any] = json.loads(report.read_text())
    data["_output"] = output
    return data


def by_operation(selection: list[tuple[str, str]], flag: str) -> list[str]:
    names = "|".join(f"{method} {path}" for method, path in selection)
    regex = "^(" + names.replace("{", "\\{").replace("}", "\\}") + ")$"
    return [flag, regex]


def test_fuzzing_the_live_api_finds_no_server_error_and_no_schema_violation(
    live: Live, tmp_path: Path
) -> None:
    passes = {
        "main": run_schemathesis(live, tmp_path, "main", by_operation(DESTRUCTIVE, "--exclude-name-regex")),
        # No stateful phase: the links start at operations of the first pass.
        "config-changes": run_schemathesis(
            live,
            tmp_path,
            "config-changes",
            by_operation(DESTRUCTIVE, "--include-name-regex"),
            phases="examples,coverage,fuzzing",
        ),
    }
    total = 0
    problems: list[str] = []
    print("\nschemathesis summary")
    for name, data in passes.items():
        cases = data["test_cases"]
        ops = data["operations"]
        total += int(cases["generated"])
        print(
            f"  {name}: {ops['tested']}/{ops['total']} operations, {cases['generated']} cases, "
            f"{cases['unique_failures']} failures, {len(data['errors'])} errors, "
            f"{data['running_time']:.0f} s, phases "
            + ", ".join(f"{k}={v['status']}" for k, v in data["phases"].items())
        )
        if data["failures"] or data["errors"] or data["exit_code"] != 0:
            problems.append(f"--- pass {name} (exit {data['exit_code']}):\n{data['_output'][-12000:]}")
    tested = passes["main"]["operations"]["tested"] + passes["config-changes"]["operations"]["tested"]
    print(f"  total: {tested} operations, {total} cases, seed {SEED}")
    assert not problems, "\n".join(problems)
    assert passes["main"]["operations"]["total"] == tested, "an operation was not tested"
    assert total >= MIN_CASES, f"only {total} cases generated"
    server_errors = [line for line in live.log.read_text().splitlines() if "Internal Server Error" in line]
    assert not server_errors, "\n".join(server_errors[:20])
