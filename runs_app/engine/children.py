"""Creating runs: top-level runs and the children of spawn_subagent and delegate."""

from __future__ import annotations

import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from agents_app.snapshot import AgentSpec
from policies_app.specs import DEFAULT_TOOL_RESULT_CHARS
from runs_app import events
from runs_app.engine import dispatch, transcript
from runs_app.engine import messages as msg
from runs_app.engine.frozen import FrozenPolicy, policy_of, snapshot_for
from runs_app.models import Message, Run, ToolCall

SESSION_PREFIX = {
    Run.Kind.TOP_LEVEL: "run",
    Run.Kind.CRON: "cron",
    Run.Kind.SUBAGENT: "subagent",
    Run.Kind.DELEGATE: "delegate",
}


def agent_workspace(agent: AgentSpec) -> str:
    if agent.workspace:
        return str(Path(agent.workspace).expanduser())
    return str(Path(settings.DATA_DIR) / "agents" / agent.alias / "workspace")


def task_prompt(prompt: str, context: str) -> str:
    if context.strip():
        return f"[Context]\n{context}\n\n[Task]\n{prompt}"
    return prompt


def stored_conversation(run: Run) -> list[Message]:
    """The run's stored messages, in order. A run writes the tool messages of a turn when it
    resumes after the turn's calls finished: if a run about to resume, or lost before it did,
    ends with a turn whose calls have all finished, those tool messages are derived here from
    the calls' results (rows not saved), so a copy (resume, continue, fork) keeps the step as
    the run itself would have. (A run that ended otherwise had its last calls settled by its
    ending, not by their own results: that turn is not a finished step.)"""
    rows = list(Message.objects.filter(run_id=run.pk).order_by("seq"))
    last = rows[-1] if rows else None
    if last is None or last.role != "assistant" or not last.tool_calls or run.turns < 1:
        return rows
    if run.status not in (Run.Status.QUEUED, Run.Status.RUNNING, Run.Status.LOST):
        return rows
    calls = list(ToolCall.objects.filter(run_id=run.pk, turn=run.turns - 1).order_by("position"))
    if [c.call_id for c in calls] != [c.get("id") for c in last.tool_calls] or any(
        c.status != ToolCall.Status.DONE for c in calls
    ):
        return rows
    return rows + [
        Message(run_id=run.pk, seq=last.seq + 1 + i, role="tool", content=msg.tool_message(c.result),
                tool_call_id=c.call_id)
        for i, c in enumerate(calls)
    ]  # fmt: skip


def complete_turns(history: list[Message]) -> list[Message]:
    """The conversation of another run as a new run may start from (fork, continue): every user
    and assistant message and every tool call whose results are all there, in order. System
    messages are the new run's own; a model turn whose calls never all finished (the parent's
    current turn, or the last turn of a cancelled run) is left out with its partial results."""
    kept: list[Message] = []
    i = 0
    while i < len(history):
        row = history[i]
        if row.role == "assistant" and row.tool_calls:
            wanted = {c.get("id") for c in row.tool_calls}
            j = i + 1
            results: list[Message] = []
            while j < len(history) and history[j].role == "tool":
                results.append(history[j])
                j += 1
            if wanted <= {r.tool_call_id for r in results}:
                kept.append(row)
                kept.extend(results)
            i = j
            continue
        if row.role in ("user", "assistant"):
            kept.append(row)
        i += 1
    return kept


def create_run(
    *,
    agent: str,
    kind: str,
    prompt: str,
    policy: FrozenPolicy | None = None,
    tools: list[str] | tuple[str, ...],
    tracker_key: str,
    workspace: str,
    memory_agent: str,
    system_prompt: str,
    parent: Run | None = None,
    parent_call: ToolCall | None = None,
    context: str = "",
    mode: str = "",
    execution: str = Run.Execution.SYNC,
    depth: int = 0,
    spawn_depth: int = 0,
    task_name: str = "",
    label: str = "",
    agentic: bool = True,
    timeout_secs: int | None = None,
    created_by: Any = None,
    idempotency_key: str | None = None,
    via_api: bool = False,
    history: list[Message] | None = None,
    whole_history: bool = False,
    continued_from: Run | None = None,
    first_message: str | None = None,
    turns: int = 0,
    spawn_site: str = "",
) -> Run:
    """Insert a queued run with its first messages and emit `run.queued`, in the caller's
    transaction; it is dispatched on commit. `policy`: the run's frozen policy; without it the
    run shares its parent's snapshot (a subagent). `history`: the messages of another run this
    one starts from, before its first message: their complete turns only (fork, continue:
    `complete_turns`), or with `whole_history` every one as it is, system prompt included
    (resume). `spawn_site`: where it was started (`Run.SpawnSite`)."""
    run_id = uuid.uuid4()
    snapshot_id, policy = _frozen(policy, parent)
    holders, result_chars = _tree_facts(run_id, policy, parent)
    now = timezone.now()
    run = Run.objects.create(
        id=run_id,
        parent=parent,
        root_id=parent.root_id if parent else run_id,
        parent_call=parent_call,
        agent=agent,
        kind=kind,
        mode=mode,
        execution=execution,
        spawn_site=spawn_site,
        depth=depth,
        spawn_depth=spawn_depth,
        session_key=f"{SESSION_PREFIX[Run.Kind(kind)]}-{run_id}",
        task_name=task_name,
        label=label,
        prompt=prompt,
        context=context,
        snapshot_id=snapshot_id,
        result_chars=result_chars,
        budget_holders=holders,
        tools=list(tools),
        tracker_key=tracker_key,
        workspace=workspace,
        memory_agent=memory_agent,
        # SPEC §6.2: a background task is mirrored under its CALLER's workspace (an independent
        # or other-profile delegate works in its own workspace).
        results_dir=str(Path(parent.workspace if parent is not None else workspace) / "delegate_results"),
        provider_ref=policy.provider.ref,
        provider_requested=policy.provider.ref,
        model=policy.provider.model,
        system_prompt=system_prompt,
        agentic=agentic,
        timeout_secs=timeout_secs,
        deadline=now + timedelta(seconds=timeout_secs) if timeout_secs else None,
        created_by=created_by if getattr(created_by, "is_authenticated", False) else None,
        idempotency_key=idempotency_key,
        via_api=via_api,
        continued_from=continued_from,
        turns=turns,
    )
    first = _first_messages(run, system_prompt, history, whole_history, first_message)
    Message.objects.bulk_create(first)
    transcript.created(run.pk, first)
    data = {"agent": agent, "kind": kind, "mode": mode, "execution": execution,
            "parent_id": str(parent.pk) if parent else None, "prompt": prompt[:500]}  # fmt: skip
    events.emit(run, "run.queued", data)
    dispatch.runnable(run.pk)
    if timeout_secs:
        dispatch.later(dispatch.EXPIRE_RUN_TASK, [str(run.pk)], countdown=timeout_secs)
    return run


def _frozen(policy: FrozenPolicy | None, parent: Run | None) -> tuple[str | None, FrozenPolicy]:
    """The new run's snapshot digest and policy: its own, or (a subagent) its parent's."""
    if policy is None:
        assert parent is not None, "a run without a policy of its own runs under its parent's"
        return parent.snapshot_id, policy_of(parent)
    return snapshot_for(policy), policy


def _tree_facts(run_id: uuid.UUID, policy: FrozenPolicy, parent: Run | None) -> tuple[list[str], int]:
    """The runs whose output-token budget the new run spends (its own, if it has one, and its
    ancestors'), and how many characters of its final text its parent accepts."""
    holders = list(parent.budget_holders) if parent is not None else []
    if policy.runtime.max_output_tokens:
        holders.append(str(run_id))
    if parent is None:
        return holders, DEFAULT_TOOL_RESULT_CHARS
    return holders, policy_of(parent).runtime.effective_max_tool_result_chars


def _first_messages(
    run: Run, system_prompt: str, history: list[Message] | None, whole: bool, first: str | None
) -> list[Message]:
    rows: list[Message] = []
    if system_prompt:
        rows.append(Message(run=run, seq=0, role="system", content=system_prompt))
    for old in (history or []) if whole else complete_turns(history or []):
        rows.append(
            Message(
                run=run,
                seq=len(rows),
                role=old.role,
                content=old.content,
                tool_calls=old.tool_calls,
                tool_call_id=old.tool_call_id,
            )
        )
    rows.append(
        Message(run=run, seq=len(rows), role="user", content=first or task_prompt(run.prompt, run.context))
    )
    return rows
