"""One registry of every tool: the JSON schemas offered to a model, which tools are local,
and how a local tool call is run (`run_local`)."""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

from agents_app.models import Agent
from agents_app.reachability import NO_ROSTER
from policies_app.policy import ACTING_TOOLS, ALL_TOOLS, TOOL_SEARCH, is_mcp_name, readonly_refusal
from policies_app.tracker import BudgetExhausted
from runs_app.engine.budget import spend_action
from runs_app.engine.providers import ToolSpec
from runs_app.engine.tools import files, memory, shell
from runs_app.engine.tools.base import LocalToolContext, ToolResult
from runs_app.engine.tools.model_switch import model_switch

log = logging.getLogger(__name__)

_OBJ = "object"

ORCHESTRATION_SPECS: dict[str, dict[str, Any]] = {
    "spawn_subagent": {
        "name": "spawn_subagent",
        "description": (
            "Start a subagent: a child run of this same agent on a sub-task. By default waits for it and "
            "returns its final text; background=true returns at once and its result is announced later."
        ),
        "parameters": {
            "type": _OBJ,
            "properties": {
                "prompt": {"type": "string", "description": "The sub-task"},
                "background": {"type": "boolean", "default": False},
                "task_name": {"type": "string", "description": "Optional name, [a-z][a-z0-9_-]{0,63}"},
                "label": {"type": "string"},
                "context": {"type": "string", "enum": ["isolated", "fork"], "default": "isolated"},
            },
            "required": ["prompt"],
        },
    },
    "delegate": {
        "name": "delegate",
        "description": (
            "Hand a task to another agent (action=delegate, default), run several at once (parallel), "
            "start it in the background, or manage background tasks (check_result, list_results, "
            "cancel_task, await_sessions)."
        ),
        "parameters": {
            "type": _OBJ,
            "properties": {
                "action": {
                    "type": "string",
                    "enum": ["delegate", "check_result", "list_results", "cancel_task", "await_sessions"],
                },
                "agent": {"type": "string", "minLength": 1},
                "prompt": {"type": "string", "minLength": 1},
                "context": {"type": "string"},
                "background": {"type": "boolean"},
                "parallel": {"type": "array", "items": {"type": "string"}},
                "task_id": {"type": "string"},
                "task_ids": {"type": "array", "items": {"type": "string"}},
                "timeout_ms": {"type": "integer"},
            },
            # Required although the other actions ignore them: a model that reads the schema as a
            # grammar (llama.cpp) otherwise ends the object before naming an agent or a task
            # (docs/decisions.md, "The delegate schema requires agent and prompt").
            "required": ["agent", "prompt"],
        },
    },
    "sessions_yield": {
        "name": "sessions_yield",
        "description": "Wait until every background subagent of this run has finished and announced.",
        "parameters": {"type": _OBJ, "properties": {}},
    },
    "memory_store": {
        "name": "memory_store",
        "description": "Store a note in this agent's memory under a key (replaces an earlier note with that key).",
        "parameters": {
            "type": _OBJ,
            "properties": {"key": {"type": "string"}, "content": {"type": "string"}},
            "required": ["key", "content"],
        },
    },
    "memory_recall": {
        "name": "memory_recall",
        "description": "Find notes in this agent's memory (and the memories it may read) matching a query.",
        "parameters": {
            "type": _OBJ,
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "default": 10}},
        },
    },
    "model_switch": {
        "name": "model_switch",
        "description": "Switch this run to another configured model provider (<type>.<alias>) for its next turns.",
        "parameters": {
            "type": _OBJ,
            "properties": {"model_provider": {"type": "string"}},
            "required": ["model_provider"],
        },
    },
}

ALL_SPECS: dict[str, dict[str, Any]] = {**files.TOOL_SPECS, **shell.TOOL_SPECS, **ORCHESTRATION_SPECS}
assert set(ALL_SPECS) == set(ALL_TOOLS), set(ALL_SPECS) ^ set(ALL_TOOLS)


def _memory_store(ctx: LocalToolContext, args: dict[str, Any]) -> ToolResult:
    return memory.memory_store(agent=ctx.memory_agent, run_id=ctx.run_id, args=args)


def _memory_recall(ctx: LocalToolContext, args: dict[str, Any]) -> ToolResult:
    agent = Agent.objects.filter(alias=ctx.memory_agent).first()
    readable = list(agent.read_memory_from) if agent else []
    return memory.memory_recall(agent=ctx.memory_agent, readable=readable, args=args)


# The tools a run executes itself, in its worker, outside any database transaction. The others
# (spawn_subagent, delegate, sessions_yield) start or wait on runs: the engine admits them.
LOCAL: dict[str, Callable[[LocalToolContext, dict[str, Any]], ToolResult]] = {
    "file_read": files.file_read,
    "file_write": files.file_write,
    "file_list": files.file_list,
    "shell": shell.shell,
    "memory_store": _memory_store,
    "memory_recall": _memory_recall,
    "model_switch": model_switch,
}
LOCAL_TOOLS: frozenset[str] = frozenset(LOCAL)


def is_local(name: str) -> bool:
    """Run by the worker itself: the local tools, MCP tools and `tool_search`."""
    return name in LOCAL_TOOLS or name == TOOL_SEARCH or is_mcp_name(name)


# Tools that the duplicate-call guard never skips (SPEC §5).
DEDUP_EXEMPT: frozenset[str] = frozenset({"spawn_subagent", "delegate"})

_SPEC_OBJECTS: dict[str, ToolSpec] = {name: ToolSpec(**spec) for name, spec in ALL_SPECS.items()}


def tool_specs(names: list[str] | tuple[str, ...], *, roster: tuple[str, ...] = ()) -> list[ToolSpec]:
    """The schemas of `names`; `delegate`'s names the agents of `roster` (the caller's)."""
    return [
        delegate_spec(roster) if n == "delegate" else _SPEC_OBJECTS[n] for n in names if n in _SPEC_OBJECTS
    ]


@lru_cache(maxsize=256)
def delegate_spec(roster: tuple[str, ...]) -> ToolSpec:
    """`delegate` as a caller sees it: its `agent` names the agents it may reach, as ZeroClaw's
    does (`Available: a, b`, or `(none configured)`), and takes only one of them."""
    spec = copy.deepcopy(ORCHESTRATION_SPECS["delegate"])
    agent = spec["parameters"]["properties"]["agent"]
    agent["description"] = f"Name of the agent to delegate to. Available: {', '.join(roster) or NO_ROSTER}"
    if roster:
        agent["enum"] = list(roster)
    return ToolSpec(**spec)


def run_local(name: str, ctx: LocalToolContext, args: Any, *, tracker_key: str) -> ToolResult:
    """Run one local tool call: the read-only refusal and one action of the tracker's budget
    for a tool that acts, then the tool. A tool that raises fails its call, not the run."""
    args = args if isinstance(args, dict) else {}
    if name in ACTING_TOOLS:
        if ctx.risk.level == "readonly":
            return ToolResult.fail(readonly_refusal(name))
        try:
            spend_action(key=tracker_key, runtime=ctx.runtime)
        except BudgetExhausted as exc:
            return ToolResult.fail(exc.message)
    if name in ("file_read", "file_write", "file_list", "shell"):
        Path(ctx.workspace).mkdir(parents=True, exist_ok=True)
    try:
        return LOCAL[name](ctx, args)
    except Exception as exc:
        log.exception("tool %s failed", name)
        return ToolResult.fail(f"Tool '{name}' failed: {exc.__class__.__name__}")
