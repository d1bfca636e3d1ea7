"""`spawn_subagent` (SPEC §5): the seven checks in the seed's order, then the child.

The model's tool call and `POST /runs/{id}/spawn/` both come here."""

from __future__ import annotations

import json
from typing import Any

from agents_app.models import Agent
from policies_app.policy import readonly_refusal, subagent_registry
from policies_app.tracker import BudgetExhausted
from runs_app import events
from runs_app.engine import messages as msg
from runs_app.engine.admission import Admission, flag, refuse
from runs_app.engine.budget import spend_action
from runs_app.engine.children import create_run, stored_conversation
from runs_app.engine.frozen import FrozenPolicy, policy_of, provider_of
from runs_app.engine.providers import ProviderError
from runs_app.engine.tools.base import ToolResult
from runs_app.models import ACTIVE_STATUSES, Run, ToolCall


def spawn_subagent(
    *,
    parent: Run,
    args: dict[str, Any],
    parent_call: ToolCall | None,
    via_api: bool = False,
    user: Any = None,
) -> Admission:
    policy = policy_of(parent)
    runtime, risk = policy.runtime, policy.risk
    checked = _checks(parent, policy, args)
    if isinstance(checked, Admission):
        return checked
    prompt, task_name, label = checked
    fork = args.get("context") == "fork"
    background = flag(args, "background")

    # Check 7 is worked out first (it only reads) but reported after the budget's: a call it
    # refuses records no action, so nothing is ever undone here and no savepoint is needed.
    build_error = _build_error(parent, policy)
    with events.tree_tx(parent.root_id or parent.pk):  # the tree's lock first: see events.lock_tree
        try:
            spend_action(key=parent.tracker_key, runtime=runtime, record=build_error is None)
        except BudgetExhausted as exc:
            return refuse(exc.message, "budget")
        if build_error:
            return build_error  # refused calls consume nothing
        history = stored_conversation(parent) if fork else None
        child = create_run(
            agent=parent.agent,
            kind=Run.Kind.SUBAGENT,
            prompt=prompt,
            tools=subagent_registry(parent.tools, risk),
            tracker_key=parent.tracker_key,
            workspace=parent.workspace,
            memory_agent=parent.memory_agent,
            system_prompt=parent.system_prompt,
            parent=parent,
            parent_call=None if background else parent_call,
            execution=Run.Execution.BACKGROUND if background else Run.Execution.SYNC,
            depth=parent.depth,
            spawn_depth=parent.spawn_depth + 1,
            task_name=task_name,
            label=label,
            timeout_secs=runtime.subagent_timeout_secs or None,
            created_by=user or parent.created_by,
            via_api=via_api,
            history=history,
            spawn_site=Run.SpawnSite.REST if via_api else Run.SpawnSite.SPAWN_SUBAGENT,
        )
    parent.active_subagents = (getattr(parent, "active_subagents", None) or 0) + 1  # type: ignore[attr-defined]
    if background:
        accepted = {"status": "accepted", "run_id": str(child.pk), "session_key": child.session_key}
        return Admission(result=ToolResult.ok(json.dumps(accepted)), child=child, code="accepted")
    return Admission(child=child, code="pending")


def _build_error(parent: Run, policy: FrozenPolicy) -> Admission | None:
    if not Agent.objects.filter(alias=parent.agent).exists():
        return refuse(f'subagent spawn failed: no agent configured under alias "{parent.agent}"', "not_found")
    try:
        provider_of(parent)
    except ProviderError as exc:
        return refuse(f"subagent spawn failed: {exc}", "error")
    return None


def _checks(parent: Run, policy: FrozenPolicy, args: dict[str, Any]) -> Admission | tuple[str, str, str]:
    """Checks 1–5 of SPEC §5 and the read-only refusal: a refusal, or (prompt, task name,
    label)."""
    policy = policy_of(parent)
    runtime, risk = policy.runtime, policy.risk
    prompt = args.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return refuse(msg.missing_prompt(), "invalid")
    if (too_long := msg.too_long("prompt", prompt)) is not None:
        return refuse(too_long, "invalid")
    if parent.spawn_depth >= runtime.max_spawn_depth:
        return refuse(msg.nesting_refusal(parent.spawn_depth, runtime.max_spawn_depth), "policy")
    # The run's registry is its risk profile's filter already applied (and, for a bounded
    # delegate, the caller's ceiling as well): a tool missing from it is refused here too.
    listed = not risk.allowed_tools or "spawn_subagent" in risk.allowed_tools
    excluded = "spawn_subagent" in risk.excluded_tools or risk.deny_all_tools
    if not listed or excluded or "spawn_subagent" not in parent.tools:
        return refuse(msg.spawn_not_allowed(parent.agent), "policy")
    active = getattr(parent, "active_subagents", None)  # as the parent's step read it (`rows`)
    if active is None or active >= runtime.max_children_per_run:
        # Counted now: the read may be older than a child's end (a refusal is always exact).
        active = parent.active_subagents = Run.objects.filter(  # type: ignore[attr-defined]
            parent_id=parent.pk, status__in=ACTIVE_STATUSES, kind=Run.Kind.SUBAGENT
        ).count()
    if active >= runtime.max_children_per_run:
        return refuse(msg.too_many_children(active, runtime.max_children_per_run), "policy")
    task_name = args.get("task_name") or ""
    if not isinstance(task_name, str) or (
        task_name and (not msg.TASK_NAME_RE.match(task_name) or task_name in ("last", "all"))
    ):
        return refuse(msg.invalid_task_name(str(task_name)), "invalid")
    if risk.level == "readonly":
        return refuse(readonly_refusal("spawn_subagent"), "policy")
    label = args.get("label") or ""
    return prompt, task_name, label if isinstance(label, str) else str(label)
