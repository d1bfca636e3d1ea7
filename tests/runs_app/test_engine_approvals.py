"""Approvals through the model tool path (SPEC §2.2 always_ask, §7, EXAMPLES §3): a gated call
pauses the run (`awaiting_approval`, no worker held) until an operator decides."""

from __future__ import annotations

from typing import Any

import pytest

from runs_app.models import Approval, Run, ToolCall
from runs_app.services import RunServiceError, approval_decide
from tests.runs_app.engine_support import (
    agent,
    call_results,
    configure,
    engine,  # noqa: F401 - fixture
    events_of,
    make_user,
    provider,
    start,
    transcript,
    wait_for,
    wait_until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

RECALL = {"name": "memory_recall", "arguments": {"query": "q"}}
ECHO = {"name": "shell", "arguments": {"command": "echo hello"}}


def setup(calls: list[dict[str, Any]], risk: str, extra: str = "") -> None:
    configure(
        provider(
            "boss",
            [
                {"match": "^sub:", "turns": [{"say": "did {{prompt}}"}]},
                {"turns": [{"tool_calls": calls}, {"say": "got: {{tool_results}}"}]},
            ],
        )  # fmt: skip
        + f'[risk_profiles.gated]\nallowed_commands = ["*"]\n{risk}\n'
        + agent("boss", "scripted.boss", risk="gated")
        + extra
    )


def paused(run: Run) -> Run:
    return wait_for(run.pk, {"awaiting_approval", "completed", "failed"})


def test_always_ask_star_pauses_and_approve_resumes() -> None:
    setup([RECALL], 'always_ask = ["*"]')
    user = make_user()
    run = paused(start("boss", "go"))
    assert run.status == "awaiting_approval"
    assert run.owner == ""
    approval = Approval.objects.get(run=run)
    assert approval.status == "pending"
    assert approval.tool_call.name == "memory_recall" and approval.tool_call.status == "pending"
    requested = events_of(run, "approval.requested")
    assert len(requested) == 1
    assert requested[0].data["name"] == "memory_recall"
    assert requested[0].data["arguments"] == {"query": "q"}
    approval_decide(approval=approval, user=user, approve=True)
    run = wait_for(run.pk)
    assert run.status == "completed", run.error
    assert run.output == "got: No memories found."
    decided = events_of(run, "approval.decided")
    assert [e.data["status"] for e in decided] == ["approved"]
    assert requested[0].id < decided[0].id
    assert ToolCall.objects.get(pk=approval.tool_call_id).status == "done"


def test_always_ask_wins_over_auto_approve() -> None:
    setup([RECALL, ECHO], 'always_ask = ["shell"]\nauto_approve = ["*"]')
    user = make_user()
    run = paused(start("boss", "go"))
    assert run.status == "awaiting_approval"
    approval = Approval.objects.get(run=run)
    assert approval.tool_call.name == "shell"
    # the ungated call ran at once
    assert ToolCall.objects.get(run=run, name="memory_recall").status == "done"
    approval_decide(approval=approval, user=user, approve=True)
    run = wait_for(run.pk)
    assert run.output == "got: No memories found.\n\nhello"  # a final text is stripped


def test_deny_hands_the_reason_to_the_model() -> None:
    setup([ECHO], 'always_ask = ["shell"]')
    user = make_user()
    run = paused(start("boss", "go"))
    approval = Approval.objects.get(run=run)
    approval_decide(approval=approval, user=user, approve=False, reason="not today")
    run = wait_for(run.pk)
    assert run.status == "completed"
    assert call_results(run) == [
        {"success": False, "output": "", "error": "Tool call denied by operator: not today"}
    ]
    assert run.output == "got: Error: Tool call denied by operator: not today"
    assert ("tool", "Error: Tool call denied by operator: not today") in transcript(run)
    assert [e.data["status"] for e in events_of(run, "approval.decided")] == ["denied"]


def test_deciding_twice_is_refused() -> None:
    setup([ECHO], 'always_ask = ["shell"]')
    user = make_user()
    run = paused(start("boss", "go"))
    approval = Approval.objects.get(run=run)
    approval_decide(approval=approval, user=user, approve=True)
    with pytest.raises(RunServiceError) as refused:
        approval_decide(approval=Approval.objects.get(pk=approval.pk), user=user, approve=False, reason="no")
    assert refused.value.code == "conflict"
    assert refused.value.message == f"Approval {approval.pk} was already approved"
    run = wait_for(run.pk)
    assert run.output == "got: hello"
    assert len(events_of(run, "approval.decided")) == 1


def test_only_operators_decide() -> None:
    setup([ECHO], 'always_ask = ["shell"]')
    viewer = make_user("viewer", role="viewer")
    run = paused(start("boss", "go"))
    approval = Approval.objects.get(run=run)
    with pytest.raises(RunServiceError) as refused:
        approval_decide(approval=approval, user=viewer, approve=True)
    assert refused.value.code == "forbidden"
    approval_decide(approval=approval, user=make_user(), approve=True)
    assert wait_for(run.pk).status == "completed"


def test_two_gated_calls_resume_only_after_both_are_decided() -> None:
    setup([ECHO, RECALL], 'always_ask = ["shell", "memory_recall"]')
    user = make_user()
    run = paused(start("boss", "go"))
    first, second = Approval.objects.filter(run=run).order_by("tool_call__position")
    approval_decide(approval=first, user=user, approve=True)
    assert Run.objects.get(pk=run.pk).status == "awaiting_approval"
    approval_decide(approval=second, user=user, approve=False, reason="no")
    run = wait_for(run.pk)
    assert run.output == "got: hello\n\n\nError: Tool call denied by operator: no"


def test_approval_decided_while_the_run_is_still_running_its_turn() -> None:
    """The Approval row exists as soon as the turn's calls are recorded, while the run still
    runs the turn's other calls; an approval given then must not be lost."""
    slow = {"name": "shell", "arguments": {"command": "sleep 1"}}
    setup([slow, RECALL], 'always_ask = ["memory_recall"]')
    user = make_user()
    run = start("boss", "go")
    wait_until(lambda: Approval.objects.filter(run=run).exists(), message="approval recorded")
    assert Run.objects.get(pk=run.pk).status == "running"
    approval_decide(approval=Approval.objects.get(run=run), user=user, approve=True)
    run = wait_for(run.pk, timeout=15)
    assert run.status == "completed", run.error
    assert run.output == "got: \n\nNo memories found."


def test_gated_spawn_waits_for_approval_then_for_the_child() -> None:
    setup([{"name": "spawn_subagent", "arguments": {"prompt": "sub: x"}}], 'always_ask = ["spawn_subagent"]')
    user = make_user()
    run = paused(start("boss", "go"))
    assert run.status == "awaiting_approval"
    assert not Run.objects.filter(parent=run).exists()
    approval_decide(approval=Approval.objects.get(run=run), user=user, approve=True)
    run = wait_for(run.pk)
    assert run.output == "got: did sub: x"
    assert Run.objects.get(parent=run).status == "completed"


def test_bounded_delegate_keeps_the_targets_always_ask() -> None:
    extra = (
        provider("helper", [{"turns": [{"tool_calls": [ECHO]}, {"say": "helper: {{tool_results}}"}]}])
        + '[risk_profiles.gated.delegation_policy]\nmode = "allow"\n'
        + "[runtime_profiles.agentic]\nagentic = true\n"
        + agent("helper", "scripted.helper", risk="gated", runtime="agentic")
    )
    configure(
        provider(
            "boss",
            [
                {
                    "turns": [
                        {
                            "tool_calls": [
                                {"name": "delegate", "arguments": {"agent": "helper", "prompt": "x"}}
                            ]
                        },
                        {"say": "got: {{tool_results}}"},
                    ]
                }
            ],
        )  # fmt: skip
        + '[risk_profiles.gated]\nallowed_commands = ["*"]\nalways_ask = ["shell"]\n'
        + agent("boss", "scripted.boss", risk="gated")
        + extra
    )
    user = make_user()
    run = start("boss", "go")
    wait_until(lambda: Approval.objects.exists(), message="child approval")
    child = Run.objects.get(parent=run)
    child = wait_for(child.pk, {"awaiting_approval"})
    assert Run.objects.get(pk=run.pk).status == "waiting"
    approval_decide(approval=Approval.objects.get(run=child), user=user, approve=True)
    run = wait_for(run.pk)
    assert run.output == "got: [Agent 'helper' (scripted/helper-1, agentic)]\nhelper: hello"


def test_cancelling_a_run_closes_its_pending_approvals() -> None:
    setup([ECHO], 'always_ask = ["shell"]')
    user = make_user()
    run = paused(start("boss", "go"))
    approval = Approval.objects.get(run=run)
    from runs_app.services import run_cancel

    run_cancel(run=Run.objects.get(pk=run.pk), user=None, check_owner=False)
    approval.refresh_from_db()
    assert approval.status == "cancelled"
    assert approval.reason == "run cancelled before a decision"
    with pytest.raises(RunServiceError) as refused:
        approval_decide(approval=approval, user=user, approve=True)
    assert refused.value.message == "Run is already cancelled; its approvals can no longer be decided"
    assert not Approval.objects.filter(status="pending").exists()
