"""What a model turn means for its run: a pure function, no database.

`decide(state, turn)` says whether the run finishes (`Finish`), goes on to its next model turn
once the turn's local tools have run (`Continue`), or has called something it must wait for:
children, an operator's approval, its background subagents (`Wait`). Each tool call is
classified on the way (`Planned.kind`); `apply` writes the decision."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from policies_app.policy import is_mcp_name, mcp_server_of, needs_approval
from policies_app.specs import RiskProfileSpec
from runs_app.engine import messages as msg
from runs_app.engine.providers import ToolCallRequest, Usage
from runs_app.engine.tools.registry import DEDUP_EXEMPT, is_local
from runs_app.models import Run

INVALID_COMPLETION = "model provider returned an invalid semantic completion."
# Tools whose own checks refuse a call the run's registry lacks, with their exact messages
# (SPEC §5 check 3: `spawn_subagent: refused — …`), so the generic refusal must not preempt them.
SELF_CHECKING: frozenset[str] = frozenset({"spawn_subagent"})
# Calls the run waits on (its worker is given up until they are done).
WAITING_KINDS: frozenset[str] = frozenset({"approval", "spawn_subagent", "delegate", "sessions_yield"})

CallKind = Literal["refused", "local", "approval", "spawn_subagent", "delegate", "sessions_yield"]


@dataclass(frozen=True)
class Turn:
    """One model call's answer, or why there is none (`failure`)."""

    text: str = ""
    calls: tuple[ToolCallRequest, ...] = ()
    usage: Usage = field(default_factory=Usage)
    provider_ref: str = ""
    model: str = ""
    failure: str | None = None
    invalid: bool = False  # no usable answer came (empty or think-only)
    requested_at: str = ""  # when the call was made (ISO 8601)
    answered_at: str = ""  # when its answer (or failure) came back (ISO 8601)
    # The worst-case cost reserved on the tracker for this call, and the day it is on (the
    # turn's record settles it: `budget.worst_case_cents`, `tracker_settle_cost`).
    reserved: float = 0.0
    reserved_on: date | None = None

    def as_json(self) -> dict[str, Any]:
        """The turn as a task argument: the answer of a call in flight reaches the worker that
        continues the run in a task message (`inflight`)."""
        return {
            "text": self.text,
            "calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in self.calls],
            "usage": [self.usage.input_tokens, self.usage.output_tokens],
            "provider_ref": self.provider_ref,
            "model": self.model,
            "failure": self.failure,
            "invalid": self.invalid,
            "requested_at": self.requested_at,
            "answered_at": self.answered_at,
            "reserved": self.reserved,
            "reserved_on": self.reserved_on.isoformat() if self.reserved_on else None,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Turn:
        return cls(
            text=data["text"],
            calls=tuple(ToolCallRequest(c["id"], c["name"], c["arguments"]) for c in data["calls"]),
            usage=Usage(*data["usage"]),
            provider_ref=data["provider_ref"],
            model=data["model"],
            failure=data["failure"],
            invalid=data["invalid"],
            requested_at=data["requested_at"],
            answered_at=data.get("answered_at", ""),
            reserved=data["reserved"],
            reserved_on=date.fromisoformat(data["reserved_on"]) if data["reserved_on"] else None,
        )


@dataclass(frozen=True)
class RunState:
    """What `decide` needs of a run."""

    kind: str
    agentic: bool
    tools: frozenset[str]
    risk: RiskProfileSpec
    dedup_exempt: frozenset[str] = frozenset()
    # MCP tools held for an operator by their annotations (policy.mcp_needs_approval).
    gated: frozenset[str] = frozenset()
    # The run's MCP servers that could not be listed, and the error a call to them gets.
    mcp_down: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Planned:
    position: int
    call: ToolCallRequest
    kind: CallKind
    refusal: str = ""  # kind "refused": the error the call is completed with at once


@dataclass(frozen=True)
class Finish:
    status: str
    output: str = ""
    error: str = ""


@dataclass(frozen=True)
class Continue:
    calls: tuple[Planned, ...]


@dataclass(frozen=True)
class Wait:
    calls: tuple[Planned, ...]


Decision = Finish | Continue | Wait


def decide(state: RunState, turn: Turn) -> Decision:
    if turn.failure is not None:
        if turn.invalid:
            return _no_answer(state)
        return Finish(Run.Status.FAILED, error=turn.failure)
    calls = turn.calls if state.agentic else ()
    if not calls:
        if turn.text.strip():
            return Finish(Run.Status.COMPLETED, output=turn.text)
        return _no_answer(state)
    planned = plan_calls(state, calls)
    if any(p.kind in WAITING_KINDS for p in planned):
        return Wait(planned)
    return Continue(planned)


def _no_answer(state: RunState) -> Finish:
    """A turn with no text and no call. A subagent completes, and its parent reads `subagent
    completed without output` (SPEC §5); any other run has no usable answer (SPEC §6.1)."""
    if state.kind == Run.Kind.SUBAGENT:
        return Finish(Run.Status.COMPLETED, output="")
    return Finish(Run.Status.FAILED, error=INVALID_COMPLETION)


def plan_calls(state: RunState, calls: tuple[ToolCallRequest, ...]) -> tuple[Planned, ...]:
    exempt = DEDUP_EXEMPT | state.dedup_exempt
    seen: set[tuple[str, str]] = set()
    planned: list[Planned] = []
    for i, call in enumerate(calls):
        key = (call.name, json.dumps(call.arguments, sort_keys=True, default=str))
        if call.name not in exempt and key in seen:
            planned.append(Planned(i, call, "refused", msg.duplicate_call(call.name)))
        elif call.name not in state.tools and call.name not in SELF_CHECKING:
            down = dict(state.mcp_down).get(mcp_server_of(call.name)) if is_mcp_name(call.name) else None
            refusal = down or f"Tool '{call.name}' is not available to this agent"
            planned.append(Planned(i, call, "refused", refusal))
        elif needs_approval(state.risk, call.name) or call.name in state.gated:
            planned.append(Planned(i, call, "approval"))
        elif call.name in ("spawn_subagent", "delegate", "sessions_yield"):
            planned.append(Planned(i, call, call.name))  # type: ignore[arg-type]
        elif is_local(call.name):
            planned.append(Planned(i, call, "local"))
        else:
            planned.append(Planned(i, call, "refused", f"Unknown tool '{call.name}'"))
        seen.add(key)
    return tuple(planned)
