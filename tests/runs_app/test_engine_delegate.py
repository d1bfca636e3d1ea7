"""`delegate` through the model tool path (SPEC §6.1, §6.2, §6.4, §3.4): admission in order, the
child run, and the exact texts handed back to the caller."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agents_app.gates import delegate_gates
from agents_app.models import ModelProvider
from agents_app.selectors import config_snapshot_forget
from agents_app.snapshot import AgentSpec, ConfigSnapshot, ProviderSpec
from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec
from policies_app.tracker import tracker_usage
from runs_app.engine.delegate import delegate_tool
from runs_app.models import MemoryEntry, Run
from tests.runs_app.engine_support import (
    agent,
    at,
    call_results,
    configure,
    engine,  # noqa: F401 - fixture
    finish,
    provider,
    start,
    transcript,
    wait_for,
    wait_until,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("engine")]

WORKER = [{"turns": [{"say": "{{agent}} did {{prompt}}"}]}]
TARGETS = (
    provider("worker", WORKER, model="w-1")
    + provider("failing", [{"turns": [{"error": "boom"}]}], model="f-1")
    + provider("blank", [{"turns": [{"say": " "}]}], model="b-1")
    + provider("slow", [{"turns": [{"sleep_ms": 3000}, {"say": "too late"}]}], model="s-1")
    + provider("napper", [{"turns": [{"sleep_ms": 400}, {"say": "{{agent}} napped on {{prompt}}"}]}])
    + provider(
        "memo",
        [
            {
                "turns": [
                    {
                        "tool_calls": [
                            {"name": "memory_store", "arguments": {"key": "k", "content": "{{prompt}}"}}
                        ]
                    },
                    {"tool_calls": [{"name": "memory_recall", "arguments": {"query": ""}}]},
                    {"say": "{{agent}}: {{tool_results}}"},
                ]
            }
        ],
    )  # fmt: skip
    + provider("calls", [{"turns": [{"tool_calls": [{"name": "file_list", "arguments": {}}]}, {"say": "x"}]}])
    + "[runtime_profiles.agentic]\nagentic = true\n"
    + "[runtime_profiles.quick]\ndelegation_timeout_secs = 1\n"
    + agent("a", "scripted.worker")
    + agent("b", "scripted.worker")
    + agent("ag", "scripted.worker", runtime="agentic")
    + agent("bad", "scripted.failing")
    + agent("empty", "scripted.blank")
    + agent("sleepy", "scripted.slow", runtime="quick")
    + agent("napper", "scripted.napper")
    + agent("memo", "scripted.memo", runtime="agentic")
    + agent("nonagentic", "scripted.calls")
)


def echo(*calls: dict[str, Any], match: str | None = None) -> dict[str, Any]:
    rule: dict[str, Any] = {"turns": [{"tool_calls": list(calls)}, {"say": "{{tool_results}}"}]}
    if match:
        rule["match"] = match
    return rule


def delegate(**arguments: Any) -> dict[str, Any]:
    return {"name": "delegate", "arguments": arguments}


def setup(*rules: dict[str, Any], boss_fields: str = "", extra: str = "", targets: str = TARGETS) -> None:
    configure(provider("boss", list(rules)) + agent("boss", "scripted.boss") + boss_fields + targets + extra)


def fail(error: str, output: str = "") -> dict[str, Any]:
    return {"success": False, "output": output, "error": error}


def ok(output: str) -> dict[str, Any]:
    return {"success": True, "output": output, "error": None}


ROSTER = "a, ag, b, bad, empty, memo, napper, nonagentic, sleepy"


# -- 6.1 checks in order -------------------------------------------------------------------------


def test_check_1_argument_messages() -> None:
    setup(
        echo(
            delegate(prompt="x"),
            delegate(agent="  ", prompt="x"),
            delegate(agent="a"),
            delegate(agent="a", prompt="   "),
            delegate(agent=" a ", prompt="trimmed"),
            delegate(action="bogus", agent="a", prompt="x"),
        )
    )
    run = finish("boss", "go")
    assert call_results(run) == [
        fail("Missing 'agent' parameter"),
        fail("'agent' parameter must not be empty"),
        fail("Missing 'prompt' parameter"),
        fail("'prompt' parameter must not be empty"),
        ok("[Agent 'a' (scripted/w-1)]\na did trimmed"),
        fail("Unknown action 'bogus'. Use delegate/check_result/list_results/cancel_task/await_sessions."),
    ]
    assert tracker_usage(key="boss")["actions_last_hour"] == 1


def test_check_2_unknown_agent_lists_the_callers_roster() -> None:
    setup(echo(delegate(agent="zz", prompt="x")))
    run = finish("boss", "go")
    assert call_results(run) == [fail(f"Unknown agent 'zz'. Available agents: {ROSTER}")]


def test_check_2_unknown_agent_with_an_empty_roster() -> None:
    setup(echo(delegate(agent="zz", prompt="x")), boss_fields="delegate_same_risk_profile = false\n")
    run = finish("boss", "go")
    assert call_results(run) == [fail("Unknown agent 'zz'. Available agents: (none configured)")]


def test_check_3_depth_pure_gate_and_engine() -> None:
    snap = ConfigSnapshot(
        providers={"scripted.p": ProviderSpec(type="scripted", alias="p")},
        risk_profiles={"r": RiskProfileSpec(alias="r", delegation_mode="allow")},
        runtime_profiles={"one": RuntimeProfileSpec(alias="one", max_delegation_depth=1)},
        agents={
            "c": AgentSpec(alias="c", model_provider="scripted.p", risk_profile="r"),
            "d": AgentSpec(alias="d", model_provider="scripted.p", risk_profile="r", runtime_profile="one"),
            "t": AgentSpec(alias="t", model_provider="scripted.p", risk_profile="r"),
        },
    )
    gates, _ = delegate_gates(snap, caller="c", target="t", caller_depth=3)
    assert gates[-1].message == (
        "Delegation depth limit reached (3/3). Cannot delegate further to prevent infinite loops."
    )
    gates, _ = delegate_gates(snap, caller="c", target="t", caller_depth=2)
    assert all(g.passed for g in gates)
    # the CALLER's runtime profile decides, and background drops the second sentence
    gates, _ = delegate_gates(snap, caller="d", target="t", caller_depth=1, background=True)
    assert gates[-1].message == "Delegation depth limit reached (1/1)."
    # check 2 comes first
    gates, _ = delegate_gates(snap, caller="c", target="zz", caller_depth=9)
    assert gates[-1].message == "Unknown agent 'zz'. Available agents: d, t"
    # check 7: an agentic target whose risk profile is not configured
    snap2 = ConfigSnapshot(
        providers=snap.providers,
        risk_profiles=snap.risk_profiles,
        runtime_profiles={"ag": RuntimeProfileSpec(alias="ag", agentic=True)},
        agents={
            "c": AgentSpec(alias="c", model_provider="scripted.p", risk_profile="r", delegates=()),
            "t": AgentSpec(alias="t", model_provider="scripted.p", risk_profile="gone", runtime_profile="ag"),
        },
    )
    from agents_app.snapshot import DelegateEntry

    snap2.agents["c"] = AgentSpec(
        alias="c", model_provider="scripted.p", risk_profile="r", delegates=(DelegateEntry("t"),)
    )
    gates, _ = delegate_gates(snap2, caller="c", target="t")
    assert gates[-1].message == "Agent 't' is agentic but risk_profile 'gone' is not configured"


def test_check_3_depth_through_the_engine_for_a_child_caller() -> None:
    """Delegate children have no `delegate` tool, so a caller at depth ≥ 1 exists only through
    REST (`/runs/{id}/delegate/`), which calls the same admission as the model's tool call."""
    setup(
        echo(delegate(agent="napper", prompt="x")),
        extra="[runtime_profiles.one]\nmax_delegation_depth = 1\n",
        targets=TARGETS.replace('[agents.napper]\nmodel_provider = "scripted.napper"\nrisk_profile = "team"\n',
                                '[agents.napper]\nmodel_provider = "scripted.napper"\nrisk_profile = "team"\n'
                                'runtime_profile = "one"\n'),
    )  # fmt: skip
    run = start("boss", "go")
    wait_until(lambda: Run.objects.filter(parent=run).exists(), message="child created")
    child = Run.objects.get(parent=run)
    assert child.depth == 1
    before = tracker_usage(key="boss")["actions_last_hour"]
    adm = delegate_tool(caller=child, args={"agent": "a", "prompt": "x"}, parent_call=None, via_api=True)
    assert adm.result is not None and adm.result.error == (
        "Delegation depth limit reached (1/1). Cannot delegate further to prevent infinite loops."
    )
    adm = delegate_tool(
        caller=child, args={"agent": "a", "prompt": "x", "background": True}, parent_call=None, via_api=True
    )
    assert adm.result is not None and adm.result.error == "Delegation depth limit reached (1/1)."
    assert tracker_usage(key="boss")["actions_last_hour"] == before
    wait_for(run.pk)


def test_check_4_forbidden_policy() -> None:
    extra = "[risk_profiles.closed]\n"
    configure(
        provider("boss", [echo(delegate(agent="a", prompt="x"), delegate(agent="zz", prompt="x"))])
        + agent("boss", "scripted.boss", risk="closed")
        + TARGETS
        + extra
    )
    run = finish("boss", "go")
    assert "delegate" in run.tools
    assert call_results(run) == [
        fail(
            'delegation is forbidden for caller "boss" by risk profile "closed" delegation_policy; '
            'set [risk_profiles.closed].delegation_policy mode = "allow"'
        ),
        fail("Unknown agent 'zz'. Available agents: (none configured)"),
    ]


def test_check_5_reachability_diagnostics() -> None:
    extra = (
        '[risk_profiles.other]\n[risk_profiles.other.delegation_policy]\nmode = "allow"\n'
        + agent("off", "scripted.worker", enabled=False)
        + agent("private", "scripted.worker", delegable=False)
        + agent("stranger", "scripted.worker", risk="other")
    )
    calls = [delegate(agent=t, prompt="x") for t in ("off", "private", "stranger", "boss")]
    setup(echo(*calls), extra=extra)
    run = finish("boss", "go")
    head = 'delegate target "{t}" is not reachable from "boss"'
    assert call_results(run) == [
        fail(head.format(t="off") + ": the target agent is disabled"),
        fail(head.format(t="private") + ": the target agent is not delegable"),
        fail(
            head.format(t="stranger")
            + ': different risk profile (caller uses "team", target uses "other"). delegate_same_risk_profile '
            "only reaches agents with the same risk profile; add an explicit [agents.boss].delegates entry "
            "with the intended mode, or change one agent's risk_profile."
        ),
        fail(
            head.format(t="boss")
            + "; add it to [agents.boss].delegates or share a risk profile with delegate_same_risk_profile enabled"
        ),
    ]
    assert tracker_usage(key="boss")["actions_last_hour"] == 0


def test_check_5_same_risk_profile_disabled() -> None:
    setup(echo(delegate(agent="a", prompt="x")), boss_fields="delegate_same_risk_profile = false\n")
    # the roster is empty, so 'a' is known but unreachable
    run = finish("boss", "go")
    assert call_results(run) == [
        fail(
            'delegate target "a" is not reachable from "boss": delegate_same_risk_profile is disabled and '
            "the target is not listed in [agents.boss].delegates"
        )
    ]


def test_check_6_independent_target_with_always_ask() -> None:
    extra = '[risk_profiles.asker]\nalways_ask = [" shell ", "", "file_write"]\n' + agent(
        "indie", "scripted.worker", risk="asker"
    )
    boss_fields = 'delegates = [{ agent = "indie", mode = "independent" }]\n'
    setup(echo(delegate(agent="indie", prompt="x"), delegate(parallel=["a", "indie"], prompt="x")),
          boss_fields=boss_fields, extra=extra)  # fmt: skip
    run = finish("boss", "go")
    refusal = (
        'delegate target "indie" cannot run in independent mode from "boss": risk profile "asker" has '
        'always_ask entries (shell, file_write). See the documentation, "Delegation & SubAgents" > '
        '"What\'s not supported".'
    )
    assert call_results(run) == [fail(refusal), fail(refusal)]
    assert not Run.objects.filter(parent=run).exists()
    assert tracker_usage(key="boss")["actions_last_hour"] == 0


def test_check_8_budget_and_nothing_spent_on_refusals() -> None:
    extra = "[runtime_profiles.tight]\nmax_actions_per_hour = 1\n"
    setup(
        echo(
            delegate(agent="zz", prompt="x"),
            delegate(agent="a", prompt="first"),
            delegate(agent="b", prompt="second"),
        ),
        boss_fields='runtime_profile = "tight"\n',
        extra=extra,
    )
    run = finish("boss", "go")
    assert call_results(run)[1:] == [
        ok("[Agent 'a' (scripted/w-1)]\na did first"),
        fail("Rate limit exceeded: action budget exhausted"),
    ]
    assert tracker_usage(key="boss")["actions_last_hour"] == 1


def test_check_8_readonly_caller() -> None:
    extra = '[risk_profiles.ro]\nlevel = "readonly"\n[risk_profiles.ro.delegation_policy]\nmode = "allow"\n'
    configure(
        provider("boss", [echo(delegate(agent="peer", prompt="x"))])
        + agent("boss", "scripted.boss", risk="ro")
        + provider("worker", WORKER)
        + agent("peer", "scripted.worker", risk="ro")
        + extra
    )
    run = finish("boss", "go")
    assert call_results(run) == [fail("Security policy: read-only mode, cannot perform 'delegate'")]


def test_check_9_provider_build_failure_spends_nothing() -> None:
    extra = provider("broken", [{"turns": [{"say": "fine"}]}]) + agent("brk", "scripted.broken")
    setup(echo(delegate(agent="brk", prompt="x")), extra=extra)
    # A script that cannot build is refused when saved (issue 16); one saved by an older
    # version can still be in the database, and the provider build must fail on it cleanly.
    ModelProvider.objects.filter(type="scripted", alias="broken").update(script=[{"turns": []}])
    config_snapshot_forget()  # a write without a revision, as an older version's row
    run = finish("boss", "go")
    assert call_results(run) == [
        fail(
            "Failed to create model_provider 'scripted' for agent 'brk': "
            "invalid script: script[0].turns: must be a non-empty list"
        )
    ]
    assert tracker_usage(key="boss")["actions_last_hour"] == 0


# -- outcomes ------------------------------------------------------------------------------------


def test_context_prompt_and_non_agentic_target_without_tools() -> None:
    setup(
        echo(
            delegate(agent="a", prompt="do it", context="some background"),
            delegate(agent="nonagentic", prompt="p"),
        )
    )
    run = finish("boss", "go")
    a = Run.objects.get(parent=run, agent="a")
    assert transcript(a)[0] == ("user", "[Context]\nsome background\n\n[Task]\ndo it")
    assert (a.kind, a.mode, a.execution, a.agentic, a.tools) == ("delegate", "bounded", "sync", False, [])
    assert a.session_key == f"delegate-{a.pk}"
    assert call_results(run) == [
        ok("[Agent 'a' (scripted/w-1)]\na did do it"),
        fail("Agent 'nonagentic' failed: model provider returned an invalid semantic completion."),
    ]
    # a non-agentic target's tool calls are never run
    assert not call_results(Run.objects.get(parent=run, agent="nonagentic"))


def test_a_delegate_runs_under_its_targets_tool_result_limit() -> None:
    # ZeroClaw: execute_agentic_applies_target_profile_tool_result_limit. The target's runtime
    # profile cuts tool results at 100 characters; the caller's (the default 6000) would not.
    limited = "[runtime_profiles.tight]\nagentic = true\nmax_tool_result_chars = 100\n"
    memo = agent("tightmemo", "scripted.memo", runtime="tight")
    setup(echo(delegate(agent="tightmemo", prompt="x" * 301)), extra=limited + memo)
    run = finish("boss", "go")
    assert run.status == "completed", run.error
    child = Run.objects.get(parent=run)
    full = "[tightmemo] k: " + "x" * 301
    cut = full[:100] + f"\n[... truncated: {len(full) - 100} more characters]"
    assert call_results(child, "memory_recall") == [ok(cut)]
    assert ("tool", cut) in transcript(child)  # what the target's model read
    assert call_results(run) == [ok(f"[Agent 'tightmemo' (scripted/memo-1, agentic)]\ntightmemo: {cut}")]


def test_agentic_header_and_memory_acts_on_the_targets_memory() -> None:
    setup(echo(delegate(agent="memo", prompt="remember this")))
    run = finish("boss", "go")
    child = Run.objects.get(parent=run)
    assert child.agentic and "delegate" not in child.tools and "memory_store" in child.tools
    assert "model_switch" in run.tools and "model_switch" not in child.tools  # top-level runs only
    assert call_results(run) == [
        ok("[Agent 'memo' (scripted/memo-1, agentic)]\nmemo: [memo] k: remember this")
    ]
    assert list(MemoryEntry.objects.values_list("agent", "key", "content")) == [
        ("memo", "k", "remember this")
    ]


def test_fallback_header_and_warning() -> None:
    targets = (
        provider("primary", [{"turns": [{"error": "down"}]}], model="p-1", fallback=["scripted.other"])
        + provider("other", WORKER, model="o-1")
        + "[runtime_profiles.agentic]\nagentic = true\n"
        + agent("fb", "scripted.primary")
        + agent("fbag", "scripted.primary", runtime="agentic")
    )
    setup(echo(delegate(agent="fb", prompt="x"), delegate(agent="fbag", prompt="y")), targets=targets)
    run = finish("boss", "go")
    warning = (
        "\n\nWarning: The delegated agent recovered through a provider fallback. "
        "Provider failure details were logged and omitted from this result."
    )
    assert call_results(run) == [
        ok("[Agent 'fb' (requested: scripted.primary/p-1; served: scripted.other/o-1)]\nfb did x" + warning),
        ok(
            "[Agent 'fbag' (requested: scripted.primary/p-1; served: scripted.other/o-1, agentic)]\nfbag did y"
            + warning
        ),
    ]


def test_invalid_completion_failure_and_timeout() -> None:
    setup(
        echo(
            delegate(agent="empty", prompt="x"),
            delegate(agent="bad", prompt="x"),
            delegate(agent="sleepy", prompt="x"),
        )
    )
    run = finish("boss", "go")
    bad = Run.objects.get(parent=run, agent="bad")
    assert call_results(run) == [
        fail("Agent 'empty' failed: model provider returned an invalid semantic completion."),
        fail(f"Agent 'bad' failed: {bad.error}"),
        fail("Agent 'sleepy' timed out after 1s"),
    ]
    assert bad.error.startswith("All model providers/models failed after 2 failure event(s).")
    sleepy = Run.objects.get(parent=run, agent="sleepy")
    assert (sleepy.status, sleepy.timeout_secs) == ("timed_out", 1)


def test_bounded_shares_the_callers_tracker_and_workspace() -> None:
    extra = (
        '[risk_profiles.other]\nallowed_commands = ["*"]\n'
        + agent("indie", "scripted.worker", risk="other")
        + agent("far", "scripted.worker", risk="other")
    )
    boss_fields = 'delegates = [{ agent = "indie", mode = "independent" }, { agent = "far" }]\n'
    setup(
        echo(
            delegate(agent="a", prompt="x"),
            delegate(agent="indie", prompt="x"),
            delegate(agent="far", prompt="x"),
        ),
        boss_fields=boss_fields,
        extra=extra,
    )
    run = finish("boss", "go")
    assert all(r["success"] for r in call_results(run)), call_results(run)
    a = Run.objects.get(parent=run, agent="a")
    indie = Run.objects.get(parent=run, agent="indie")
    far = Run.objects.get(parent=run, agent="far")
    assert (a.mode, a.tracker_key, a.workspace) == ("bounded", "boss", run.workspace)
    assert (indie.mode, indie.tracker_key) == ("independent", "indie")
    assert indie.results_dir == a.results_dir == str(Path(run.workspace) / "delegate_results")
    assert indie.workspace.endswith("agents/indie/workspace")
    assert (far.mode, far.tracker_key) == ("bounded", "boss")
    assert far.workspace.endswith("agents/far/workspace")
    assert a.memory_agent == "a"


# -- 6.2 background --------------------------------------------------------------------------------


def _mirror(run: Run, task_id: Any) -> Path:
    return Path(run.workspace) / "delegate_results" / f"{task_id}.json"


def test_background_three_lines_and_json_mirror_on_start_and_end() -> None:
    setup(echo(delegate(agent="napper", prompt="job", background=True)))
    run = finish("boss", "go")
    child = Run.objects.get(parent=run)
    assert call_results(run) == [
        ok(
            "Background task started for agent 'napper'.\n"
            f"task_id: {child.pk}\n"
            f"Use action='check_result' with task_id='{child.pk}' to retrieve the result."
        )
    ]
    assert child.execution == "background"
    path = _mirror(run, child.pk)
    wait_until(path.exists, message="mirror written")
    first = json.loads(path.read_text())
    if Run.objects.get(pk=child.pk).status != "completed":
        assert first["status"] == "running" and first["finished_at"] is None
    child = wait_for(child.pk)

    def terminal_mirror() -> bool:
        return json.loads(path.read_text())["status"] == "completed"

    wait_until(terminal_mirror, message="terminal mirror")
    data = json.loads(path.read_text())
    assert data == {
        "task_id": str(child.pk),
        "agent": "napper",
        "status": "completed",
        "output": "[Agent 'napper' (scripted/napper-1)]\nnapper napped on job",
        "error": None,
        "started_at": at(child.started_at).isoformat(),
        "finished_at": at(child.finished_at).isoformat(),
    }
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_background_mirror_is_running_while_the_task_runs() -> None:
    setup(
        {"turns": [
            {"tool_calls": [delegate(agent="sleepy", prompt="job", background=True)]},
            {"sleep_ms": 300},
            {"say": "{{tool_results}}"},
        ]}
    )  # fmt: skip
    run = start("boss", "go")
    wait_until(lambda: Run.objects.filter(parent=run).exists(), message="task created")
    child = Run.objects.get(parent=run)
    path = _mirror(run, child.pk)
    wait_until(path.exists, message="mirror written")
    data = json.loads(path.read_text())
    assert (data["status"], data["output"], data["error"], data["finished_at"]) == ("running", "", None, None)
    child = wait_for(child.pk)
    assert child.status == "timed_out"
    wait_until(lambda: json.loads(path.read_text())["status"] == "timed_out", message="timed_out mirror")
    assert json.loads(path.read_text())["error"] == "Agent 'sleepy' timed out after 1s"
    wait_for(run.pk)


def test_max_background_cap() -> None:
    setup(
        echo(
            delegate(agent="napper", prompt="one", background=True),
            delegate(agent="napper", prompt="two", background=True),
        ),
        extra="[delegate]\nmax_background = 1\n",
    )
    run = finish("boss", "go")
    results = call_results(run)
    assert results[0]["success"] is True
    assert results[1] == fail(
        "Too many background delegations in flight (limit 1). Wait for some to finish (check_result) or "
        "cancel one (cancel_task) before starting more."
    )
    assert Run.objects.filter(parent=run).count() == 1
    assert tracker_usage(key="boss")["actions_last_hour"] == 1


# -- 6.4 parallel ----------------------------------------------------------------------------------


def test_parallel_blocks_failed_child_and_overall_error() -> None:
    setup(echo(delegate(parallel=["a", " ", "bad", "b"], prompt="go", context="ctx")))
    run = finish("boss", "go")
    bad = Run.objects.get(parent=run, agent="bad")
    output = (
        "[Parallel delegation: 3 agents]\n\n"
        "--- a (success=true) ---\n[Agent 'a' (scripted/w-1)]\na did go\n\n"
        f"--- bad (success=false) ---\nError: Agent 'bad' failed: {bad.error}\n\n"
        "--- b (success=true) ---\n[Agent 'b' (scripted/w-1)]\nb did go"
    )
    assert call_results(run) == [fail("One or more parallel agents failed", output)]
    assert {c.execution for c in Run.objects.filter(parent=run)} == {"parallel"}
    assert transcript(Run.objects.get(parent=run, agent="a"))[0] == ("user", "[Context]\nctx\n\n[Task]\ngo")
    assert tracker_usage(key="boss")["actions_last_hour"] == 3


def test_parallel_admission_is_all_or_nothing() -> None:
    extra = agent("off", "scripted.worker", enabled=False)
    setup(
        echo(
            delegate(parallel=["a", "zz"], prompt="go"),
            delegate(parallel=["a", "off"], prompt="go"),
            delegate(parallel=[" ", ""], prompt="go"),
            delegate(parallel=["a"], prompt=" "),
        ),
        extra=extra,
    )
    run = finish("boss", "go")
    assert call_results(run) == [
        fail(f"Unknown agent 'zz' in parallel list. Available: {ROSTER}"),
        fail('delegate target "off" is not reachable from "boss": the target agent is disabled'),
        fail("'parallel' array must contain at least one agent name"),
        fail("'prompt' parameter must not be empty"),
    ]
    assert not Run.objects.filter(parent=run).exists()
    assert tracker_usage(key="boss")["actions_last_hour"] == 0


def test_parallel_children_run_under_the_callers_authorization() -> None:
    setup(echo(delegate(parallel=["napper", "napper", "napper"], prompt="p")))
    run = finish("boss", "go")
    assert run.status == "completed"
    children = list(Run.objects.filter(parent=run))
    assert len(children) == 3
    assert all((c.tracker_key, c.mode, c.workspace) == ("boss", "bounded", run.workspace) for c in children)
    assert tracker_usage(key="boss")["actions_last_hour"] == 3
    block = "--- napper (success=true) ---\n[Agent 'napper' (scripted/napper-1)]\nnapper napped on p"
    assert run.output == "[Parallel delegation: 3 agents]\n\n" + "\n\n".join([block] * 3)
