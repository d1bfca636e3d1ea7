"""`delegate` (SPEC §6): sync, background and parallel delegation, and the task actions.

Admission runs the shared gates of `agents_app.gates` in the order of §6.1; nothing is spent
on a refusal (the budget record is rolled back when a later check refuses)."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from django.db import transaction
from django.utils import timezone

from agents_app.gates import delegate_gates
from agents_app.reachability import roster_text
from agents_app.selectors import config_snapshot_get
from agents_app.snapshot import AgentSpec, ConfigSnapshot
from policies_app.policy import (
    bounded_delegate_registry,
    effective_always_ask,
    independent_delegate_registry,
    mcp_ceiling,
    readonly_refusal,
)
from policies_app.specs import LEVEL_RANK, RiskProfileSpec
from policies_app.tracker import BudgetExhausted
from runs_app import events
from runs_app.engine import dispatch, outcomes, results
from runs_app.engine import messages as msg
from runs_app.engine.admission import Admission, answer, flag, refuse
from runs_app.engine.budget import spend_action
from runs_app.engine.children import agent_workspace, create_run
from runs_app.engine.frozen import FrozenPolicy, policy_of, provider_chain
from runs_app.engine.providers import ProviderError, build_provider
from runs_app.engine.settle import mirror_later
from runs_app.engine.tools.base import ToolResult
from runs_app.models import TERMINAL_STATUSES, Run, ToolCall

ACTIONS = ("delegate", "check_result", "list_results", "cancel_task", "await_sessions")
GATE_CODES = {"not_found": "not_found", "policy": "policy", "error": "error"}


def delegate_tool(
    *,
    caller: Run,
    args: dict[str, Any],
    parent_call: ToolCall | None,
    via_api: bool = False,
    user: Any = None,
) -> Admission:
    action = args.get("action")
    action = "delegate" if action is None else action
    if action not in ACTIONS:
        return refuse(
            f"Unknown action '{action}'. Use delegate/check_result/list_results/cancel_task/await_sessions.",
            "invalid",
        )
    if action == "check_result":
        return answer(results.check_result(args.get("task_id"), caller))
    if action == "list_results":
        return answer(results.list_results(caller))
    if action == "cancel_task":
        return answer(results.cancel_task(args.get("task_id"), caller))
    if action == "await_sessions":
        return _await(caller, args, parent_call)
    if args.get("parallel") is not None:
        return _parallel(caller, args, parent_call, via_api, user)
    return _single(caller, args, parent_call, via_api, user)


def _await(caller: Run, args: dict[str, Any], parent_call: ToolCall | None) -> Admission:
    checked = results.validate_await(args)
    if isinstance(checked, ToolResult):
        return Admission(result=checked, code="invalid")
    ids, timeout_ms = checked
    outcome = outcomes.await_outcome(ids, caller=caller, final=timeout_ms == 0 or parent_call is None)
    if outcome is not None:
        return Admission(result=outcome)
    assert parent_call is not None
    deadline = timezone.now() + timedelta(milliseconds=timeout_ms)
    ToolCall.objects.filter(pk=parent_call.pk).update(arguments={**args, "task_ids": ids})
    parent_call.arguments = {**args, "task_ids": ids}
    dispatch.later(dispatch.EXPIRE_CALL_TASK, [parent_call.pk], countdown=timeout_ms / 1000)
    return Admission(code="pending", wait_kind="await", deadline=deadline)


def _arguments(args: dict[str, Any], *, need_agent: bool) -> tuple[str, str, str] | Admission:
    agent = args.get("agent")
    if need_agent:
        if agent is None:
            return refuse("Missing 'agent' parameter", "invalid")
        if not isinstance(agent, str) or not agent.strip():
            return refuse("'agent' parameter must not be empty", "invalid")
    prompt = args.get("prompt")
    if prompt is None:
        return refuse("Missing 'prompt' parameter", "invalid")
    if not isinstance(prompt, str) or not prompt.strip():
        return refuse("'prompt' parameter must not be empty", "invalid")
    context = args.get("context") or ""
    for field, value in (("prompt", prompt), ("context", context)):
        if (too_long := msg.too_long(field, value)) is not None:
            return refuse(too_long, "invalid")
    return (
        (agent.strip() if isinstance(agent, str) else ""),
        prompt,
        context if isinstance(context, str) else "",
    )


def _gate(
    snap: ConfigSnapshot, caller: Run, target: str, *, background: bool, mode: str | None = None
) -> Any:
    gates, child_mode = delegate_gates(
        snap, caller=caller.agent, target=target, caller_depth=caller.depth, background=background, mode=mode
    )
    refusal = next((g for g in gates if not g.passed), None)
    if refusal is not None:
        return refuse(refusal.message, GATE_CODES.get(refusal.kind, "policy"))
    return child_mode


def _caller_policy(caller: Run) -> FrozenPolicy:
    return policy_of(caller)


def _not_available(caller: Run) -> Admission | None:
    if "delegate" not in caller.tools:
        return refuse("Tool 'delegate' is not available to this agent", "policy")
    return None


def _spend(caller: Run, policy: FrozenPolicy, count: int) -> Admission | None:
    if policy.risk.level == "readonly":
        return refuse(readonly_refusal("delegate"), "policy")
    try:
        for _ in range(count):
            spend_action(key=caller.tracker_key, runtime=policy.runtime)
    except BudgetExhausted as exc:
        transaction.set_rollback(True)
        return refuse(exc.message, "budget")
    return None


def _child_policy(
    snap: ConfigSnapshot, caller: Run, caller_policy: FrozenPolicy, target: AgentSpec, mode: str
) -> tuple[FrozenPolicy, list[str], str, str]:
    """(policy, tools, tracker key, workspace) of a delegate child (SPEC §3.4)."""
    target_risk = snap.risk_profiles.get(target.risk_profile) or RiskProfileSpec(alias=target.risk_profile)
    target_runtime = snap.runtime_of(target)
    provider = snap.providers[target.model_provider]
    chain = provider_chain(snap, provider)
    agentic = target_runtime.agentic
    if mode == "independent":
        # Its own MCP servers, from its own bundles, under its own policy.
        policy = FrozenPolicy(
            risk=target_risk, runtime=target_runtime, provider=provider, chain=chain,
            mcp=snap.mcp_servers_of(target), mcp_deferred=snap.mcp.deferred_loading,
        )  # fmt: skip
        tools = list(independent_delegate_registry(target_risk)) if agentic else []
        return policy, tools, target.alias, agent_workspace(target)
    # Bounded: the caller is the ceiling. Its level and budget apply; a tool either side
    # gates behind an operator stays gated.
    caller_risk = caller_policy.risk
    level = min(caller_risk.level, target_risk.level, key=lambda lv: LEVEL_RANK[lv])
    asks = tuple(dict.fromkeys(effective_always_ask(caller_risk) + effective_always_ask(target_risk)))
    risk = dataclasses.replace(caller_risk, level=level, always_ask=asks)
    runtime = dataclasses.replace(
        target_runtime,
        max_actions_per_hour=caller_policy.runtime.max_actions_per_hour,
        max_cost_per_day_cents=caller_policy.runtime.max_cost_per_day_cents,
    )
    tools = list(bounded_delegate_registry(caller.tools, caller_risk, target_risk)) if agentic else []
    workspace = caller.workspace if caller_risk.alias == target_risk.alias else agent_workspace(target)
    # The caller's MCP servers, narrowed by the target's exclusions as well (the `__` rule).
    policy = FrozenPolicy(
        risk=risk, runtime=runtime, provider=provider, chain=chain, mcp=caller_policy.mcp,
        mcp_deferred=caller_policy.mcp_deferred,
        mcp_ceilings=caller_policy.mcp_ceilings + (mcp_ceiling(target_risk),),
    )  # fmt: skip
    return policy, tools, caller.tracker_key, workspace


def _timeout(snap: ConfigSnapshot, target: AgentSpec) -> int:
    runtime = snap.runtime_of(target)
    if runtime.agentic:
        return runtime.agentic_timeout_secs or snap.delegate.agentic_timeout_secs
    return runtime.delegation_timeout_secs or snap.delegate.timeout_secs


def _build_error(snap: ConfigSnapshot, target: AgentSpec) -> Admission | None:
    provider = snap.providers.get(target.model_provider)
    ptype = target.model_provider.partition(".")[0]
    if provider is None:
        return refuse(
            f"Failed to create model_provider '{ptype}' for agent '{target.alias}': provider is not configured",
            "error",
        )
    try:
        build_provider(provider, snap.providers)
    except ProviderError as exc:
        return refuse(f"Failed to create model_provider '{ptype}' for agent '{target.alias}': {exc}", "error")
    return None


def _create_child(
    snap: ConfigSnapshot,
    caller: Run,
    target: AgentSpec,
    mode: str,
    *,
    prompt: str,
    context: str,
    execution: str,
    parent_call: ToolCall | None,
    via_api: bool,
    user: Any,
) -> Run:
    policy, tools, tracker, workspace = _child_policy(snap, caller, _caller_policy(caller), target, mode)
    return create_run(
        agent=target.alias,
        kind=Run.Kind.DELEGATE,
        prompt=prompt,
        context=context,
        policy=policy,
        tools=tools,
        tracker_key=tracker,
        workspace=workspace,
        memory_agent=target.alias,
        system_prompt=target.system_prompt,
        parent=caller,
        parent_call=parent_call,
        mode=mode,
        execution=execution,
        depth=caller.depth + 1,
        spawn_depth=0,
        agentic=snap.runtime_of(target).agentic,
        timeout_secs=_timeout(snap, target),
        created_by=user or caller.created_by,
        via_api=via_api,
        spawn_site=Run.SpawnSite.REST if via_api else Run.SpawnSite.DELEGATE,
    )


def _single(
    caller: Run, args: dict[str, Any], parent_call: ToolCall | None, via_api: bool, user: Any
) -> Admission:
    parsed = _arguments(args, need_agent=True)
    if isinstance(parsed, Admission):
        return parsed
    target_alias, prompt, context = parsed
    background = flag(args, "background")
    snap = config_snapshot_get()
    mode = _gate(snap, caller, target_alias, background=background)
    if isinstance(mode, Admission):
        return mode
    unavailable = _not_available(caller)
    if unavailable:
        return unavailable
    target = snap.agents[target_alias]
    policy = _caller_policy(caller)
    with events.tree_tx(caller.root_id or caller.pk, savepoint=True):  # tree lock first: see events.lock_tree
        spent = _spend(caller, policy, 1)
        if spent:
            return spent
        if background:
            in_flight = (
                Run.objects.filter(kind=Run.Kind.DELEGATE, execution=Run.Execution.BACKGROUND)
                .exclude(status__in=TERMINAL_STATUSES)
                .count()
            )
            if in_flight >= snap.delegate.max_background:
                transaction.set_rollback(True)
                return refuse(
                    f"Too many background delegations in flight (limit {snap.delegate.max_background}). Wait for "
                    "some to finish (check_result) or cancel one (cancel_task) before starting more.",
                    "budget",
                )
        build = _build_error(snap, target)
        if build:
            transaction.set_rollback(True)
            return build
        child = _create_child(
            snap,
            caller,
            target,
            mode,
            prompt=prompt,
            context=context,
            execution=Run.Execution.BACKGROUND if background else Run.Execution.SYNC,
            parent_call=None if background else parent_call,
            via_api=via_api,
            user=user,
        )
        if background:
            mirror_later(child.pk)
    if background:
        text = (
            f"Background task started for agent '{target_alias}'.\n"
            f"task_id: {child.pk}\n"
            f"Use action='check_result' with task_id='{child.pk}' to retrieve the result."
        )
        return Admission(result=ToolResult.ok(text), child=child, code="accepted")
    return Admission(child=child, code="pending")


def _parallel(
    caller: Run, args: dict[str, Any], parent_call: ToolCall | None, via_api: bool, user: Any
) -> Admission:
    raw = args.get("parallel")
    names = [n.strip() for n in raw if isinstance(n, str) and n.strip()] if isinstance(raw, list) else []
    if not names:
        return refuse("'parallel' array must contain at least one agent name", "invalid")
    parsed = _arguments(args, need_agent=False)
    if isinstance(parsed, Admission):
        return parsed
    _, prompt, context = parsed
    snap = config_snapshot_get()
    for name in names:
        if name not in snap.agents:
            return refuse(
                f"Unknown agent '{name}' in parallel list. Available: {roster_text(snap, caller.agent)}",
                "not_found",
            )
    for name in names:
        # Gated as configured (an independent target with always_ask refuses the whole call);
        # every child then runs bounded, under the caller's authorization.
        gate = _gate(snap, caller, name, background=False)
        if isinstance(gate, Admission):
            return gate
    unavailable = _not_available(caller)
    if unavailable:
        return unavailable
    policy = _caller_policy(caller)
    with events.tree_tx(caller.root_id or caller.pk, savepoint=True):  # tree lock first: see events.lock_tree
        spent = _spend(caller, policy, len(names))
        if spent:
            return spent
        for name in names:
            build = _build_error(snap, snap.agents[name])
            if build:
                transaction.set_rollback(True)
                return build
        children = [
            _create_child(
                snap,
                caller,
                snap.agents[name],
                "bounded",
                prompt=prompt,
                context=context,
                execution=Run.Execution.PARALLEL,
                parent_call=parent_call,
                via_api=via_api,
                user=user,
            )
            for name in names
        ]
        if parent_call is not None:
            ToolCall.objects.filter(pk=parent_call.pk).update(result={"order": [str(c.pk) for c in children]})
    return Admission(children=children, code="pending", wait_kind="parallel")
