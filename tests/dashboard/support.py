"""Shared configuration, data and helpers of the dashboard tests (Django test client)."""

from __future__ import annotations

import html
import re
import uuid
from datetime import timedelta
from typing import Any

from django.test import Client
from django.utils import timezone

from agents_app.config_io import export_toml, parse_toml
from agents_app.models import ConfigRevision
from agents_app.selectors import config_snapshot_get
from agents_app.services import config_replace
from agents_app.users import user_create_or_update
from runs_app.engine.frozen import snapshot_for
from runs_app.models import Approval, Message, Run, RunEvent, Schedule, Steer, ToolCall
from runs_app.services import agent_policy

SECRET_ENV = "CLAWBOARD_TEST_PROVIDER_KEY"
SECRET_VALUE = "sk-live-0123456789abcdefDONOTSHOW"

# alpha reaches beta (same risk profile) and gamma (explicit, independent); gamma always asks
# before shell; loner's risk profile forbids delegation; verifier is not delegable; sleeper is
# disabled. `openai.remote` reads its key from SECRET_ENV, which no page may ever show.
CONFIG_TOML = f"""\
[providers.models.scripted.demo]
model = "demo-1"
script = [ {{ turns = [ {{ say = "done: {{{{prompt}}}}" }} ] }} ]

[providers.models.scripted.spare]
model = "spare-1"

[providers.models.openai.remote]
model = "gpt-test"
uri = "http://127.0.0.1:9/v1"
api_key_env = "{SECRET_ENV}"

[risk_profiles.team]
allowed_commands = ["*"]
excluded_tools = ["model_switch"]

[risk_profiles.team.delegation_policy]
mode = "allow"

[risk_profiles.solo]

[risk_profiles.asker]
always_ask = ["shell"]

[risk_profiles.asker.delegation_policy]
mode = "allow"

[risk_profiles.spare]
level = "readonly"

[runtime_profiles.agentic]
agentic = true

[runtime_profiles.spare]
max_actions_per_hour = 5

[agents.alpha]
model_provider = "scripted.demo"
risk_profile = "team"
runtime_profile = "agentic"
delegates = [{{ agent = "gamma", mode = "independent" }}]
read_memory_from = ["beta"]

[agents.beta]
model_provider = "scripted.demo"
risk_profile = "team"

[agents.gamma]
model_provider = "scripted.demo"
risk_profile = "asker"
delegates = ["beta"]

[agents.loner]
model_provider = "scripted.demo"
risk_profile = "solo"
delegates = ["beta"]

[agents.verifier]
model_provider = "scripted.demo"
risk_profile = "team"
delegable = false

[agents.sleeper]
model_provider = "scripted.demo"
risk_profile = "team"
enabled = false

[agents.remote]
model_provider = "openai.remote"
risk_profile = "team"
enabled = false

[[mcp.servers]]
name = "sample"
command = "/bin/true"

[mcp_bundles.kit]
servers = ["sample"]
"""

ROLES = ("viewer", "operator", "admin")


def load_config() -> None:
    config_replace(snapshot=parse_toml(CONFIG_TOML).snapshot, summary="dashboard test config")


def client_as(role: str | None, username: str | None = None) -> Client:
    client = Client()
    if role is not None:
        user, _, _ = user_create_or_update(username=username or f"{role}-user", role=role)
        client.force_login(user)  # type: ignore[arg-type]  # the stubs expect auth.User itself
    return client


def text_of(response: Any) -> str:
    """The body with HTML entities decoded, so messages compare as the exact strings of SPEC."""
    return html.unescape(response.content.decode())


def error_items(response: Any) -> list[str]:
    """Every `<li>` of every `ul.errorlist` in the page, unescaped and whole."""
    body = response.content.decode()
    items: list[str] = []
    for block in re.findall(r'<ul class="errorlist"[^>]*>(.*?)</ul>', body, flags=re.S):
        # an import error's location (path, line) is shown before it, apart from the message
        items += [
            html.unescape(re.sub(r'^<span class="where">.*?</span>', "", li))
            for li in re.findall(r"<li>(.*?)</li>", block, flags=re.S)
        ]
    return items


def state() -> dict[str, Any]:
    """Everything a refused POST must leave as it was."""
    return {
        "config": export_toml(config_snapshot_get()),
        "revisions": ConfigRevision.objects.count(),
        "runs": sorted(Run.objects.values_list("id", "status", "error")),
        "approvals": sorted(Approval.objects.values_list("id", "status", "reason")),
        "steers": Steer.objects.count(),
        "messages": Message.objects.count(),
        "events": RunEvent.objects.count(),
        "schedules": sorted(Schedule.objects.values_list("id", "name", "enabled")),
    }


def make_run(agent: str = "alpha", status: str = Run.Status.COMPLETED, **fields: Any) -> Run:
    now = timezone.now()
    run_id = fields.pop("id", None) or uuid.uuid4()
    parent: Run | None = fields.get("parent")
    terminal = status in ("completed", "failed", "cancelled", "timed_out", "lost")
    defaults: dict[str, Any] = {
        "id": run_id,
        "root_id": parent.root_id if parent else run_id,
        "agent": agent,
        "status": status,
        "prompt": f"prompt for {agent}",
        "session_key": f"run-{run_id}",
        "started_at": now - timedelta(seconds=5),
        "finished_at": now if terminal else None,
        "output": "all good" if status == "completed" else "",
        "input_tokens": 10,
        "output_tokens": 5,
        "cost_cents": 0.25,
    }
    if "snapshot" not in fields and "snapshot_id" not in fields:
        defaults["snapshot_id"] = snapshot_for(agent_policy(agent)[1])
    defaults.update(fields)
    return Run.objects.create(**defaults)


def make_pending_approval(run: Run, command: str = "echo hi") -> Approval:
    call = ToolCall.objects.create(
        run=run, turn=1, position=0, call_id="call_1_0", name="shell", arguments={"command": command}
    )
    return Approval.objects.create(tool_call=call, run=run)


def bulk_tree(size: int, *, fanout: int = 10, agent: str = "alpha") -> Run:
    """A finished tree of `size` runs: a root whose descendants are filled breadth-first,
    `fanout` children per node, written with one bulk_create."""
    now = timezone.now()
    root_id = uuid.uuid4()
    rows: list[Run] = []
    for i in range(size):
        run_id = root_id if i == 0 else uuid.uuid4()
        parent_id = None if i == 0 else rows[(i - 1) // fanout].pk
        rows.append(
            Run(
                id=run_id,
                parent_id=parent_id,
                root_id=root_id,
                agent=agent,
                kind=Run.Kind.TOP_LEVEL if i == 0 else Run.Kind.SUBAGENT,
                status=Run.Status.COMPLETED,
                session_key=f"{'run' if i == 0 else 'subagent'}-{run_id}",
                prompt=f"part {i}",
                output=f"did part {i}",
                started_at=now - timedelta(seconds=2),
                finished_at=now,
                input_tokens=3,
                output_tokens=2,
                cost_cents=0.01,
                spawn_depth=0 if i == 0 else 1,
            )
        )
    Run.objects.bulk_create(rows, batch_size=500)
    return rows[0]


class Runs:
    """A small set of runs covering every page: a finished tree, a run waiting on an
    approval, a background delegate task still running, and a lost run."""

    def __init__(self) -> None:
        self.root = make_run("alpha", Run.Status.WAITING, finished_at=None)
        self.child = make_run(
            "alpha", Run.Status.COMPLETED, parent=self.root, kind=Run.Kind.SUBAGENT, label="outline"
        )
        self.gated = make_run(
            "gamma",
            Run.Status.AWAITING_APPROVAL,
            parent=self.root,
            kind=Run.Kind.DELEGATE,
            mode=Run.Mode.INDEPENDENT,
        )
        self.approval: Approval = make_pending_approval(self.gated)
        self.task = make_run(
            "beta",
            Run.Status.RUNNING,
            parent=self.root,
            kind=Run.Kind.DELEGATE,
            mode=Run.Mode.BOUNDED,
            execution=Run.Execution.BACKGROUND,
        )
        self.failed = make_run("loner", Run.Status.FAILED, error="Agent 'loner' failed: boom")
        self.lost = make_run("beta", Run.Status.LOST, error="run lost: its worker stopped before it finished")
