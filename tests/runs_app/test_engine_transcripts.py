"""What a step leaves in the transcript: every tool message, in order, also when the next
model call fails or the step raises; and a copy of a run (resume, continue, fork) derives the
tool messages of a turn whose calls finished after the run last wrote
(`children.stored_conversation`)."""

from __future__ import annotations

from typing import Any

import pytest

from runs_app.engine.children import stored_conversation
from runs_app.models import Message, Run, ToolCall
from tests.runs_app.engine_support import (
    agent,
    configure,
    finish,
    inline,  # noqa: F401 - fixture
    provider,
    transcript,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline")]

SPAWN = {"name": "spawn_subagent", "arguments": {"prompt": "sub: part"}}


def sequential(k: int) -> Run:
    configure(
        provider(
            "boss",
            [
                {"match": "^sub:", "turns": [{"say": "did {{prompt}}"}]},
                {"turns": [{"tool_calls": [SPAWN]} for _ in range(k)] + [{"say": "got {{tool_results}}"}]},
            ],
        )
        + agent("boss", "scripted.boss")
    )
    return finish("boss", "go")


def test_a_sequential_tree_keeps_every_tool_message_in_order() -> None:
    k = 8
    run = sequential(k)
    assert run.status == "completed", run.error
    assert run.output == "got did sub: part"
    roles = [role for role, _ in transcript(run)]
    assert roles == ["user"] + ["assistant", "tool"] * k + ["assistant"]
    assert [c for r, c in transcript(run) if r == "tool"] == ["did sub: part"] * k


def test_a_settled_turn_not_yet_written_is_derived_from_its_calls() -> None:
    run = sequential(1)
    rows = list(Message.objects.filter(run=run).order_by("seq"))
    assert [r.role for r in rows] == ["user", "assistant", "tool", "assistant"]
    # As the run was when it was lost after its child settled, before it resumed.
    Message.objects.filter(pk__in=[rows[2].pk, rows[3].pk]).delete()
    Run.objects.filter(pk=run.pk).update(turns=1, status="lost")
    run.turns, run.status = 1, "lost"
    derived = stored_conversation(run)
    assert [(m.role, m.content, m.tool_call_id) for m in derived] == [
        ("user", "go", ""),
        ("assistant", rows[1].content, ""),
        ("tool", "did sub: part", rows[1].tool_calls[0]["id"]),
    ]
    assert derived[-1].pk is None and derived[-1].seq == rows[1].seq + 1


def test_a_turn_with_a_call_still_pending_is_not_derived() -> None:
    run = sequential(1)
    rows = list(Message.objects.filter(run=run).order_by("seq"))
    Message.objects.filter(pk__in=[rows[2].pk, rows[3].pk]).delete()
    Run.objects.filter(pk=run.pk).update(turns=1, status="lost")
    run.turns, run.status = 1, "lost"
    ToolCall.objects.filter(run=run).update(status="pending")
    assert [m.role for m in stored_conversation(run)] == ["user", "assistant"]


RECALL = {"name": "memory_recall", "arguments": {"query": "q"}}


def recall_then(*second: dict[str, Any]) -> Run:
    turns = [{"tool_calls": [RECALL]}, *second]
    configure(provider("boss", [{"turns": turns}]) + agent("boss", "scripted.boss"))
    return finish("boss", "go")


def test_a_run_whose_next_model_call_fails_keeps_the_tool_messages() -> None:
    # No second turn and no `say` to replay: the second model call fails (a provider error).
    run = recall_then()
    assert run.status == "failed"
    assert transcript(run) == [("user", "go"), ("assistant", ""), ("tool", "No memories found.")]


def test_a_step_that_raises_fails_its_run_with_its_tool_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runs_app.engine import step

    real = step.check_day_cost
    calls: list[str] = []

    def second_check_raises(run: Any, max_cost_per_day_cents: int) -> None:
        calls.append(run.tracker_key)
        if len(calls) == 2:  # after the first turn's results were written, before the next call
            raise RuntimeError("a bug")
        real(run, max_cost_per_day_cents)

    monkeypatch.setattr(step, "check_day_cost", second_check_raises)
    run = recall_then({"say": "never"})
    assert (run.status, run.error) == ("failed", "internal error: RuntimeError: a bug")
    assert transcript(run) == [("user", "go"), ("assistant", ""), ("tool", "No memories found.")]


def test_calls_handled_in_the_turns_commit_that_raise_leave_the_paid_turn_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runs_app.engine import calls

    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("spawn broke")

    monkeypatch.setattr(calls, "spawn_subagent", broken)  # a bug in the handling of the calls
    pricing = {"input_per_mtok_cents": 2000, "output_per_mtok_cents": 4000}
    usage = {"input": 1000, "output": 500}  # 4 cents
    configure(
        provider("boss", [{"turns": [{"tool_calls": [SPAWN], "usage": usage}]}], pricing=pricing)
        + agent("boss", "scripted.boss")
    )
    run = finish("boss", "go")
    assert (run.status, run.error) == ("failed", "internal error: RuntimeError: spawn broke")
    # The turn was paid for: it is recorded, with its message; its calls were rolled back.
    assert (run.turns, run.input_tokens, run.output_tokens, run.cost_cents) == (1, 1000, 500, 4.0)
    assert [role for role, _ in transcript(run)] == ["user", "assistant"]
    assert not ToolCall.objects.filter(run=run).exists()
    assert not Run.objects.filter(parent=run).exists()
