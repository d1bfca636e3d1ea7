"""The tree both trace suites export: three levels, a delegate, a background subagent, an
approval and a failed tool call, all on the real engine with scripted models.

    boss (top level)                          turn 1: delegate helper + background spawn
    ├── execute_tool delegate ── helper (delegate, level 2)
    │                              └── execute_tool spawn_subagent ── helper (subagent, level 3)
    │                                                                  └── execute_tool file_read ✗
    ├── execute_tool spawn_subagent ┄┄ boss (background subagent; linked to this call)
    └── execute_tool memory_recall (approved by an operator)        turn 2
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from runs_app.models import Approval, Run
from runs_app.services import approval_decide, run_start
from tests.runs_app.engine_support import agent, configure, make_user, provider, wait_for, wait_until

BOSS: list[dict[str, Any]] = [
    {"match": "^bg:", "turns": [{"say": "noted"}]},
    {
        "turns": [
            {
                "tool_calls": [
                    {"name": "delegate", "arguments": {"agent": "helper", "prompt": "task: check"}},
                    {"name": "spawn_subagent", "arguments": {"prompt": "bg: note", "background": True}},
                ]
            },
            {"tool_calls": [{"name": "memory_recall", "arguments": {"query": "q"}}]},
            {"say": "done"},
        ]
    },
]
HELPER: list[dict[str, Any]] = [
    {
        "match": "^leaf:",
        "turns": [
            {"tool_calls": [{"name": "file_read", "arguments": {"path": "missing.txt"}}]},
            {"say": "leaf done"},
        ],
    },
    {
        "turns": [
            {"tool_calls": [{"name": "spawn_subagent", "arguments": {"prompt": "leaf: x"}}]},
            {"say": "helped"},
        ]
    },
]


@dataclass
class Made:
    boss: Run
    helper: Run
    leaf: Run
    background: Run


def make_tree() -> Made:
    configure(
        provider("boss", BOSS, model="boss-model-1")
        + provider("helper", HELPER, model="helper-model-1")
        + '[risk_profiles.gated]\nallowed_commands = ["*"]\nalways_ask = ["memory_recall"]\n'
        + '[risk_profiles.gated.delegation_policy]\nmode = "allow"\n'
        + agent("boss", "scripted.boss", risk="gated", delegates=["helper"])
        + "[runtime_profiles.agentic]\nagentic = true\n"
        + agent("helper", "scripted.helper", runtime="agentic")
    )
    user = make_user()
    root = run_start(agent="boss", prompt="go", user=user, spawn_site=Run.SpawnSite.REST)
    root = wait_for(root.pk, {"awaiting_approval", "completed", "failed"}, timeout=30)
    assert root.status == "awaiting_approval", (root.status, root.error)
    approval = Approval.objects.get(run=root)
    approval_decide(approval=approval, user=user, approve=True)
    root = wait_for(root.pk, timeout=30)
    assert root.status == "completed", root.error
    wait_until(lambda: not Run.objects.filter(root_id=root.pk).exclude(finished_at__isnull=False).exists())
    helper = Run.objects.get(root_id=root.pk, kind="delegate")
    leaf = Run.objects.get(root_id=root.pk, parent=helper)
    background = Run.objects.get(root_id=root.pk, kind="subagent", parent=root)
    return Made(root, helper, leaf, background)
