"""`decide(state, turn)`: what a model turn means for its run. Pure: no database, no worker."""

from __future__ import annotations

from policies_app.specs import RiskProfileSpec
from runs_app.engine.decide import INVALID_COMPLETION, Continue, Finish, Planned, RunState, Turn, Wait, decide
from runs_app.engine.providers import ToolCallRequest

ALL = frozenset({"file_read", "shell", "memory_recall", "spawn_subagent", "delegate", "sessions_yield"})


def state(
    kind: str = "top_level", *, agentic: bool = True, tools: frozenset[str] = ALL, **risk: object
) -> RunState:
    return RunState(kind=kind, agentic=agentic, tools=tools, risk=RiskProfileSpec(alias="p", **risk))  # type: ignore[arg-type]


def call(name: str, i: int = 0, **arguments: object) -> ToolCallRequest:
    return ToolCallRequest(id=f"c{i}", name=name, arguments=dict(arguments))


def kinds(decision: Finish | Continue | Wait) -> list[tuple[str, str]]:
    assert not isinstance(decision, Finish)
    return [(p.call.name, p.kind) for p in decision.calls]


def test_text_without_calls_completes_the_run() -> None:
    assert decide(state(), Turn(text="done")) == Finish("completed", output="done")


def test_a_blank_answer_fails_a_top_level_run_and_a_delegate() -> None:
    for kind in ("top_level", "delegate"):
        assert decide(state(kind), Turn(text="  \n")) == Finish("failed", error=INVALID_COMPLETION)


def test_a_blank_answer_completes_a_subagent_without_output() -> None:
    assert decide(state("subagent"), Turn(text="")) == Finish("completed", output="")
    failed = Turn(failure=INVALID_COMPLETION, invalid=True)  # every retry answered with nothing
    assert decide(state("subagent"), failed) == Finish("completed", output="")
    assert decide(state("delegate"), failed) == Finish("failed", error=INVALID_COMPLETION)


def test_a_failed_model_call_fails_the_run_with_its_error() -> None:
    assert decide(state(), Turn(failure="All model providers/models failed")) == Finish(
        "failed", error="All model providers/models failed"
    )


def test_local_calls_continue_and_orchestration_calls_wait() -> None:
    local = decide(state(), Turn(calls=(call("file_read", 0, path="a"), call("shell", 1, command="ls"))))
    assert isinstance(local, Continue)
    assert kinds(local) == [("file_read", "local"), ("shell", "local")]
    mixed = decide(
        state(), Turn(calls=(call("file_read", 0, path="a"), call("spawn_subagent", 1, prompt="x")))
    )
    assert isinstance(mixed, Wait)
    assert kinds(mixed) == [("file_read", "local"), ("spawn_subagent", "spawn_subagent")]
    assert kinds(decide(state(), Turn(calls=(call("sessions_yield"),)))) == [
        ("sessions_yield", "sessions_yield")
    ]  # type: ignore[arg-type]


def test_a_duplicate_call_of_one_turn_is_refused_but_spawns_are_exempt() -> None:
    turn = Turn(
        calls=(call("file_read", 0, path="a"), call("file_read", 1, path="a"), call("file_read", 2, path="b"))
    )
    decision = decide(state(), turn)
    assert isinstance(decision, Continue)
    assert decision.calls[1] == Planned(
        1,
        turn.calls[1],
        "refused",
        "Skipped duplicate tool call 'file_read' with identical arguments in this turn.",
    )
    assert [p.kind for p in decision.calls] == ["local", "refused", "local"]
    spawns = decide(
        state(), Turn(calls=(call("spawn_subagent", 0, prompt="x"), call("spawn_subagent", 1, prompt="x")))
    )
    assert [p.kind for p in spawns.calls] == ["spawn_subagent", "spawn_subagent"]  # type: ignore[union-attr]
    exempt = RunState(kind="top_level", agentic=True, tools=ALL, risk=RiskProfileSpec(alias="p"),
                      dedup_exempt=frozenset({"file_read"}))  # fmt: skip
    assert [p.kind for p in decide(exempt, turn).calls] == ["local", "local", "local"]  # type: ignore[union-attr]


def test_a_tool_outside_the_registry_is_refused_except_spawns_own_check() -> None:
    decision = decide(
        state(tools=frozenset({"file_read"})), Turn(calls=(call("shell", 0), call("spawn_subagent", 1)))
    )
    assert isinstance(decision, Wait)
    assert decision.calls[0].refusal == "Tool 'shell' is not available to this agent"
    assert decision.calls[1].kind == "spawn_subagent"  # refused by spawn_subagent itself, with SPEC §5's text


def test_always_ask_asks_an_operator_first() -> None:
    decision = decide(state(always_ask=("shell",)), Turn(calls=(call("shell", 0, command="ls"),)))
    assert isinstance(decision, Wait)
    assert kinds(decision) == [("shell", "approval")]


def test_a_non_agentic_run_ignores_calls() -> None:
    assert decide(state(agentic=False), Turn(text="answer", calls=(call("shell"),))) == Finish(
        "completed", output="answer"
    )
