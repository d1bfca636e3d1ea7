"""A model turn's tool calls: recorded as ToolCall rows, executed (local tools in the worker,
outside any transaction; spawn_subagent and delegate admitted as child runs), folded back
into the conversation as tool messages once all are done. While any is pending the run waits
(`waiting`, or `awaiting_approval`) and holds no worker: what completes the last one queues
the run again (`settle.complete_call`)."""

from __future__ import annotations

import contextvars
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.db import connection

from policies_app.policy import TOOL_SEARCH, is_mcp_name, mcp_server_of
from runs_app import events
from runs_app.engine import heartbeat, settle, transitions
from runs_app.engine import messages as msg
from runs_app.engine.admission import Admission
from runs_app.engine.decide import Planned
from runs_app.engine.delegate import delegate_tool
from runs_app.engine.frozen import FrozenPolicy
from runs_app.engine.providers import ChatMessage
from runs_app.engine.spawn import spawn_subagent
from runs_app.engine.tools import mcp_tools
from runs_app.engine.tools.base import LocalToolContext, ToolResult
from runs_app.engine.tools.registry import is_local, run_local
from runs_app.engine.transcript import Transcript, append
from runs_app.models import Announce, Approval, Run, Steer, ToolCall

log = logging.getLogger(__name__)


class Stopped(Exception):
    """The run left `running` under us (cancelled, timed out, lost): stop quietly."""


@dataclass
class Step:
    """A run as its worker holds it for one model turn."""

    run: Run
    policy: FrozenPolicy
    transcript: Transcript
    calls: list[ToolCall] = field(default_factory=list)  # the current turn's, once recorded
    _mcp_offer: dict[str, mcp_tools.Offered] | None = None
    # Servers of the run that could not be listed this turn, with the error their calls get.
    mcp_down: dict[str, str] = field(default_factory=dict)

    @property
    def root_id(self) -> Any:
        return self.run.root_id or self.run.pk

    @property
    def mcp(self) -> mcp_tools.RunMcp:
        return mcp_tools.run_mcp(self.policy, self.run.workspace)

    def mcp_offer(self) -> dict[str, mcp_tools.Offered]:
        """The MCP tools this run may call now (listed once per model turn), for an agentic run."""
        if self._mcp_offer is None:
            self._mcp_offer = (
                mcp_tools.offered(self.mcp, self.mcp_down) if self.run.agentic and self.policy.mcp else {}
            )
        return self._mcp_offer

    def mcp_callable(self) -> dict[str, mcp_tools.Offered]:
        """Of those, the ones the model has been given: all, or with deferred loading the ones
        `tool_search` activated (none at all when tool_search itself is not allowed)."""
        offer = self.mcp_offer()
        if not offer or not self.policy.mcp_deferred:
            return offer
        if not mcp_tools.tool_search_allowed(self.mcp):
            return {}
        active = mcp_tools.activated(self.run, offer)
        return {name: o for name, o in offer.items() if name in active}


def still_mine(run: Run) -> bool:
    """Inside a transaction that holds the tree's lock: is the run still running, and ours?
    Every status change of a run takes that lock first, so the answer holds to the commit."""
    return Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING, owner=heartbeat.WORKER_ID).exists()


def record_calls(step: Step, planned: tuple[Planned, ...]) -> list[ToolCall]:
    """Inside the turn's transaction: a ToolCall row per call, refusals completed at once,
    approvals asked. The calls to execute now are returned (local, spawn/delegate, yield)."""
    run = step.run
    rows = ToolCall.objects.bulk_create(
        [
            ToolCall(
                run=run, turn=run.turns - 1, position=p.position, call_id=p.call.id, name=p.call.name,
                arguments=p.call.arguments, wait_kind=_wait_kind(p),
            )
            for p in planned
        ]
    )  # fmt: skip
    if any(r.pk is None for r in rows):  # a backend whose bulk insert returns no ids
        rows = list(ToolCall.objects.filter(run=run, turn=run.turns - 1).order_by("position"))
    step.calls = rows
    ready: list[ToolCall] = []
    for p, row in zip(planned, rows, strict=True):
        data = {"call_id": row.call_id, "name": row.name, "arguments": row.arguments}
        if is_mcp_name(row.name):
            data["server"] = mcp_server_of(row.name)
        events.emit(run, "tool.call", data)
        log.info("tool call %s %s: %s", row.name, row.call_id, p.kind)
        if p.kind == "refused":
            settle.complete_call(row, ToolResult.fail(p.refusal).as_dict(), run=run)
        elif p.kind == "approval":
            approval = Approval.objects.create(tool_call=row, run=run)
            events.emit(
                run,
                "approval.requested",
                {
                    "approval_id": approval.pk,
                    "call_id": row.call_id,
                    "name": row.name,
                    "arguments": row.arguments,
                },
            )
        else:
            ready.append(row)
    return ready


def _wait_kind(p: Planned) -> str:
    if p.kind == "approval":
        return "approval"
    if p.kind in ("spawn_subagent", "delegate"):
        return "children"  # the usual wait; admission changes it if need be
    return ""


def execute(step: Step, rows: list[ToolCall]) -> bool:
    """Run the local tools among `rows` (outside any transaction), record their results, then
    admit the other calls and decide whether the run waits. True when it goes on to its next
    model turn."""
    local = [r for r in rows if is_local(r.name)]
    if local:
        if not Run.objects.filter(pk=step.run.pk, status=Run.Status.RUNNING).exists():
            raise Stopped  # cancelled (or timed out) meanwhile: act no further
        if connection.vendor == "postgresql":
            connection.close()  # back to the process's pool while the tools run (a shell may take minutes)
        results = run_local_calls(step, local)
        # Recorded even if the run stops right after: what the tools did is a fact.
        with events.tree_tx(step.root_id, durable=True):
            for row in local:
                settle.complete_call(row, results[row.pk].as_dict(), run=step.run)
    with events.tree_tx(step.root_id, durable=True):
        if not still_mine(step.run):
            raise Stopped
        return admit_and_wait(step, [r for r in rows if not is_local(r.name)])


def admit_and_wait(step: Step, rows: list[ToolCall]) -> bool:
    """Inside a transaction where the run is still ours: admit spawn/delegate/yield calls,
    then wait if anything is pending. True when nothing blocks the run."""
    admit(step, rows)
    transitions.lock_run(step.run.pk)
    blocked = transitions.blocking(step.run.pk)
    if blocked[0]:
        wait(step, blocked, if_owner=heartbeat.WORKER_ID)
    return not blocked[0]


def admit(step: Step, rows: list[ToolCall]) -> None:
    for row in rows:
        _admit(step, row)


def blocked_by(turn_calls: list[ToolCall]) -> tuple[int, int] | None:
    """What keeps the run waiting after the turn that made `turn_calls` was handled, as
    `transitions.blocking` counts it, known without a read: every call of earlier turns is
    done before a model turn, and each call of this one that the turn's transaction completed
    is marked done on its row object (`settle.complete_call`). None when that cannot be known
    here (sessions_yield is completed through a row of its own)."""
    if any(c.name == "sessions_yield" for c in turn_calls):
        return None
    pending = [c for c in turn_calls if c.status == ToolCall.Status.PENDING]
    return len(pending), sum(1 for c in pending if c.wait_kind == "approval")


def wait(step: Step, blocked: tuple[int, int], **how: Any) -> bool:
    """Inside the transaction that found the run blocked: it waits, holding no worker. `how`:
    the move's condition and the other columns its UPDATE writes."""
    pending, asks = blocked
    status = Run.Status.AWAITING_APPROVAL if asks else Run.Status.WAITING
    return settle.stop(
        step.run, [Run.Status.RUNNING], status, event="run.waiting", data={"status": status, "pending": pending},
        owner="", **how,
    )  # fmt: skip


def _admit(step: Step, row: ToolCall) -> None:
    run = step.run
    adm: Admission
    if row.name == "sessions_yield":
        ToolCall.objects.filter(pk=row.pk).update(wait_kind="yield")
        settle.wake_waiters(run)
        return
    if row.name == "spawn_subagent":
        adm = spawn_subagent(parent=run, args=row.arguments, parent_call=row)
    else:
        adm = delegate_tool(caller=run, args=row.arguments, parent_call=row)
    if adm.result is not None:
        settle.complete_call(row, adm.result.as_dict(), run=run)
    elif adm.wait_kind:
        ToolCall.objects.filter(pk=row.pk).update(wait_kind=adm.wait_kind, deadline=adm.deadline)


def run_local_calls(step: Step, rows: list[ToolCall]) -> dict[int, ToolResult]:
    """Outside any transaction. Results are cut to the run's own max_tool_result_chars: a
    delegate works under its target's limits (ZeroClaw's agentic delegate does the same)."""
    run, policy = step.run, step.policy
    ctx = LocalToolContext(
        risk=policy.risk, runtime=policy.runtime, workspace=Path(run.workspace), env=dict(os.environ),
        run_id=run.pk, memory_agent=run.memory_agent,
    )  # fmt: skip
    limit = policy.runtime.effective_max_tool_result_chars

    def one(row: ToolCall) -> ToolResult:
        if row.name == TOOL_SEARCH:
            return mcp_tools.tool_search(
                step.mcp_offer(), row.arguments if isinstance(row.arguments, dict) else {}
            )
        if is_mcp_name(row.name):  # cut inside its untrusted-content wrapper, which stays whole
            return mcp_tools.call(step.mcp, step.mcp_callable(), row.name, row.arguments,
                                  tracker_key=run.tracker_key, limit=limit)  # fmt: skip
        result = run_local(row.name, ctx, row.arguments, tracker_key=run.tracker_key)
        return ToolResult(result.success, msg.truncate(result.output, limit), result.error)

    def in_thread(row: ToolCall) -> ToolResult:
        try:
            return one(row)
        finally:
            connection.close()  # this thread's own connection, opened for this call

    if len(rows) > 1 and policy.runtime.parallel_tools:
        # Each thread runs in a copy of this one's context: its log records name the run.
        contexts = [contextvars.copy_context() for _ in rows]
        with ThreadPoolExecutor(max_workers=min(8, len(rows))) as pool:
            done = pool.map(lambda c, row: c.run(in_thread, row), contexts, rows)
            return {row.pk: res for row, res in zip(rows, done, strict=True)}
    return {row.pk: one(row) for row in rows}


def resume(step: Step) -> bool:
    """Before a model turn: run the last turn's approved calls, wait while any call is still
    pending, else write their results and the run's inbox (steers, announces) into the
    conversation. True when the run can take its next model turn."""
    run = step.run
    calls: list[ToolCall] = []
    if _last_turn_called_tools(step.transcript):
        while True:
            calls = list(
                ToolCall.objects.filter(run=run, turn=run.turns - 1)
                .select_related("approval")
                .order_by("position")
            )
            approved = [c for c in calls if _approved(c)]
            if approved:
                ToolCall.objects.filter(pk__in=[c.pk for c in approved]).update(wait_kind="")
                if not execute(step, approved):
                    return False
                continue
            if any(c.status == ToolCall.Status.PENDING for c in calls):
                with events.tree_tx(step.root_id, durable=True):
                    if not still_mine(run):
                        raise Stopped
                    if not admit_and_wait(step, []):
                        return False
                continue  # settled or approved while we looked: look again
            break
    tool_messages = [ChatMessage("tool", msg.tool_message(c.result), tool_call_id=c.call_id) for c in calls]
    if not tool_messages and not run.has_inbox:
        return True
    with events.tree_tx(step.root_id, durable=True):
        append(run.pk, step.transcript, tool_messages + (_inbox(run) if run.has_inbox else []))
    return True


def _approved(call: ToolCall) -> bool:
    if call.status != ToolCall.Status.PENDING or call.wait_kind != "approval":
        return False
    approval = getattr(call, "approval", None)
    return approval is not None and approval.status == Approval.Status.APPROVED


def _last_turn_called_tools(transcript: Transcript) -> bool:
    last = next((m for m in reversed(transcript.messages) if m.role != "user"), None)
    return last is not None and last.role == "assistant" and bool(last.tool_calls)


def _inbox(run: Run) -> list[ChatMessage]:
    """Inside a transaction: the run's undelivered announces, then steers, marked delivered."""
    if not Run.objects.filter(pk=run.pk, has_inbox=True).update(has_inbox=False):
        return []
    announces = list(Announce.objects.filter(parent=run, delivered=False).order_by("created_at", "pk"))
    steers = list(Steer.objects.filter(run=run, delivered=False))
    Announce.objects.filter(pk__in=[a.pk for a in announces]).update(delivered=True)
    Steer.objects.filter(pk__in=[s.pk for s in steers]).update(delivered=True)
    return [ChatMessage("user", a.text) for a in announces] + [ChatMessage("user", s.text) for s in steers]
