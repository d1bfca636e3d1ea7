"""What a step writes, and in how many commits: the tool messages of a turn whose calls all
finished are staged and written with the run's next write (runs_app/engine/loop.py), and a
copy of a run (resume, continue, fork) derives them from the calls while they are staged
(`children.stored_conversation`)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from runs_app.engine.children import stored_conversation
from runs_app.models import Message, Run, ToolCall
from tests.runs_app.engine_support import (
    agent,
    configure,
    engine,  # noqa: F401 - fixture
    finish,
    provider,
    transcript,
)
from zeroclaw_site.sqlite_backend import base as sqlite_base

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

SPAWN = {"name": "spawn_subagent", "arguments": {"prompt": "sub: part"}}


@pytest.fixture
def commits(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The thread name of every commit made meanwhile (the real commit is still made)."""
    seen: list[str] = []
    lock = threading.Lock()
    real = getattr(sqlite_base.DatabaseWrapper, "_commit")  # noqa: B009

    def counted(self: Any) -> Any:
        with lock:
            seen.append(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(sqlite_base.DatabaseWrapper, "_commit", counted)
    return seen


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


def test_a_sequential_child_costs_two_commits(commits: list[str]) -> None:
    sequential(1)  # warm-up: the configuration and the first run's own writes
    commits.clear()
    k = 8
    run = sequential(k)
    assert run.status == "completed", run.error
    assert run.output == "got did sub: part"
    # Per child: the parent's model turn with its spawn and wait (and the previous turn's tool
    # messages), and the child's turn that ends it and wakes the parent. Plus a few for the
    # root's start, claim and last turn. It was 4 per child with the tool messages in a commit
    # of their own, and 3 with the spawn in a commit apart from its model turn.
    assert len(commits) <= 2 * k + 6, len(commits)
    # Every tool message is there, in order, one per child.
    roles = [role for role, _ in transcript(run)]
    assert roles == ["user"] + ["assistant", "tool"] * k + ["assistant"]
    assert [c for r, c in transcript(run) if r == "tool"] == ["did sub: part"] * k


def test_a_settled_turn_not_yet_written_is_derived_from_its_calls() -> None:
    run = sequential(1)
    rows = list(Message.objects.filter(run=run).order_by("seq"))
    assert [r.role for r in rows] == ["user", "assistant", "tool", "assistant"]
    # As the run was during its second model call: the tool message staged, not written.
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
    # A run that ended otherwise wrote what it had staged: its last turn is what is stored.
    run.status = "cancelled"
    assert [m.role for m in stored_conversation(run)] == ["user", "assistant"]


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


def test_a_run_whose_next_model_call_fails_keeps_the_staged_tool_messages() -> None:
    # No second turn and no `say` to replay: the second model call fails (a provider error).
    run = recall_then()
    assert run.status == "failed"
    assert transcript(run) == [("user", "go"), ("assistant", ""), ("tool", "No memories found.")]


def test_a_step_that_raises_fails_its_run_with_the_staged_tool_messages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runs_app.engine import loop

    real = loop.tracker_check_cost
    calls: list[str] = []

    def second_check_raises(**kwargs: Any) -> None:
        calls.append(kwargs["key"])
        if len(calls) == 2:  # after the first turn's results were staged, before the next call
            raise RuntimeError("a bug")
        real(**kwargs)

    monkeypatch.setattr(loop, "tracker_check_cost", second_check_raises)
    run = recall_then({"say": "never"})
    assert (run.status, run.error) == ("failed", "internal error: RuntimeError: a bug")
    assert transcript(run) == [("user", "go"), ("assistant", ""), ("tool", "No memories found.")]


def test_the_embedded_worker_reads_no_transcript_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A child's first messages are kept when it is created, and a parent's when it goes to
    wait: resuming either reads no message (with a shared broker, each hop reads them)."""
    from runs_app.engine import ready, sql

    reads: list[str] = []
    real = sql.MESSAGES_FROM.models

    def counted(run_id: Any, seq: int) -> Any:
        reads.append(str(run_id))
        return real(run_id, seq)

    monkeypatch.setattr(sql.MESSAGES_FROM, "models", counted)
    k = 5
    sequential(k)
    assert len(reads) <= 1, reads  # the root's first step (it was created outside a worker)
    reads.clear()
    monkeypatch.setattr(ready, "enabled", lambda: False)
    sequential(k)
    assert len(reads) >= 2 * k  # each child once, the root at each wake-up


def test_calls_handled_in_the_turns_commit_that_raise_leave_the_paid_turn_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from runs_app.engine import spawn

    def broken(**kwargs: Any) -> Any:
        raise RuntimeError("spawn broke")

    monkeypatch.setattr(spawn, "spawn_subagent", broken)  # a bug in the handling of the calls
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
