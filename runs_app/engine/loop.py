"""One step of a resumable run (ENGINE.md): claim, then model turns until the run finishes
or must wait. A run that waits (children, approval, sessions_yield, await) holds no worker:
its task ends, and settling what it waits on queues it again."""

from __future__ import annotations

import json
import logging
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from django.db import connection
from django.utils import timezone

from agents_app.models import Agent
from policies_app.policy import ACTING_TOOLS, needs_approval, readonly_refusal
from policies_app.tracker import BudgetExhausted, tracker_check_cost, tracker_record_cost
from runs_app import events
from runs_app.engine import baton, heartbeat, inline, ready, sql, store
from runs_app.engine import messages as msg
from runs_app.engine.budget import output_budget_refusal, spend_action
from runs_app.engine.claims import claim, give_back, take_claimed
from runs_app.engine.frozen import FrozenPolicy, cached_provider
from runs_app.engine.providers import (
    AllProvidersFailed,
    ChatMessage,
    ChatRequest,
    ModelReply,
    ProviderError,
    cost_cents,
)
from runs_app.engine.settle import complete_call, kick_queue, lock_run, run_finish
from runs_app.engine.tools import files, memory, shell
from runs_app.engine.tools.base import LocalToolContext, ToolResult
from runs_app.engine.tools.registry import DEDUP_EXEMPT, LOCAL_TOOLS, tool_specs
from runs_app.models import Announce, Approval, Run, Steer, ToolCall

log = logging.getLogger(__name__)

INVALID_COMPLETION = "model provider returned an invalid semantic completion."
# Tools whose own checks refuse a call the run's registry lacks, with their exact messages
# (SPEC §5 check 3: `spawn_subagent: refused — …`), so the generic refusal must not preempt them.
SELF_CHECKING: frozenset[str] = frozenset({"spawn_subagent"})


def advance_run(run_id: Any) -> None:
    """Advance a run, then keep this worker busy with the run its step made runnable (a sync
    child it spawned, or the parent its end woke), without a round trip through the broker.
    That run is usually claimed already, in the commit that made it runnable (`claims`)."""
    next_id: Any = run_id
    claimed = False
    kept: Run | None = None
    hops = 0
    while next_id is not None and (hops < MAX_INLINE_HOPS or claimed):
        with baton.held(), inline.slot() as slot:
            try:
                _advance_one(next_id, claimed=claimed, run=kept)
            except BaseException:
                if slot.claimed:  # claimed for a hop that will not come: back to the queue
                    give_back(slot.run_id)
                raise
        next_id, claimed, kept = slot.run_id, slot.claimed, slot.run
        hops += 1
    if next_id is not None:
        from runs_app.tasks import advance_run as task

        task.delay(str(next_id))


MAX_INLINE_HOPS = 10_000


def _advance_one(run_id: Any, *, claimed: bool = False, run: Run | None = None) -> None:
    """One hop. `run`: the copy its claimer kept (`claims.claim_inline`), if any."""
    run = take_claimed(run_id, run) if claimed else claim(run_id)
    if run is None:
        return
    heartbeat.hold(run.pk)
    stepper: Stepper | None = None
    try:
        stepper = Stepper(run)
        stepper.drive()
    except Exception as exc:
        log.exception("run %s crashed", run_id)
        store.forget(run_id)
        _crashed(run, f"internal error: {exc.__class__.__name__}: {exc}", stepper)
    finally:
        heartbeat.release(run.pk)


def _crashed(run: Run, error: str, stepper: Stepper | None) -> None:
    """Fail a run whose step raised, with the tool messages it had staged (SPEC §5: the
    transcript is kept after failure). If even they cannot be written, the run fails without."""
    unsaved = stepper.transcript.unsaved if stepper is not None else []
    if unsaved:
        try:
            with events.tree_tx(run.root_id or run.pk):
                sql.insert(unsaved)
                run_finish(run.pk, status=Run.Status.FAILED, error=error)
            return
        except Exception:
            log.exception("run %s: its staged messages could not be kept", run.pk)
    run_finish(run.pk, status=Run.Status.FAILED, error=error)


class Stopped(Exception):
    """The run left `running` under us (cancelled, timed out, lost): stop quietly."""


class Stepper:
    def __init__(self, run: Run) -> None:
        self.run = run
        self.root_id = run.root_id or run.pk
        self.transcript = store.load(run.pk, run.turns)
        kept = self.transcript.policy if self.transcript.run is run else None
        self.policy = kept or FrozenPolicy.from_json(run.policy)
        # Claimed just now: status and inbox are as the claim read them, so the first step
        # need not read them again (a cancel meanwhile stops the turn's conditional UPDATE).
        self.fresh = True
        self.handled: bool | None = None  # the turn's calls, if handled in its commit

    # -- the loop ---------------------------------------------------------------------------
    def drive(self) -> None:
        try:
            while self.step():
                pass
        except Stopped:
            store.forget(self.run.pk)
            with events.tree_tx(self.root_id):
                store.flush(self.transcript)  # the transcript is kept whatever the ending

    def step(self) -> bool:
        """Advance one model turn. False when the run finished or must wait."""
        run = self.run
        if self.fresh:
            self.fresh = False
        else:
            row = sql.fetchone(
                f"SELECT status, has_inbox FROM {sql.table(Run)} WHERE id = %s", [sql.uid(run.pk)]
            )
            if row is None or row[0] != Run.Status.RUNNING:
                raise Stopped
            run.has_inbox = bool(row[1])
        if self._last_turn_has_calls():
            if not self._fold_tool_results():
                return False
        self._deliver_inbox()
        runtime = self.policy.runtime
        if run.turns >= runtime.effective_max_tool_iterations:
            return self._finish(
                Run.Status.FAILED, error=msg.max_iterations(runtime.effective_max_tool_iterations)
            )
        if run.deadline and timezone.now() >= run.deadline:
            from runs_app.services import cancel_descendants

            self._finish(Run.Status.TIMED_OUT, error=f"timed out after {run.timeout_secs}s")
            cancel_descendants(run)
            return False
        refusal = output_budget_refusal(run)
        if refusal:
            return self._finish(Run.Status.FAILED, error=refusal)
        try:
            tracker_check_cost(key=run.tracker_key, max_cost_per_day_cents=runtime.max_cost_per_day_cents)
        except BudgetExhausted as exc:
            return self._finish(Run.Status.FAILED, error=exc.message)

        self.handled = None
        reply = self._call_model()
        if reply is None or not reply.tool_calls:
            return False  # it failed, or it was the last turn: the run finished with it
        if self.handled is not None:  # handled in the turn's own commit
            return self.handled
        return self._handle_tool_calls(reply)

    def _finish(self, status: str, *, output: str = "", error: str = "") -> bool:
        store.forget(self.run.pk)
        with events.tree_tx(self.root_id, savepoint=False):
            store.flush(self.transcript)
            run_finish(
                self.run.pk,
                status=status,
                output=output,
                error=error,
                owner=heartbeat.WORKER_ID,
                run=self.run,
            )
        return False

    # -- the model --------------------------------------------------------------------------
    def _provider(self) -> Any:
        t = self.transcript
        if t.provider is None or t.provider_ref != self.run.provider_ref:
            spec = self.policy.chain.get(self.run.provider_ref, self.policy.provider)
            t.provider = cached_provider(spec, self.policy.chain)
            t.provider_ref = spec.ref
        return t.provider

    def _tool_results(self) -> list[str]:
        if not self.run.turns:  # a fork or a continuation starts with no previous turn of its own
            return []
        results: list[str] = []
        for m in reversed(self.transcript.messages):  # only the tail after the last model turn
            if m.role == "assistant":
                break
            if m.role == "tool":
                results.append(m.content)
        return results[::-1]

    def _call_model(self) -> ModelReply | None:
        run = self.run
        requested_at = timezone.now()
        request = ChatRequest(
            messages=list(self.transcript.messages),
            tools=tool_specs(run.tools) if run.agentic else [],
            agent=run.agent,
            prompt=run.prompt,
            turn_index=run.turns,
            tool_results=self._tool_results(),
        )
        try:
            reply: ModelReply = self._provider().complete(request)  # blocking parts: `baton`
        except AllProvidersFailed as exc:
            self._finish(Run.Status.FAILED, error=INVALID_COMPLETION if exc.invalid_completion else str(exc))
            return None
        except ProviderError as exc:
            self._finish(Run.Status.FAILED, error=str(exc))
            return None
        if not run.agentic:
            reply.tool_calls = []
        spec = self.policy.chain.get(reply.provider_ref, self.policy.provider)
        cost = cost_cents(spec, reply.usage)
        failure: Exception | None = None
        with events.tree_tx(self.root_id):
            updated = sql.execute(
                f"UPDATE {sql.table(Run)} SET turns = turns + 1, input_tokens = input_tokens + %s,"
                " output_tokens = output_tokens + %s, cost_cents = cost_cents + %s,"
                " provider_served = %s, model = %s, heartbeat_at = %s"
                " WHERE id = %s AND status = %s AND owner = %s",
                [
                    reply.usage.input_tokens, reply.usage.output_tokens, float(cost),
                    reply.provider_ref, reply.model, sql.when(timezone.now()),
                    sql.uid(run.pk), "running", heartbeat.WORKER_ID,
                ],
            )  # fmt: skip
            if updated:
                # Written with the response (one commit per turn), stamped with the time of the call.
                events.emit(
                    run,
                    "model.request",
                    {
                        "turn": run.turns,
                        "provider": run.provider_ref,
                        "requested_at": requested_at.isoformat(),
                    },
                )
                store.append(
                    run.pk, self.transcript, ChatMessage("assistant", reply.text, list(reply.tool_calls))
                )
                events.emit(
                    run,
                    "model.response",
                    {
                        "turn": run.turns,
                        "text": reply.text[:2000],
                        "tool_calls": [
                            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls
                        ],
                        "usage": {"input": reply.usage.input_tokens, "output": reply.usage.output_tokens},
                        "cost_cents": cost,
                        "provider": reply.provider_ref,
                        "model": reply.model,
                    },
                )
            if cost:
                # The call was made and paid for, even by a run that stopped meanwhile.
                tracker_record_cost(key=run.tracker_key, cents=cost)
            if updated:
                run.turns += 1
                run.input_tokens += reply.usage.input_tokens
                run.output_tokens += reply.usage.output_tokens
                run.cost_cents += cost
                run.provider_served, run.model = reply.provider_ref, reply.model
                if not reply.tool_calls:
                    # The last turn: the run ends in this same transaction (one commit fewer).
                    if reply.text.strip():
                        self._finish(Run.Status.COMPLETED, output=reply.text)
                    else:
                        # e.g. a non-agentic run whose model answered only with tool calls
                        # (dropped): no usable answer, as SPEC §6.1 words it.
                        self._finish(Run.Status.FAILED, error=INVALID_COMPLETION)
                elif not any(c.name in LOCAL_TOOLS for c in reply.tool_calls):
                    # Nothing to run outside a transaction: the calls are handled in this same
                    # commit (one fewer per turn). They are recorded in a savepoint of their
                    # own (`_handle_tool_calls`' block, nested): if handling them raises, the
                    # turn is still committed, its paid cost with it, and the error goes on.
                    try:
                        self.handled = self._handle_tool_calls(reply)
                    except Exception as exc:
                        failure = exc
        if failure is not None:
            raise failure
        if not updated:
            raise Stopped
        return reply

    # -- tool calls -------------------------------------------------------------------------
    def _handle_tool_calls(self, reply: ModelReply) -> bool:
        run, risk = self.run, self.policy.risk
        turn = run.turns - 1
        exempt = DEDUP_EXEMPT | set(self.policy.runtime.tool_call_dedup_exempt)
        seen: set[tuple[str, str]] = set()
        rows: list[ToolCall] = []
        immediate: dict[int, ToolResult] = {}
        for i, call in enumerate(reply.tool_calls):
            row = ToolCall(
                run=run, turn=turn, position=i, call_id=call.id, name=call.name, arguments=call.arguments
            )
            key = (call.name, json.dumps(call.arguments, sort_keys=True, default=str))
            if call.name not in exempt and key in seen:
                immediate[i] = ToolResult.fail(msg.duplicate_call(call.name))
            elif call.name not in run.tools and call.name not in SELF_CHECKING:
                immediate[i] = ToolResult.fail(f"Tool '{call.name}' is not available to this agent")
            elif needs_approval(risk, call.name):
                row.wait_kind = "approval"
            elif call.name in ("spawn_subagent", "delegate"):
                row.wait_kind = "children"  # the usual wait; admission changes it if need be
            seen.add(key)
            rows.append(row)
        with events.tree_tx(self.root_id):
            rows = self._record_calls(rows, immediate, turn)
            ready = [r for i, r in enumerate(rows) if i not in immediate and r.wait_kind != "approval"]
            if not any(r.name in LOCAL_TOOLS for r in ready):
                # Nothing to run outside a transaction: admit children and wait in this commit.
                return self._execute(ready)
        return self._execute(ready)

    def _record_calls(
        self, rows: list[ToolCall], immediate: dict[int, ToolResult], turn: int
    ) -> list[ToolCall]:
        run = self.run
        sql.insert(rows, returning=True)
        if any(r.pk is None for r in rows):  # backends without RETURNING
            by_pos = {c.position: c for c in ToolCall.objects.filter(run=run, turn=turn)}
            rows = [by_pos[r.position] for r in rows]
        for i, row in enumerate(rows):
            events.emit(
                run, "tool.call", {"call_id": row.call_id, "name": row.name, "arguments": row.arguments}
            )
            if i in immediate:
                row.run = run
                self._complete(row, immediate[i])
            elif row.wait_kind == "approval":
                approval = Approval.objects.create(tool_call=row, run=run)
                events.emit(
                    run,
                    "approval.requested",
                    {"approval_id": approval.pk, "call_id": row.call_id, "name": row.name,
                     "arguments": row.arguments},
                )  # fmt: skip
        return rows

    def _execute(self, rows: list[ToolCall]) -> bool:
        """Run local tools (outside any transaction), then admit spawn/delegate calls and decide
        whether the run waits. True when the run can go on to its next model turn."""
        local = [r for r in rows if r.name in LOCAL_TOOLS]
        if local and not Run.objects.filter(pk=self.run.pk, status=Run.Status.RUNNING).exists():
            raise Stopped  # cancelled (or timed out) meanwhile: act no further
        results: dict[int, ToolResult] = {}
        with baton.released() if local else nullcontext():  # other runs step meanwhile
            if len(local) > 1 and self.policy.runtime.parallel_tools:
                with ThreadPoolExecutor(max_workers=min(8, len(local))) as pool:
                    for row, res in zip(local, pool.map(self._run_local_in_thread, local), strict=True):
                        results[row.pk] = res
            else:
                for row in local:
                    results[row.pk] = self._run_local(row)
        # What the local tools did is recorded even if the run stops right after; a refusal
        # of the wait below must only undo admissions of children, never these results.
        # Nested in _handle_tool_calls' transaction when there is no local tool: what goes
        # wrong here ends that one as well, so no savepoints.
        with events.tree_tx(self.root_id, savepoint=False):
            for row in local:
                row.run = self.run
                self._complete(row, results[row.pk])
        with events.tree_tx(self.root_id, savepoint=False):
            for row in rows:
                if row.name not in LOCAL_TOOLS:
                    row.run = self.run
                    self._orchestrate(row)
            return self._wait_or_continue()

    def _complete(self, row: ToolCall, result: ToolResult) -> None:
        complete_call(row, result.as_dict())

    def _wait_or_continue(self) -> bool:
        """Inside a transaction: True when nothing blocks the run (it goes on: its next step
        folds the results, and runs calls approved meanwhile); else it waits, holding no worker."""
        run = self.run
        lock_run(run.pk)
        pending, approvals = sql.blocking_counts(run.pk)
        if not pending:
            return True
        status = Run.Status.AWAITING_APPROVAL if approvals else Run.Status.WAITING
        if not sql.execute(
            f"UPDATE {sql.table(Run)} SET status = %s, owner = %s WHERE id = %s AND status = %s AND owner = %s",
            [status, "", sql.uid(run.pk), "running", heartbeat.WORKER_ID],
        ):
            raise Stopped
        events.emit(run, "run.waiting", {"status": status, "pending": pending})
        store.flush(self.transcript)
        t = self.transcript
        if ready.enabled():
            # The only worker is this process: whoever resumes the run here finds the run, its
            # policy and its messages as they are now (only its owner changes them; take_claimed
            # re-reads what others may change). With a shared broker another worker may resume it.
            t.run, t.policy, t.current, t.turns = run, self.policy, True, run.turns
        else:
            t.run, t.policy, t.current = None, None, False
        store.keep(run.pk, t)
        kick_queue()
        return False

    def _orchestrate(self, row: ToolCall) -> None:
        from runs_app.engine.spawn import spawn_subagent

        run = self.run
        if row.name == "spawn_subagent":
            adm = spawn_subagent(parent=run, args=row.arguments, parent_call=row, policy=self.policy)
        elif row.name == "delegate":
            from runs_app.engine.delegate import delegate_tool

            adm = delegate_tool(caller=run, args=row.arguments, parent_call=row)
        elif row.name == "sessions_yield":
            ToolCall.objects.filter(pk=row.pk).update(wait_kind="yield")
            row.wait_kind = "yield"
            from runs_app.engine.settle import _wake_waiters

            _wake_waiters(run)
            return
        else:
            self._complete(row, ToolResult.fail(f"Unknown tool '{row.name}'"))
            return
        if adm.result is not None:
            self._complete(row, adm.result)
        elif adm.wait_kind:
            ToolCall.objects.filter(pk=row.pk).update(wait_kind=adm.wait_kind, deadline=adm.deadline)
        elif row.wait_kind != "children":
            ToolCall.objects.filter(pk=row.pk).update(wait_kind="children")

    # -- local tools ------------------------------------------------------------------------
    def _run_local_in_thread(self, row: ToolCall) -> ToolResult:
        try:
            return self._run_local(row)
        finally:
            connection.close()

    def _run_local(self, row: ToolCall) -> ToolResult:
        run, risk, runtime = self.run, self.policy.risk, self.policy.runtime
        name, args = row.name, row.arguments if isinstance(row.arguments, dict) else {}
        if name in ACTING_TOOLS:
            if risk.level == "readonly":
                return ToolResult.fail(readonly_refusal(name))
            try:
                spend_action(key=run.tracker_key, runtime=runtime)
            except BudgetExhausted as exc:
                return ToolResult.fail(exc.message)
        try:
            return self._dispatch_local(name, args)
        except Exception as exc:  # a tool bug must not kill the run
            log.exception("tool %s failed", name)
            return ToolResult.fail(f"Tool '{name}' failed: {exc.__class__.__name__}")

    def _dispatch_local(self, name: str, args: dict[str, Any]) -> ToolResult:
        run = self.run
        if name in ("file_read", "file_write", "file_list", "shell"):
            import os

            Path(run.workspace).mkdir(parents=True, exist_ok=True)
            ctx = LocalToolContext(
                risk=self.policy.risk,
                runtime=self.policy.runtime,
                workspace=Path(run.workspace),
                env=dict(os.environ),
            )
            fn = {"file_read": files.file_read, "file_write": files.file_write, "file_list": files.file_list,
                  "shell": shell.shell}[name]  # fmt: skip
            return fn(ctx, args)
        if name == "memory_store":
            return memory.memory_store(agent=run.memory_agent, run_id=run.pk, args=args)
        if name == "memory_recall":
            agent = Agent.objects.filter(alias=run.memory_agent).first()
            readable = list(agent.read_memory_from) if agent else []
            return memory.memory_recall(agent=run.memory_agent, readable=readable, args=args)
        if name == "model_switch":
            return self._model_switch(args)
        return ToolResult.fail(f"Unknown tool '{name}'")

    def _model_switch(self, args: dict[str, Any]) -> ToolResult:
        from agents_app.models import ModelProvider
        from runs_app.engine.frozen import provider_chain

        ref = args.get("model_provider")
        if not isinstance(ref, str) or "." not in ref:
            return ToolResult.fail("'model_provider' must be dotted form <type>.<alias>")
        ptype, _, alias = ref.partition(".")
        row = ModelProvider.objects.filter(type=ptype, alias=alias).first()
        if row is None:
            return ToolResult.fail(f"Unknown model provider '{ref}'")
        from agents_app.selectors import config_snapshot_get

        chain = provider_chain(config_snapshot_get(), row.to_spec())
        policy = FrozenPolicy(
            risk=self.policy.risk, runtime=self.policy.runtime, provider=row.to_spec(), chain=chain
        )
        Run.objects.filter(pk=self.run.pk).update(policy=policy.to_json(), provider_ref=ref)
        self.policy = policy
        self.run.policy = policy.to_json()
        self.run.provider_ref = ref
        return ToolResult.ok(f"Switched to model provider '{ref}' ({row.model or row.type}).")

    # -- resuming -----------------------------------------------------------------------------
    def _last_turn_has_calls(self) -> bool:
        msgs = self.transcript.messages
        last = next((m for m in reversed(msgs) if m.role != "user"), None)
        return last is not None and last.role == "assistant" and bool(last.tool_calls)

    def _fold_tool_results(self) -> bool:
        """Turn the finished tool calls of the last turn into tool messages. False = must wait."""
        run = self.run
        while True:
            # The approval of a call is read (one query) only for a call that waits on one.
            calls = sql.CALLS_OF_TURN.models(sql.uid(run.pk), run.turns - 1)
            approved = [
                c for c in calls
                if c.status == ToolCall.Status.PENDING and c.wait_kind == "approval"
                and getattr(c, "approval", None) is not None and c.approval.status == Approval.Status.APPROVED
            ]  # fmt: skip
            if approved:
                for c in approved:
                    ToolCall.objects.filter(pk=c.pk).update(wait_kind="")
                    c.wait_kind = ""
                if not self._execute(approved):
                    return False
                continue
            if any(c.status == ToolCall.Status.PENDING for c in calls):
                with events.tree_tx(self.root_id):
                    if not self._wait_or_continue():
                        return False
                continue  # settled or approved while we looked: look again
            break
        # Staged, not written: the tool messages are derived from the calls' stored results, so
        # they go in with the run's next write (the next model turn's commit, or the run's end),
        # a commit fewer per turn. A run lost meanwhile gets them derived again from its calls
        # (`children.stored_conversation`, used by run_resume).
        for c in sorted(calls, key=lambda c: c.position):
            content = msg.tool_message(c.result)
            store.stage(run.pk, self.transcript, ChatMessage("tool", content, tool_call_id=c.call_id))
        return True

    def _deliver_inbox(self) -> None:
        run = self.run
        if not run.has_inbox:
            return
        Run.objects.filter(pk=run.pk).update(has_inbox=False)  # before reading: a later one re-sets it
        run.has_inbox = False
        steers = list(Steer.objects.filter(run=run, delivered=False))
        announces = list(Announce.objects.filter(parent=run, delivered=False).order_by("created_at", "pk"))
        if not steers and not announces:
            return
        with events.tree_tx(self.root_id):
            for a in announces:
                store.append(run.pk, self.transcript, ChatMessage("user", a.text))
            for s in steers:
                store.append(run.pk, self.transcript, ChatMessage("user", s.text))
            Announce.objects.filter(pk__in=[a.pk for a in announces]).update(delivered=True)
            Steer.objects.filter(pk__in=[s.pk for s in steers]).update(delivered=True)
