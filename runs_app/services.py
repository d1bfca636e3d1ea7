"""Run services: the only place that changes run state (besides the engine it drives).

The model's tool calls, REST and the dashboard all come through these functions."""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from croniter import croniter
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents_app.reachability import reachable
from agents_app.roles import has_role
from agents_app.selectors import config_snapshot_get
from agents_app.snapshot import AgentSpec, ConfigSnapshot
from policies_app.policy import ALL_TOOLS, filter_tools
from runs_app import events
from runs_app.engine import messages as msg
from runs_app.engine.cancel import cancel_tree
from runs_app.engine.children import agent_workspace, create_run, stored_conversation
from runs_app.engine.frozen import FrozenPolicy, policy_of, provider_chain
from runs_app.engine.settle import complete_call, wake_if_ready
from runs_app.engine.tools.base import ToolResult
from runs_app.engine.transitions import lock_run
from runs_app.models import TERMINAL_STATUSES, Approval, Message, Run, Schedule, Steer

MAX_STEER_CHARS = 4000
log = logging.getLogger(__name__)


class RunServiceError(Exception):
    """A refusal with a code the API maps to an HTTP status."""

    def __init__(self, message: str, code: str = "invalid") -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # invalid | not_found | forbidden | conflict


# The policy new runs of each agent are admitted under, for the configuration in force: built
# by the first run of the agent after a save (config_snapshot_get then hands out a new
# snapshot), and handed to every later one, so that its stored snapshot is known by the object
# (frozen.snapshot_for) instead of being digested and looked up again per run.
_admitted: tuple[ConfigSnapshot | None, dict[str, tuple[AgentSpec, FrozenPolicy]]] = (None, {})


def agent_policy(alias: str) -> tuple[AgentSpec, FrozenPolicy]:
    """The frozen policy a new top-level run of `alias` runs under."""
    global _admitted
    snap = config_snapshot_get()
    if _admitted[0] is not snap:
        _admitted = (snap, {})
    found = _admitted[1].get(alias)
    if found is None:
        found = _admitted[1][alias] = _admission(snap, alias)
    return found


def _admission(snap: ConfigSnapshot, alias: str) -> tuple[AgentSpec, FrozenPolicy]:
    spec = snap.agents.get(alias)
    if spec is None:
        raise RunServiceError(f"Unknown agent '{alias}'", "not_found")
    if not spec.enabled:
        raise RunServiceError(f"Agent '{alias}' is disabled and cannot be run", "invalid")
    risk = snap.risk_profiles.get(spec.risk_profile)
    provider = snap.providers.get(spec.model_provider)
    if risk is None or provider is None:
        raise RunServiceError(f"Agent '{alias}' is not runnable: its configuration is incomplete", "invalid")
    policy = FrozenPolicy(
        risk=risk,
        runtime=snap.runtime_of(spec),
        provider=provider,
        chain=provider_chain(snap, provider),
        mcp=snap.mcp_servers_of(spec),
        mcp_deferred=snap.mcp.deferred_loading,
        roster=tuple(reachable(snap, alias)),
    )
    return spec, policy


def run_start(
    *,
    agent: str,
    prompt: str,
    context: str = "",
    user: Any = None,
    idempotency_key: str | None = None,
    kind: str = Run.Kind.TOP_LEVEL,
    history: list[Message] | None = None,
    continued_from: Run | None = None,
    first_message: str | None = None,
    spawn_site: str = "",
) -> Run:
    if not isinstance(prompt, str) or not prompt.strip():
        raise RunServiceError("Missing or empty 'prompt' parameter", "invalid")
    for field, value in (("prompt", prompt), ("context", context)):
        if (too_long := msg.too_long(field, value)) is not None:
            raise RunServiceError(too_long, "invalid")
    owner = user if getattr(user, "is_authenticated", False) else None
    if idempotency_key and owner is not None:
        existing = Run.objects.filter(created_by=owner, idempotency_key=idempotency_key).first()
        if existing is not None:
            return existing
    spec, policy = agent_policy(agent)
    try:
        with transaction.atomic():
            return create_run(
                agent=agent,
                kind=kind,
                prompt=prompt,
                context=context,
                policy=policy,
                tools=filter_tools(ALL_TOOLS, policy.risk),
                tracker_key=agent,
                workspace=agent_workspace(spec),
                memory_agent=agent,
                system_prompt=spec.system_prompt,
                created_by=owner,
                idempotency_key=idempotency_key if owner is not None else None,
                history=history,
                continued_from=continued_from,
                first_message=first_message,
                spawn_site=spawn_site,
            )
    except IntegrityError:
        # Two requests with one idempotency key raced: the other one created the run.
        existing = Run.objects.filter(created_by=owner, idempotency_key=idempotency_key).first()
        if idempotency_key and existing is not None:
            return existing
        raise


def can_control(user: Any, run: Run) -> bool:
    """Cancel and steer: the run's creator (an operator) or an admin."""
    if has_role(user, "admin"):
        return True
    return has_role(user, "operator") and run.created_by_id is not None and run.created_by_id == user.pk


def ensure_can_control(user: Any, run: Run, verb: str) -> None:
    """The refusal when `user` may not `verb` (cancel, steer) `run`: REST, the dashboard and
    REST's cancel_task all ask here."""
    if not can_control(user, run):
        raise RunServiceError(f"Only the run's creator or an admin may {verb} it.", "forbidden")


def run_cancel(*, run: Run, user: Any = None, check_owner: bool = True) -> int:
    """Cancel a run and, in cascade, every descendant not yet terminal. Returns how many changed."""
    if check_owner and user is not None:
        ensure_can_control(user, run, "cancel")
    if run.status in TERMINAL_STATUSES:
        raise RunServiceError(f"Run is already {run.status}", "conflict")
    return cancel_tree(run)


def approval_decide(*, approval: Approval, user: Any, approve: bool, reason: str = "") -> Approval:
    if not has_role(user, "operator"):
        raise RunServiceError("Only operators and admins may decide approvals.", "forbidden")
    status = Approval.Status.APPROVED if approve else Approval.Status.DENIED
    with events.tree_tx(approval.run.root_id or approval.run_id, savepoint=True):  # refusals raise inside
        lock_run(approval.run_id)
        now = timezone.now()
        run_status = Run.objects.filter(pk=approval.run_id).values_list("status", flat=True).first()
        if run_status in TERMINAL_STATUSES:
            raise RunServiceError(
                f"Run is already {run_status}; its approvals can no longer be decided", "conflict"
            )
        if not Approval.objects.filter(pk=approval.pk, status=Approval.Status.PENDING).update(
            status=status, decided_by=user, decided_at=now, reason=reason
        ):
            current = Approval.objects.get(pk=approval.pk)
            raise RunServiceError(f"Approval {approval.pk} was already {current.status}", "conflict")
        approval.refresh_from_db()
        run = approval.run
        events.emit(
            run,
            "approval.decided",
            {"approval_id": approval.pk, "status": status, "by": user.get_username(), "reason": reason},
        )
        call = approval.tool_call
        if not approve:
            complete_call(call, ToolResult.fail(msg.denied(reason or "no reason given")).as_dict(), run=run)
        else:
            # The approved call stays pending until the run executes it; the run resumes now
            # unless something else (another approval, a child) still blocks it.
            wake_if_ready(run)
    return approval


def run_steer(*, run: Run, user: Any, message: str) -> Steer:
    ensure_can_control(user, run, "steer")
    if not isinstance(message, str) or not message.strip():
        raise RunServiceError("Missing or empty 'message' parameter", "invalid")
    if len(message) > MAX_STEER_CHARS:
        raise RunServiceError(f"Message too long ({len(message)} chars, max {MAX_STEER_CHARS}).", "invalid")
    if run.status in TERMINAL_STATUSES:
        raise RunServiceError(f"Run is already {run.status}", "conflict")
    with events.tree_tx(run.root_id or run.pk):
        steer = Steer.objects.create(run=run, text=message, created_by=user)
        Run.objects.filter(pk=run.pk).update(has_inbox=True)
        events.emit(run, "run.steered", {"message": message, "by": user.get_username()})
    return steer


def run_continue(*, run: Run, user: Any, prompt: str, spawn_site: str = "") -> Run:
    if run.status not in TERMINAL_STATUSES:
        raise RunServiceError(f"Run is still {run.status}; only a finished run can be continued", "conflict")
    history = stored_conversation(run)
    return run_start(
        agent=run.agent, prompt=prompt, user=user, history=history, continued_from=run, spawn_site=spawn_site
    )


def run_resume(*, run: Run, user: Any, spawn_site: str = "") -> Run:
    """An operator's decision to resume a `lost` run: a new run continues from the lost run's
    transcript after its last completed step (the lost run itself stays `lost`)."""
    if run.status != Run.Status.LOST:
        raise RunServiceError(f"Only a lost run can be resumed (status: {run.status})", "conflict")
    policy = policy_of(run)
    rows = stored_conversation(run)  # a last step whose calls all finished is kept
    # Drop a trailing model turn whose tool calls never all finished: the model decides again.
    while rows and rows[-1].role == "assistant" and rows[-1].tool_calls:
        rows.pop()
    with transaction.atomic():
        new = create_run(
            agent=run.agent,
            kind=run.kind,
            prompt=run.prompt,
            context=run.context,
            policy=policy,
            tools=run.tools,
            tracker_key=run.tracker_key,
            workspace=run.workspace,
            memory_agent=run.memory_agent,
            system_prompt="",
            parent=run.parent,
            mode=run.mode,
            depth=run.depth,
            spawn_depth=run.spawn_depth,
            agentic=run.agentic,
            created_by=user,
            continued_from=run,
            history=rows,
            whole_history=True,
            first_message="Resume the task from where it stopped; earlier steps are above.",
            # The model turns kept count as done: the resumed run goes on from the next one
            # (and the iteration cap keeps counting the whole conversation).
            turns=sum(1 for r in rows if r.role == "assistant"),
            spawn_site=spawn_site,
        )
    return new


def schedules_fire_due(now: datetime | None = None) -> list[Run]:
    """Start the runs of every enabled schedule whose cron expression came due."""
    now = now or timezone.now()
    started: list[Run] = []
    for schedule in Schedule.objects.filter(enabled=True):
        base = schedule.last_run_at or schedule.created_at
        try:
            due = croniter(schedule.cron, base).get_next(datetime)
        except (ValueError, KeyError) as exc:  # one bad expression must not stop the others
            log.warning("schedule %s has an invalid cron expression %r: %s", schedule.pk, schedule.cron, exc)
            continue
        if due > now:
            continue
        with transaction.atomic():
            if not Schedule.objects.filter(pk=schedule.pk, last_run_at=schedule.last_run_at).update(
                last_run_at=now
            ):
                continue  # another beat fired it
            try:
                run = run_start(
                    agent=schedule.agent,
                    prompt=f"[cron:{schedule.pk} {schedule.name}] {schedule.prompt}",
                    user=schedule.created_by,
                    kind=Run.Kind.CRON,
                    spawn_site=Run.SpawnSite.CRON,
                )
            except RunServiceError:
                continue
            started.append(run)
    return started
