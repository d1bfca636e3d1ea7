"""Budgets through the model tool path (SPEC §3.1, §2.3): actions per hour, cost per day,
output tokens per run tree, the iteration cap; shared trackers under concurrency."""

from __future__ import annotations

from typing import Any

import pytest

from policies_app.models import TrackerCost
from policies_app.tracker import tracker_record_cost, tracker_usage
from runs_app.models import Run
from tests.runs_app.engine_support import (
    agent,
    call_results,
    configure,
    engine,  # noqa: F401 - fixture
    finish,
    provider,
    wait_for,
)


def tracker_cents(key: str) -> float:
    """Every cent on the tracker, whatever the day: a test that runs across midnight (UTC)
    splits its costs between two days, and "today" would see only the second part."""
    return float(sum(TrackerCost.objects.filter(tracker__key=key).values_list("cents", flat=True)))


pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

RATE = "Rate limit exceeded: action budget exhausted"


def fail(error: str) -> dict[str, Any]:
    return {"success": False, "output": "", "error": error}


def tool(name: str, **arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def echo(*calls: dict[str, Any], match: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"turns": [{"tool_calls": list(calls)}, {"say": "{{tool_results}}"}]}
    if match:
        rule["match"] = match
    return rule


def runtime(alias: str, **fields: Any) -> str:
    body = "".join(f"{k} = {str(v).lower() if isinstance(v, bool) else v}\n" for k, v in fields.items())
    return f"[runtime_profiles.{alias}]\n{body}"


def test_every_acting_call_records_exactly_one_action() -> None:
    configure(
        provider(
            "boss",
            [
                {"match": "^sub:", "turns": [{"say": "ok"}]},
                echo(
                    tool("shell", command="echo hi"),
                    tool("memory_store", key="k", content="v"),
                    tool("file_write", path="notes.txt", content="x"),
                    tool("file_read", path="notes.txt"),
                    tool("file_list"),
                    tool("memory_recall", query="k"),
                    tool("shell", command="echo hi"),  # a skipped duplicate spends nothing
                    tool("spawn_subagent", prompt="sub: a"),
                    tool("delegate", agent="peer", prompt="x"),
                    tool("model_switch", model_provider="scripted.boss"),
                    tool("sessions_yield"),
                ),
            ],
        )
        + provider("peer", [{"turns": [{"say": "fine"}]}])
        + agent("boss", "scripted.boss")
        + agent("peer", "scripted.peer")
    )
    run = finish("boss", "go")
    assert run.status == "completed", run.error
    results = call_results(run)
    assert [r["success"] for r in results] == [True] * 6 + [False] + [True] * 4, results
    # shell, memory_store, file_write, spawn_subagent, delegate, model_switch
    assert tracker_usage(key="boss")["actions_last_hour"] == 6
    assert tracker_usage(key="peer")["actions_last_hour"] == 0


def test_actions_budget_runs_out_mid_turn() -> None:
    configure(
        provider("boss", [echo(*(tool("shell", command=f"echo {i}") for i in range(4)))])
        + runtime("two", max_actions_per_hour=2)
        + agent("boss", "scripted.boss", runtime="two")
    )
    run = finish("boss", "go")
    assert [r["success"] for r in call_results(run)] == [True, True, False, False]
    assert call_results(run)[2] == fail(RATE)
    assert tracker_usage(key="boss")["actions_last_hour"] == 2


def test_model_usage_cost_is_recorded_on_the_tracker() -> None:
    pricing = {"input_per_mtok_cents": 2000, "output_per_mtok_cents": 4000}
    usage = {"input": 1000, "output": 500}  # 4 cents a turn
    configure(
        provider(
            "boss",
            [
                {"match": "^sub:", "turns": [{"say": "child", "usage": usage}]},
                {
                    "turns": [
                        {"tool_calls": [tool("spawn_subagent", prompt="sub: x")], "usage": usage},
                        {"tool_calls": [tool("delegate", agent="peer", prompt="y")], "usage": usage},
                        {"say": "done", "usage": usage},
                    ]
                },
            ],
            pricing=pricing,
        )  # fmt: skip
        + provider("peer", [{"turns": [{"say": "fine", "usage": usage}]}], pricing=pricing)
        + agent("boss", "scripted.boss")
        + agent("peer", "scripted.peer")
    )
    run = finish("boss", "go")
    assert run.status == "completed", run.error
    assert (run.input_tokens, run.output_tokens, run.cost_cents) == (3000, 1500, 12.0)
    child = Run.objects.get(parent=run, kind="subagent")
    delegate = Run.objects.get(parent=run, kind="delegate")
    assert child.cost_cents == 4.0 and delegate.cost_cents == 4.0
    # subagent and bounded delegate spend the caller's tracker
    assert tracker_cents("boss") == 20.0
    assert tracker_cents("peer") == 0


def test_daily_cost_budget_exhausted() -> None:
    configure(
        provider(
            "boss",
            [
                {"match": "^sub:", "turns": [{"say": "ok"}]},
                echo(tool("shell", command="echo hi"), tool("spawn_subagent", prompt="sub: x")),
            ],
        )
        + runtime("cheap", max_cost_per_day_cents=5)
        + agent("boss", "scripted.boss", runtime="cheap")
        + agent("other", "scripted.boss", runtime="cheap")
    )
    tracker_record_cost(key="boss", cents=5)
    run = finish("boss", "go")
    assert (run.status, run.error) == ("failed", "Rate limit exceeded: daily cost budget exhausted")
    assert run.turns == 0
    # another tracker with the same limits is unaffected; an action refused on cost spends nothing
    tracker_record_cost(key="other", cents=4.5)
    run = finish("other", "go")
    assert run.status == "completed"
    assert tracker_usage(key="other")["actions_last_hour"] == 2


def test_fifty_concurrent_children_against_a_budget_of_twenty_admit_exactly_twenty() -> None:
    """50 background delegates of an independent target share the target's tracker
    (max_actions_per_hour = 20); each tries one acting call: exactly 20 succeed."""
    configure(
        provider(
            "boss",
            [echo(*(tool("delegate", agent="w", prompt=f"job {i}", background=True) for i in range(50)))],
        )
        + provider(
            "w", [{"turns": [{"tool_calls": [tool("shell", command="echo x")]}, {"say": "{{tool_results}}"}]}]
        )
        + runtime("rich", max_actions_per_hour=100)
        + runtime("twenty", max_actions_per_hour=20, agentic=True)
        + agent("boss", "scripted.boss", runtime="rich", delegates=[{"agent": "w", "mode": "independent"}])
        + agent("w", "scripted.w", runtime="twenty")
    )
    run = finish("boss", "go", timeout=60)
    assert run.status == "completed", run.error
    assert all(r["success"] for r in call_results(run))
    children = list(Run.objects.filter(parent=run))
    assert len(children) == 50
    outcomes = [call_results(wait_for(c.pk, timeout=60))[0] for c in children]
    assert sum(1 for o in outcomes if o["success"]) == 20
    assert [o for o in outcomes if not o["success"]] == [fail(RATE)] * 30
    assert tracker_usage(key="w")["actions_last_hour"] == 20
    assert tracker_usage(key="boss")["actions_last_hour"] == 50


def test_parallel_admission_over_budget_spends_nothing() -> None:
    configure(
        provider("boss", [echo(tool("delegate", parallel=["w"] * 50, prompt="p"))])
        + provider("w", [{"turns": [{"say": "ok"}]}])
        + runtime("twenty", max_actions_per_hour=20)
        + agent("boss", "scripted.boss", runtime="twenty")
        + agent("w", "scripted.w")
    )
    run = finish("boss", "go")
    assert call_results(run) == [fail(RATE)]
    assert not Run.objects.filter(parent=run).exists()
    assert tracker_usage(key="boss")["actions_last_hour"] == 0


def test_output_token_budget_covers_the_run_and_its_descendants() -> None:
    configure(
        provider(
            "boss",
            [
                {"match": "^sub:", "turns": [{"say": "child", "usage": {"input": 1, "output": 80}}]},
                {
                    "turns": [
                        {
                            "tool_calls": [tool("spawn_subagent", prompt="sub: x")],
                            "usage": {"input": 1, "output": 30},
                        },
                        {"say": "never", "usage": {"input": 1, "output": 1}},
                    ]
                },
            ],
        )  # fmt: skip
        + runtime("capped", max_output_tokens=100)
        + agent("boss", "scripted.boss", runtime="capped")
    )
    run = finish("boss", "go")
    assert (run.status, run.error) == ("failed", "Output token budget exhausted for this run tree (110/100)")
    child = Run.objects.get(parent=run)
    assert (child.status, child.output_tokens) == ("completed", 80)


def test_an_ancestors_output_token_budget_stops_a_delegate() -> None:
    configure(
        provider(
            "boss",
            [
                {
                    "turns": [
                        {
                            "tool_calls": [tool("delegate", agent="w", prompt="x")],
                            "usage": {"input": 1, "output": 100},
                        },
                        {"say": "done"},
                    ]
                }
            ],
        )  # fmt: skip
        + provider("w", [{"turns": [{"say": "ok"}]}])
        + runtime("capped", max_output_tokens=100)
        + agent("boss", "scripted.boss", runtime="capped")
        + agent("w", "scripted.w")
    )
    run = finish("boss", "go")
    child = Run.objects.get(parent=run)
    assert (child.status, child.error) == (
        "failed",
        "Output token budget exhausted for this run tree (100/100)",
    )
    assert child.turns == 0
    assert run.error == "Output token budget exhausted for this run tree (100/100)"


def test_iteration_cap() -> None:
    configure(
        provider(
            "boss",
            [
                {
                    "turns": [
                        *({"tool_calls": [tool("memory_recall", query=str(i))]} for i in range(4)),
                        {"say": "x"},
                    ]
                }
            ],
        )
        + runtime("three", max_tool_iterations=3)
        + agent("boss", "scripted.boss", runtime="three")
    )
    run = finish("boss", "go")
    assert (run.status, run.error, run.turns) == ("failed", "Agent exceeded maximum tool iterations (3)", 3)


def test_a_model_call_paid_by_a_run_cancelled_meanwhile_is_still_on_the_tracker() -> None:
    from runs_app.services import run_cancel
    from tests.runs_app.engine_support import idle, start, wait_until

    pricing = {"input_per_mtok_cents": 2000, "output_per_mtok_cents": 4000}
    usage = {"input": 1000, "output": 500}  # 4 cents a turn
    configure(
        provider(
            "boss",
            [
                {"match": "^sub:", "turns": [{"sleep_ms": 800}, {"say": "child", "usage": usage}]},
                {
                    "turns": [
                        {"tool_calls": [tool("spawn_subagent", prompt="sub: x")], "usage": usage},
                        {"say": "done", "usage": usage},
                    ]
                },
            ],
            pricing=pricing,
        )  # fmt: skip
        + agent("boss", "scripted.boss")
    )
    run = start("boss", "go")
    wait_until(lambda: Run.objects.filter(parent=run, status="running").exists(), message="child running")
    run_cancel(run=Run.objects.get(parent=run), check_owner=False)
    run = wait_for(run.pk)
    idle()
    child = Run.objects.get(parent=run)
    assert child.status == "cancelled" and child.turns == 0
    assert run.cost_cents == 8.0
    assert tracker_cents("boss") == 12.0


def test_model_calls_in_flight_reserve_their_worst_case_so_the_day_budget_holds() -> None:
    from tests.runs_app.engine_support import start

    # Each call costs exactly its worst case: 1,000 output tokens (its max_tokens) at 10,000
    # cents per million, 10 cents; the input is free. Two calls sleep in the model at once;
    # a budget of 15 cents has room for one of them only, though none is spent yet.
    pricing = {"input_per_mtok_cents": 0, "output_per_mtok_cents": 10000}
    usage = {"input": 50, "output": 1000}
    configure(
        provider(
            "dear",
            [{"turns": [{"sleep_ms": 400}, {"say": "paid", "usage": usage}]}],
            pricing=pricing,
            max_tokens=1000,
        )  # fmt: skip
        + runtime("fifteen", max_cost_per_day_cents=15)
        + agent("dear", "scripted.dear", runtime="fifteen")
    )
    runs = [wait_for(r.pk) for r in [start("dear", "one"), start("dear", "two")]]
    assert sorted((r.status, r.error) for r in runs) == [
        ("completed", ""),
        ("failed", "Rate limit exceeded: daily cost budget exhausted"),
    ]
    assert tracker_cents("dear") == 10.0
    assert list(TrackerCost.objects.filter(tracker__key="dear").values_list("reserved_cents", flat=True)) == [
        0.0
    ]
    refused = next(r for r in runs if r.status == "failed")
    assert refused.turns == 0  # it never called the model
