"""Advancing a run (ENGINE.md): claim it, then model turns until it finishes or must wait.

    claim ─▶ resume ─▶ limits ─▶ take_turn ─▶ decide ─▶ apply ─┐
               ▲  (the last turn's calls done?                   │ Continue: local tools ran
               │   else the run waits, holding no worker)       │
               └─────────────────────────────────────────────────┘
                                              Finish / Wait: the task ends

A run that waits (children, approval, sessions_yield, await) holds no worker: its task ends,
and what completes its last pending call queues it again (`settle`). Only `take_turn` and
the local tools run outside a database transaction; they are what takes time."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from django.db.models import F
from django.utils import timezone

from policies_app.policy import TOOL_SEARCH
from policies_app.tracker import (
    BudgetExhausted,
    cost_refusal,
    tracker_check_cost,
    tracker_reserve_cost,
    tracker_settle_cost,
)
from runs_app import events, runlog
from runs_app.engine import dispatch, heartbeat, inflight, rows, transitions
from runs_app.engine import messages as msg
from runs_app.engine.budget import output_budget_refusal, worst_case_cents
from runs_app.engine.calls import (
    Step,
    Stopped,
    admit,
    admit_and_wait,
    blocked_by,
    execute,
    record_calls,
    resume,
    wait,
)
from runs_app.engine.cancel import end_with_descendants
from runs_app.engine.claims import claim
from runs_app.engine.decide import (
    INVALID_COMPLETION,
    Continue,
    Decision,
    Finish,
    RunState,
    Turn,
    Wait,
    decide,
)
from runs_app.engine.frozen import FrozenPolicy, policy_of, provider_of
from runs_app.engine.providers import (
    AllProvidersFailed,
    ChatMessage,
    ChatRequest,
    InvalidCompletion,
    ModelReply,
    ProviderError,
    ToolSpec,
    cost_cents,
)
from runs_app.engine.settle import run_finish
from runs_app.engine.tools import mcp_tools
from runs_app.engine.tools.registry import is_local, tool_specs
from runs_app.engine.transcript import Transcript, append, load
from runs_app.models import Run

log = logging.getLogger(__name__)


def advance_run(run_id: Any) -> None:
    """The body of the task `runs.advance_run`: claim the run, and step it while it can go on."""
    run = claim(run_id)
    if run is not None:
        _holding(run, None)


def continue_run(run_id: Any, owner: str, answer: dict[str, Any]) -> None:
    """The body of the task `runs.continue_run`: the answer of a model call that was in
    flight (`inflight`) reached a worker, which goes on from it; recording the turn takes the
    run over (`_record_turn`). If the run stopped meanwhile (cancelled, timed out, queued
    again by the reaper), the answer is dropped; what the call cost is recorded all the same."""
    turn = Turn.from_json(answer)
    run = rows.step_rows(
        Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, owner=owner, model_call_at__isnull=False)
    ).one()
    if run is None:
        stopped = Run.objects.filter(pk=run_id).one()
        if stopped is not None:
            _settle_reservation(stopped, turn, 0.0 if turn.failure else _cost(policy_of(stopped), turn))
        return
    _holding(run, turn)


def _holding(run: Run, answered: Turn | None) -> None:
    with heartbeat.holding(run.pk), runlog.bound(run):
        try:
            drive(run, answered)
        except Stopped:
            pass
        except Exception as exc:
            log.exception("run %s crashed", run.pk)
            run_finish(
                run.pk, status=Run.Status.FAILED, error=f"internal error: {exc.__class__.__name__}: {exc}"
            )


def drive(claimed: Run, answered: Turn | None = None) -> None:
    """Model turns while the run can go on. The first works on the row as the claim read it;
    each later one reads the row again (a cancel, a steer, a model_switch may have changed it).
    `answered`: the turn of a call that was in flight, to apply first. The task ends when the
    run finishes, waits, or has its next call in flight."""
    transcript = load(claimed.pk, getattr(claimed, "last_seq", None))
    step: Step | None = Step(claimed, policy_of(claimed), transcript)
    turn = answered
    while step is not None:
        if turn is None:
            if not resume(step) or limit_reached(step):
                return
            turn = take_turn(step)
            if turn is None:  # in flight: its answer continues the run (`continue_run`)
                return
        if not apply(step, turn, decide(state_of(step), turn)):
            return
        turn = None
        step = current(claimed.pk, transcript)


def current(run_id: Any, transcript: Transcript) -> Step | None:
    """The run as it is now, if it is still running and ours."""
    run = rows.step_rows(
        Run.objects.filter(pk=run_id, status=Run.Status.RUNNING, owner=heartbeat.WORKER_ID)
    ).one()
    return Step(run, policy_of(run), transcript) if run is not None else None


def state_of(step: Step) -> RunState:
    mcp = step.mcp_callable()
    search = [TOOL_SEARCH] if step.mcp_offer() and mcp_tools.tool_search_allowed(step.mcp) else []
    return RunState(
        kind=step.run.kind,
        agentic=step.run.agentic,
        tools=frozenset(step.run.tools) | frozenset(mcp) | frozenset(search),
        risk=step.policy.risk,
        dedup_exempt=frozenset(step.policy.runtime.tool_call_dedup_exempt),
        gated=mcp_tools.gated(mcp, step.policy.risk),
        mcp_down=tuple(sorted(step.mcp_down.items())),
    )


def offered_tools(step: Step) -> tuple[list[ToolSpec], list[ChatMessage]]:
    """The tool schemas of the model call, and (deferred MCP tools) the system prompt's list
    of what tool_search can load, sent with the call but not kept in the conversation."""
    run = step.run
    if not run.agentic:
        return [], []
    specs = tool_specs(run.tools, roster=step.policy.roster)
    offer = step.mcp_offer()
    if not offer:
        return specs, []
    if not step.policy.mcp_deferred:
        return specs + [o.spec for o in offer.values()], []
    if not mcp_tools.tool_search_allowed(step.mcp):
        return specs, []
    active = step.mcp_callable()
    deferred = {n: o for n, o in offer.items() if n not in active}
    specs += [mcp_tools.TOOL_SEARCH_SPEC] + [o.spec for o in active.values()]
    return specs, [ChatMessage("system", mcp_tools.deferred_prompt(deferred))] if deferred else []


def limit_reached(step: Step) -> bool:
    """Ends the run when a limit says so: its iteration cap, its deadline, the output-token
    budget of its tree, its tracker's daily cost."""
    run, runtime = step.run, step.policy.runtime
    cap = runtime.effective_max_tool_iterations
    if run.turns >= cap:
        return _finish(step, Finish(Run.Status.FAILED, error=msg.max_iterations(cap)))
    if run.deadline and timezone.now() >= run.deadline:
        end_with_descendants(run, status=Run.Status.TIMED_OUT, error=f"timed out after {run.timeout_secs}s")
        return True
    refusal = output_budget_refusal(run)
    if refusal:
        return _finish(step, Finish(Run.Status.FAILED, error=refusal))
    try:
        check_day_cost(run, runtime.max_cost_per_day_cents)
    except BudgetExhausted as exc:
        return _finish(step, Finish(Run.Status.FAILED, error=exc.message))
    return False


def check_day_cost(run: Run, max_cost_per_day_cents: int) -> None:
    """The day's cost budget of the run's tracker, as the run's read found it (`rows`): a
    priced call reserves its worst case before it starts, checked again exactly then."""
    spent = getattr(run, "day_cost_cents", None)
    if spent is None:  # a row read without it
        tracker_check_cost(key=run.tracker_key, max_cost_per_day_cents=max_cost_per_day_cents)
    else:
        cost_refusal(spent, max_cost_per_day_cents)


def _finish(step: Step, decision: Finish) -> bool:
    run_finish(step.run, status=decision.status, output=decision.output, error=decision.error,
               owner=step.run.owner)  # fmt: skip
    return True


def take_turn(step: Step) -> Turn | None:
    """One model call, outside any transaction: the run's conversation in, a Turn out. A real
    provider's call is handed to the event loop instead (None: the answer will come back as a
    task, `continue_run`); an instant one (scripted) answers here."""
    run = step.run
    tools, prompt = offered_tools(step)
    request = ChatRequest(
        messages=prompt + list(step.transcript.messages),
        tools=tools,
        agent=run.agent,
        prompt=run.prompt,
        turn_index=run.turns,
        tool_results=_last_tool_results(step) if run.turns else [],
    )
    # Reserved first, so that calls in flight at once cannot overshoot the day's budget together.
    worst = worst_case_cents(step.policy, request)
    day = None
    if worst:
        try:
            day = tracker_reserve_cost(
                key=run.tracker_key,
                cents=worst,
                max_cost_per_day_cents=step.policy.runtime.max_cost_per_day_cents,
            )
        except BudgetExhausted as exc:
            return Turn(failure=exc.message)
    asked = Turn(requested_at=timezone.now().isoformat(), reserved=worst, reserved_on=day)
    provider = provider_of(run)
    if provider.instant:
        try:
            return answer_of(run, asked, provider.complete(request), None)
        except ProviderError as exc:
            return answer_of(run, asked, None, exc)
    send_off(step, asked, provider.acomplete(request))
    return None


def send_off(step: Step, asked: Turn, call: Any) -> None:
    """Hand a model call to the event loop. The run is marked as having a call in flight (so
    that the reaper queues it again should this process die); the answer is sent to a worker
    as `runs.continue_run` for this owner."""
    run, owner, now = step.run, heartbeat.WORKER_ID, timezone.now()
    if not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING, owner=owner).update(
        model_call_at=now, heartbeat_at=now
    ):
        call.close()
        _settle_reservation(run, asked, 0.0)
        raise Stopped

    def answered(reply: ModelReply | None, exc: BaseException | None) -> None:
        continue_with(run.pk, owner, answer_of(run, asked, reply, exc))

    inflight.submit(run.pk, call, answered)


def continue_with(run_id: Any, owner: str, turn: Turn) -> None:
    dispatch.dispatcher().send(dispatch.CONTINUE_TASK, [str(run_id), owner, turn.as_json()])


def answer_of(run: Run, asked: Turn, reply: ModelReply | None, exc: BaseException | None) -> Turn:
    """The Turn of a model call: its reply, or why there is none."""
    asked = dataclasses.replace(asked, answered_at=timezone.now().isoformat())
    if reply is None:
        if isinstance(exc, ProviderError):  # AllProvidersFailed included
            invalid = (
                exc.invalid_completion
                if isinstance(exc, AllProvidersFailed)
                else isinstance(exc, InvalidCompletion)
            )
            failure = INVALID_COMPLETION if invalid else str(exc)
        else:
            invalid, failure = False, f"internal error: {exc.__class__.__name__}: {exc}"
        return dataclasses.replace(asked, failure=failure, invalid=invalid)
    return dataclasses.replace(
        asked,
        text=reply.text,
        calls=tuple(reply.tool_calls) if run.agentic else (),  # a one-call delegate offers no tools
        usage=reply.usage,
        provider_ref=reply.provider_ref,
        model=reply.model,
    )


def _cost(policy: FrozenPolicy, turn: Turn) -> float:
    return cost_cents(policy.chain.get(turn.provider_ref, policy.provider), turn.usage)


def _settle_reservation(run: Run, turn: Turn, cents: float) -> None:
    if turn.reserved_on is not None:  # a priced call: it reserved its worst case first
        tracker_settle_cost(key=run.tracker_key, day=turn.reserved_on, reserved=turn.reserved, cents=cents)


def _last_tool_results(step: Step) -> list[str]:
    """The outputs of the previous turn's tool calls (SPEC §8.1's `{{tool_results}}`): the tool
    messages after the last model turn."""
    results: list[str] = []
    for m in reversed(step.transcript.messages):
        if m.role == "assistant":
            break
        if m.role == "tool":
            results.append(m.content)
    return results[::-1]


def apply(step: Step, turn: Turn, decision: Decision) -> bool:
    """Write a model turn and its decision in one transaction: usage and cost, the model's
    message, the run's end or its tool calls (and, when none runs locally, the children they
    admit and the wait). The turn's local tools then run outside it (`execute`). True when
    the run goes on to its next model turn.

    Should handling the calls fail (a bug), the turn is recorded alone in a transaction of
    its own before the error goes on: it was paid for."""
    ready: list[Any] = []
    go_on = False
    if turn.failure is not None:
        _settle_reservation(step.run, turn, 0.0)
    before = _turn_state(step)
    recorded = False
    try:
        with events.tree_tx(step.root_id, durable=True):
            if turn.failure is not None:
                recorded = True
                if isinstance(decision, Finish):
                    return not _finish(step, decision)
                ready = record_calls(step, decision.calls)
                if not any(is_local(r.name) for r in ready):
                    go_on, ready = admit_and_wait(step, ready), []
            elif isinstance(decision, Finish):
                recorded = _finish_turn(step, turn, decision)
                if recorded:
                    return False
            else:
                recorded = True
                go_on, ready = _continue_turn(step, turn, decision)
    except _NotOurs:
        _restore(step, before)
        _settle_reservation(step.run, turn, _cost(step.policy, turn))
        raise Stopped from None
    except Exception:
        if recorded and turn.failure is None:
            _restore(step, before)
            with events.tree_tx(step.root_id, durable=True):
                if not _record_turn(step, turn):
                    raise Stopped from None
        raise
    if not recorded:
        raise Stopped
    return execute(step, ready) if ready else go_on


class _NotOurs(Exception):
    """The run stopped being ours while its turn was written: the transaction is undone."""


def _continue_turn(step: Step, turn: Turn, decision: Continue | Wait) -> tuple[bool, list[Any]]:
    """Inside the turn's transaction, a turn with tool calls: its message and events, the
    calls, and, when none runs locally, the children they admit; then one UPDATE of the run
    that records the turn and, when the run must wait, its wait. Returns (go on, the local
    calls to run). Raises `_NotOurs` when that UPDATE finds the run no longer ours."""
    run = step.run
    owner, cost = run.owner, _cost(step.policy, turn)
    _settle_reservation(run, turn, cost)
    _turn_recorded(step, turn, cost)
    ready = record_calls(step, decision.calls)
    fields = _turn_fields(turn, cost)
    if not any(is_local(r.name) for r in ready):
        admit(step, ready)
        blocked = blocked_by(step.calls)
        if blocked is None:
            transitions.lock_run(run.pk)
            blocked = transitions.blocking(run.pk)
        if blocked[0]:
            if not wait(step, blocked, if_owner=owner, **fields):
                raise _NotOurs
            return False, []
        ready = []
    if not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING, owner=owner).update(
        owner=heartbeat.WORKER_ID, **fields
    ):
        raise _NotOurs
    run.owner = heartbeat.WORKER_ID
    return not ready, ready


def _turn_state(step: Step) -> tuple[dict[str, Any], int, int]:
    run = step.run
    fields = {f: getattr(run, f) for f in TURN_FIELDS}
    return fields, len(step.transcript.messages), step.transcript.next_seq


def _restore(step: Step, state: tuple[dict[str, Any], int, int]) -> None:
    fields, messages, next_seq = state
    for name, value in fields.items():
        setattr(step.run, name, value)
    del step.transcript.messages[messages:]
    step.transcript.next_seq = next_seq


TURN_FIELDS = ("owner", "model_call_at", "turns", "input_tokens", "output_tokens", "cost_cents",
               "provider_served", "model")  # fmt: skip


def _turn_fields(turn: Turn, cost: float) -> dict[str, Any]:
    """The run's columns a model turn changes, as the UPDATE that records it writes them."""
    return {
        "model_call_at": None,
        "turns": F("turns") + 1,
        "input_tokens": F("input_tokens") + turn.usage.input_tokens,
        "output_tokens": F("output_tokens") + turn.usage.output_tokens,
        "cost_cents": F("cost_cents") + cost,
        "provider_served": turn.provider_ref,
        "model": turn.model,
        "heartbeat_at": timezone.now(),
    }


def _finish_turn(step: Step, turn: Turn, decision: Finish) -> bool:
    """Inside the turn's transaction: a turn that ends the run, recorded by the UPDATE that
    ends it. False when the run stopped being ours meanwhile (its cost is recorded anyway)."""
    run = step.run
    cost = _cost(step.policy, turn)
    _settle_reservation(run, turn, cost)
    # What the run hands back is worked out from its copy, which must name who served it.
    run.provider_served, run.model = turn.provider_ref, turn.model
    return run_finish(
        run, status=decision.status, output=decision.output, error=decision.error, owner=run.owner,
        frm=(Run.Status.RUNNING,), recorded=lambda: _turn_recorded(step, turn, cost), **_turn_fields(turn, cost),
    )  # fmt: skip


def _record_turn(step: Step, turn: Turn) -> bool:
    """Inside the turn's transaction: the run's usage, the model's message and its events,
    and the call's cost on the tracker. False when the run stopped being ours meanwhile (the
    cost is recorded anyway: the call was made)."""
    run = step.run
    cost = _cost(step.policy, turn)
    _settle_reservation(run, turn, cost)
    # The run is ours, or, for the answer of a call in flight, the worker's that sent it off:
    # this UPDATE takes it over.
    if not Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING, owner=run.owner).update(
        owner=heartbeat.WORKER_ID, **_turn_fields(turn, cost)
    ):
        return False
    run.owner = heartbeat.WORKER_ID
    _turn_recorded(step, turn, cost)
    return True


def _turn_recorded(step: Step, turn: Turn, cost: float) -> None:
    """Once the run's UPDATE recorded a turn: its message and events, and the run's copy."""
    run = step.run
    events.emit(
        run,
        "model.request",
        {"turn": run.turns, "provider": run.provider_ref, "requested_at": turn.requested_at},
    )
    append(run.pk, step.transcript, [ChatMessage("assistant", turn.text, list(turn.calls))])
    events.emit(
        run,
        "model.response",
        {
            "turn": run.turns,
            "text": turn.text[:2000],
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in turn.calls],
            "usage": {"input": turn.usage.input_tokens, "output": turn.usage.output_tokens},
            "cost_cents": cost,
            "provider": turn.provider_ref,
            "model": turn.model,
            "answered_at": turn.answered_at,
        },
    )
    # Under the run's ids in the structured logs (runlog), like every record its worker writes.
    log.info(
        "model turn %s: %s tool call(s), %s input and %s output tokens, model %s",
        run.turns, len(turn.calls), turn.usage.input_tokens, turn.usage.output_tokens, turn.model,
    )  # fmt: skip
    run.model_call_at = None
    run.turns += 1
    run.input_tokens += turn.usage.input_tokens
    run.output_tokens += turn.usage.output_tokens
    run.cost_cents += cost
    run.provider_served, run.model = turn.provider_ref, turn.model
