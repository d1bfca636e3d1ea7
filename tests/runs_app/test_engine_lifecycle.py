"""Run lifecycle (SPEC §4): cancellation, timeouts, the reaper and lost runs, steer, continue,
resume, sticky terminal states, max_concurrent_runs queueing, cron schedules."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from runs_app.engine import claims, dispatch, heartbeat
from runs_app.engine.children import stored_conversation
from runs_app.engine.settle import run_finish
from runs_app.models import TERMINAL_STATUSES, Announce, Message, Run, RunEvent, Schedule, ToolCall
from runs_app.services import (
    RunServiceError,
    run_cancel,
    run_continue,
    run_resume,
    run_steer,
    schedules_fire_due,
)
from runs_app.supervision import reap_once
from tests.runs_app.engine_support import (
    agent,
    at,
    call_results,
    configure,
    engine,  # noqa: F401 - fixture
    events_of,
    finish,
    make_user,
    provider,
    start,
    transcript,
    wait_for,
    wait_until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

LOST = "run lost: its worker stopped before it finished"


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def spawn(**arguments: Any) -> dict[str, Any]:
    return tool("spawn_subagent", **arguments)


RULES: list[dict[str, Any]] = [
    {"match": "^sub:", "turns": [{"say": "did {{prompt}}"}]},
    {"match": "^nap:", "turns": [{"sleep_ms": 1200}, {"say": "napped {{prompt}}"}]},
    {"match": "^long:", "turns": [{"sleep_ms": 3000}, {"say": "too late"}]},
    {"match": "^mid:", "turns": [
        {"tool_calls": [spawn(prompt="long: grandchild")]}, {"say": "mid {{tool_results}}"},
    ]},
]  # fmt: skip


def setup(*rules: dict[str, Any], runtime: str = "", extra: str = "") -> None:
    configure(
        provider("boss", [*RULES, *rules])
        + agent("boss", "scripted.boss", runtime="rt" if runtime else "")
        + (f"[runtime_profiles.rt]\n{runtime}\n" if runtime else "")
        + extra
    )


def echo(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"turns": [{"tool_calls": list(calls)}, {"say": "got: {{tool_results}}"}]}


def running_child(parent: Run, **filters: Any) -> Run:
    wait_until(
        lambda: Run.objects.filter(parent=parent, status="running", **filters).exists(),
        message="child running",
    )
    return Run.objects.get(parent=parent, status="running", **filters)


# -- cancellation --------------------------------------------------------------------------------


def test_cascade_cancel_of_a_tree() -> None:
    setup(
        echo(spawn(prompt="mid: a"), spawn(prompt="nap: bg", background=True)), runtime="max_spawn_depth = 2"
    )
    root = start("boss", "go")
    wait_until(
        lambda: Run.objects.filter(prompt="long: grandchild", status="running").exists(), message="grandchild"
    )
    user = make_user()
    changed = run_cancel(run=Run.objects.get(pk=root.pk), user=user)
    assert changed == 4
    root = wait_for(root.pk)
    assert (root.status, root.error) == ("cancelled", "Cancelled by user request")
    descendants = Run.objects.exclude(pk=root.pk)
    assert descendants.count() == 3
    for run in descendants:
        assert (run.status, run.error) == ("cancelled", "Cancelled by parent session"), run.prompt
    # a cancelled parent gets no announce and no more turns afterwards
    assert not Announce.objects.exists()
    before = transcript(root)
    wait_until(lambda: not heartbeat.held_ids(), message="worker threads idle")
    assert transcript(root) == before
    assert Run.objects.get(pk=root.pk).status == "cancelled"
    with pytest.raises(RunServiceError) as again:
        run_cancel(run=root, user=user)
    assert again.value.code == "conflict"


def test_cancelling_a_child_hands_the_parent_cancelled_by_user_request() -> None:
    setup(echo(spawn(prompt="long: x")))
    root = start("boss", "go")
    child = running_child(root)
    run_cancel(run=child, user=make_user())
    root = wait_for(root.pk)
    assert root.status == "completed"
    assert call_results(root) == [{"success": False, "output": "", "error": "Cancelled by user request"}]
    assert root.output == "got: Error: Cancelled by user request"


def test_only_the_creator_or_an_admin_may_cancel() -> None:
    setup(echo(spawn(prompt="nap: x")))
    creator = make_user("creator", role="operator")
    other = make_user("other", role="operator")
    root = start("boss", "go", user=creator)
    with pytest.raises(RunServiceError) as refused:
        run_cancel(run=root, user=other)
    assert refused.value.code == "forbidden"
    assert run_cancel(run=Run.objects.get(pk=root.pk), user=creator) >= 1


# -- terminal states are sticky ------------------------------------------------------------------


@pytest.mark.parametrize("terminal", sorted(TERMINAL_STATUSES))
def test_terminal_states_are_sticky(terminal: str) -> None:
    setup({"turns": [{"sleep_ms": 400}, {"say": "natural end"}]})
    run = start("boss", "go")
    wait_until(lambda: Run.objects.get(pk=run.pk).status == "running", message="running")
    assert run_finish(run.pk, status=terminal, output="first", error="first error")
    for other in sorted(TERMINAL_STATUSES):
        assert not run_finish(run.pk, status=other, output="second", error="second error")
    wait_until(lambda: not heartbeat.held_ids(), message="worker threads idle")
    run = Run.objects.get(pk=run.pk)
    assert (run.status, run.output, run.error) == (terminal, "first", "first error")
    ends = [e.type for e in events_of(run) if e.type.removeprefix("run.") in TERMINAL_STATUSES]
    assert ends == [f"run.{terminal}"]
    reap_once(startup=True, now=timezone.now() + timedelta(hours=1))
    assert Run.objects.get(pk=run.pk).status == terminal


def test_a_completed_run_stays_completed() -> None:
    setup({"turns": [{"say": "done"}]})
    run = finish("boss", "go")
    assert run.status == "completed"
    for other in TERMINAL_STATUSES:
        assert not run_finish(run.pk, status=other)
    assert Run.objects.get(pk=run.pk).status == "completed"


# -- timeouts ---------------------------------------------------------------------------------------


def test_subagent_timeout_and_its_descendants_cancelled() -> None:
    setup(echo(spawn(prompt="mid: a")), runtime="subagent_timeout_secs = 1\nmax_spawn_depth = 2")
    root = finish("boss", "go")
    mid = Run.objects.get(parent=root)
    assert (mid.status, mid.error) == ("timed_out", "timed out after 1s")
    grandchild = Run.objects.get(parent=mid)
    assert grandchild.status in ("cancelled", "timed_out")
    assert call_results(root) == [
        {"success": False, "output": "", "error": "subagent run failed: timed out after 1s"}
    ]
    assert [e.type for e in events_of(mid) if e.type == "run.timed_out"] == ["run.timed_out"]


# -- the reaper ---------------------------------------------------------------------------------------


def test_reaper_marks_a_run_of_a_stopped_worker_lost_and_settles_the_parent(monkeypatch: Any) -> None:
    setup(echo(spawn(prompt="nap: x")))
    root = start("boss", "go")
    child = running_child(root)
    # The worker that holds the child "stops": a new boot of the worker has another id.
    monkeypatch.setattr(heartbeat, "WORKER_ID", heartbeat.WORKER_ID + "-reborn")
    counts = reap_once(startup=True)
    assert counts["lost"] == 1
    child = Run.objects.get(pk=child.pk)
    assert (child.status, child.error) == ("lost", LOST)
    root = wait_for(root.pk)
    assert root.status == "completed", root.error
    assert call_results(root) == [{"success": False, "output": "", "error": f"subagent run failed: {LOST}"}]
    # the stopped thread's late model reply changes nothing
    wait_until(lambda: not heartbeat.held_ids(), timeout=10, message="old thread done")
    assert Run.objects.get(pk=child.pk).status == "lost"
    assert len(events_of(child, "run.lost")) == 1


def test_reaper_stale_heartbeat_of_another_worker() -> None:
    setup(echo(spawn(prompt="nap: x")))
    root = start("boss", "go")
    child = running_child(root)
    Run.objects.filter(pk=child.pk).update(
        owner="elsewhere:1:dead", heartbeat_at=timezone.now() - timedelta(minutes=5)
    )
    assert reap_once()["lost"] == 1
    root = wait_for(root.pk)
    assert call_results(root)[0]["error"] == f"subagent run failed: {LOST}"


def test_reaper_leaves_live_runs_of_this_worker_alone() -> None:
    setup(echo(spawn(prompt="nap: x")))
    root = start("boss", "go")
    child = running_child(root)
    Run.objects.filter(pk=child.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=5))
    assert reap_once(startup=True)["lost"] == 0
    assert wait_for(root.pk).status == "completed"
    assert Run.objects.get(pk=child.pk).status == "completed"


def test_reaper_wakes_a_waiting_run_whose_wake_up_was_lost() -> None:
    setup(echo(spawn(prompt="nap: x")))
    root = start("boss", "go")
    child = running_child(root)
    wait_until(lambda: Run.objects.get(pk=root.pk).status == "waiting", message="parent waiting")
    # settle the call "by hand" without waking the parent, as if the wake-up were lost
    ToolCall.objects.filter(run=root).update(
        status="done", result={"success": True, "output": "x", "error": None}
    )
    assert reap_once()["woken"] == 1
    root = wait_for(root.pk)
    assert root.output == "got: x"
    wait_for(child.pk)


def test_reaper_requeues_a_queued_run_whose_task_was_lost(monkeypatch: Any) -> None:
    setup({"turns": [{"say": "finally ran"}]})
    from runs_app.engine import dispatch

    monkeypatch.setattr(dispatch, "runnable", lambda run_id: None)  # the task message is lost
    run = start("boss", "go")
    monkeypatch.undo()
    assert Run.objects.get(pk=run.pk).status == "queued"
    assert reap_once(now=timezone.now() + timedelta(minutes=2))["requeued"] == 1
    assert wait_for(run.pk).output == "finally ran"


# -- steer, continue, resume -----------------------------------------------------------------------


def test_steer_is_injected_before_the_next_model_turn() -> None:
    setup({"turns": [
        {"sleep_ms": 500}, {"tool_calls": [tool("memory_recall", query="q")]}, {"say": "answer"},
    ]})  # fmt: skip
    user = make_user()
    run = start("boss", "go", user=user)
    wait_until(lambda: Run.objects.get(pk=run.pk).status == "running", message="running")
    run_steer(run=run, user=user, message="focus on tests")
    run = wait_for(run.pk)
    assert transcript(run) == [
        ("user", "go"),
        ("assistant", ""),
        ("tool", "No memories found."),
        ("user", "focus on tests"),
        ("assistant", "answer"),
    ]
    steered = events_of(run, "run.steered")
    assert [e.data["message"] for e in steered] == ["focus on tests"]
    with pytest.raises(RunServiceError) as refused:
        run_steer(run=run, user=user, message="too late")
    assert refused.value.code == "conflict"
    with pytest.raises(RunServiceError):
        run_steer(run=run, user=user, message="x" * 4001)


def test_continue_a_finished_run() -> None:
    setup(
        {"match": "^more", "turns": [{"say": "continued {{prompt}}"}]},
        {"turns": [{"tool_calls": [tool("memory_recall", query="q")]}, {"say": "first answer"}]},
    )
    user = make_user()
    first = finish("boss", "hello", user=user)
    second = wait_for(run_continue(run=first, user=user, prompt="more please").pk)
    assert second.continued_from_id == first.pk
    assert second.output == "continued more please"
    assert transcript(second) == [
        ("user", "hello"),
        ("assistant", ""),
        ("tool", "No memories found."),
        ("assistant", "first answer"),
        ("user", "more please"),
        ("assistant", "continued more please"),
    ]
    with pytest.raises(RunServiceError):
        run_continue(run=start("boss", "x"), user=user, prompt="no")


def test_continue_a_cancelled_run_leaves_out_its_unfinished_turn() -> None:
    setup({"match": "^again", "turns": [{"say": "again {{tool_results}}"}]}, echo(spawn(prompt="long: x")))
    user = make_user()
    first = start("boss", "hello", user=user)
    running_child(first)
    run_cancel(run=Run.objects.get(pk=first.pk), user=user)
    second = wait_for(run_continue(run=Run.objects.get(pk=first.pk), user=user, prompt="again").pk)
    assert second.status == "completed", second.error
    assert transcript(second) == [("user", "hello"), ("user", "again"), ("assistant", "again")]


def test_resume_a_lost_run_from_its_last_completed_step(monkeypatch: Any) -> None:
    configure(provider("boss", [*RULES, {"turns": [
        {"tool_calls": [tool("memory_store", key="k", content="v")]},
        {"sleep_ms": 1200},
        {"say": "resumed with {{tool_results}}"},
    ]}]) + agent("boss", "scripted.boss", system_prompt="You are boss."))  # fmt: skip
    user = make_user()
    run = start("boss", "go", user=user)
    # Step 1 done: its call finished, and the run is in its second model call. The tool message
    # is staged until that call's commit, so the resume derives it from the call's result.
    wait_until(
        lambda: (
            Run.objects.get(pk=run.pk).turns == 1 and ToolCall.objects.filter(run=run, status="done").exists()
        ),
        message="step 1",
    )
    monkeypatch.setattr(heartbeat, "WORKER_ID", heartbeat.WORKER_ID + "-reborn")
    assert reap_once(startup=True)["lost"] == 1
    lost = Run.objects.get(pk=run.pk)
    assert (lost.status, lost.error) == ("lost", LOST)
    with pytest.raises(RunServiceError):
        run_resume(run=start("boss", "x"), user=user)  # only a lost run can be resumed
    resumed = wait_for(run_resume(run=lost, user=user).pk)
    assert resumed.status == "completed", resumed.error
    assert resumed.continued_from_id == lost.pk
    assert resumed.output == "resumed with Stored memory 'k' for agent 'boss'."
    # The lost run's transcript is copied as it is, its system prompt and the derived tool
    # message included, then the resume message.
    assert transcript(resumed)[:4] == [
        ("system", "You are boss."),
        ("user", "go"),
        ("assistant", ""),
        ("tool", "Stored memory 'k' for agent 'boss'."),
    ]
    assert transcript(resumed)[4] == (
        "user",
        "Resume the task from where it stopped; earlier steps are above.",
    )
    copied = Message.objects.filter(run=resumed).order_by("seq")[:4]
    assert [(m.seq, m.tool_calls, m.tool_call_id) for m in copied] == [
        (i, r.tool_calls, r.tool_call_id) for i, r in enumerate(stored_conversation(lost))
    ]
    # the completed step was not done again
    assert not ToolCall.objects.filter(run=resumed).exists()
    assert Run.objects.get(pk=lost.pk).status == "lost"


# -- max_concurrent_runs ---------------------------------------------------------------------------


def test_max_concurrent_runs_queues_extra_runs_until_a_slot_frees() -> None:
    setup(
        {"match": "^top", "turns": [{"sleep_ms": 200}, {"say": "ok {{prompt}}"}]},
        extra="[delegate]\nmax_concurrent_runs = 1\n",
    )
    runs = [start("boss", f"top {i}") for i in range(3)]
    wait_until(lambda: Run.objects.filter(deferred=True).exists() or all(
        r.status in TERMINAL_STATUSES for r in Run.objects.all()), message="a deferred run")  # fmt: skip
    done = [wait_for(r.pk) for r in runs]
    assert [r.status for r in done] == ["completed"] * 3
    spans = sorted((at(r.started_at), at(r.finished_at)) for r in done)
    for (_, end), (begin, _) in zip(spans, spans[1:], strict=False):
        assert end <= begin, "two runs ran at once"


def test_a_saved_max_concurrent_runs_holds_for_the_next_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit is read by the claim's own UPDATE: a save applies to the next claim at once,
    in every process."""
    setup({"turns": [{"say": "ok"}]}, extra="[delegate]\nmax_concurrent_runs = 5\n")
    monkeypatch.setattr(dispatch, "runnable", lambda run_id: None)  # no worker takes them
    first, second = start("boss", "one"), start("boss", "two")
    monkeypatch.undo()
    assert claims.claim(first.pk) is not None
    setup({"turns": [{"say": "ok"}]}, extra="[delegate]\nmax_concurrent_runs = 1\n")
    assert claims.claim(second.pk) is None
    assert Run.objects.get(pk=second.pk).deferred
    Run.objects.filter(pk=first.pk).update(status="queued", owner="")  # let the worker finish both
    dispatch.runnable(first.pk)
    assert [wait_for(r.pk).status for r in (first, second)] == ["completed"] * 2


def test_max_concurrent_runs_of_one_still_completes_a_tree() -> None:
    setup(echo(spawn(prompt="sub: a"), spawn(prompt="sub: b")), extra="[delegate]\nmax_concurrent_runs = 1\n")
    run = finish("boss", "go")
    assert run.output == "got: did sub: a\n\ndid sub: b"


# -- schedules -----------------------------------------------------------------------------------------


def test_a_cron_schedule_fires_a_cron_run() -> None:
    setup({"turns": [{"say": "cron said {{prompt}}"}]})
    schedule = Schedule.objects.create(name="nightly", agent="boss", prompt="tidy up", cron="*/5 * * * *")
    now = timezone.now() + timedelta(minutes=10)
    started = schedules_fire_due(now)
    assert len(started) == 1
    run = wait_for(started[0].pk)
    assert (run.kind, run.session_key) == ("cron", f"cron-{run.pk}")
    assert run.prompt == f"[cron:{schedule.pk} nightly] tidy up"
    assert run.output == f"cron said [cron:{schedule.pk} nightly] tidy up"
    assert schedules_fire_due(now) == []
    Schedule.objects.filter(pk=schedule.pk).update(enabled=False)
    assert schedules_fire_due(now + timedelta(hours=1)) == []
    assert RunEvent.objects.filter(run=run, type="run.completed").count() == 1


# -- engine invariants ---------------------------------------------------------------------------------


def test_no_transaction_is_open_during_a_model_call_or_a_shell_command(monkeypatch: Any) -> None:
    from django.db import connection

    from runs_app.engine.providers.scripted import ScriptedProvider
    from runs_app.engine.tools import shell
    from runs_app.models import Approval
    from runs_app.services import approval_decide

    seen: list[tuple[str, bool]] = []
    real_complete, real_run_command = ScriptedProvider.complete, shell.run_command

    def complete(self: ScriptedProvider, request: Any) -> Any:
        seen.append(("model", connection.in_atomic_block))
        return real_complete(self, request)

    def run_command(*args: Any, **kwargs: Any) -> Any:
        seen.append(("shell", connection.in_atomic_block))
        return real_run_command(*args, **kwargs)

    monkeypatch.setattr(ScriptedProvider, "complete", complete)
    monkeypatch.setattr(shell, "run_command", run_command)
    setup(
        {"match": "^gated", "turns": [{"tool_calls": [tool("shell", command="echo gated")]}, {"say": "ok"}]},
        {"turns": [
            {"tool_calls": [tool("shell", command="echo a"), tool("shell", command="echo b"), spawn(prompt="sub: x")]},
            {"tool_calls": [tool("delegate", agent="peer", prompt="y")]},
            {"say": "{{tool_results}}"},
        ]},
        runtime="parallel_tools = true",
        extra=provider("peer", [{"turns": [{"say": "peer ok"}]}]) + agent("peer", "scripted.peer")
        + '[risk_profiles.gated]\nallowed_commands = ["*"]\nalways_ask = ["shell"]\n'
        + agent("gatekeeper", "scripted.boss", risk="gated"),
    )  # fmt: skip
    run = finish("boss", "go")
    assert run.status == "completed", run.error
    user = make_user()
    gated = wait_for(start("gatekeeper", "gated").pk, {"awaiting_approval"})
    approval_decide(approval=Approval.objects.get(run=gated), user=user, approve=True)
    assert wait_for(gated.pk).status == "completed"
    kinds = [k for k, _ in seen]
    assert kinds.count("shell") == 3 and kinds.count("model") >= 6
    assert not any(in_atomic for _, in_atomic in seen), seen


def test_deciding_an_approval_of_a_finished_run_is_refused() -> None:
    from runs_app.models import Approval
    from runs_app.services import approval_decide

    setup(
        {"turns": [{"tool_calls": [tool("shell", command="echo x")]}, {"say": "ok"}]},
        extra='[risk_profiles.gated]\nallowed_commands = ["*"]\nalways_ask = ["shell"]\n'
        + agent("gatekeeper", "scripted.boss", risk="gated"),
    )
    user = make_user()
    run = wait_for(start("gatekeeper", "go", user=user).pk, {"awaiting_approval"})
    run_cancel(run=run, user=user)
    approval = Approval.objects.get(run=run)
    with pytest.raises(RunServiceError) as refused:
        approval_decide(approval=approval, user=user, approve=True)
    assert refused.value.code == "conflict"
    assert refused.value.message == "Run is already cancelled; its approvals can no longer be decided"
    assert Approval.objects.get(pk=approval.pk).status == "cancelled"  # closed when the run ended
