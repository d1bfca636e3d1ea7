"""One registry of every tool: the JSON schemas offered to a model, and which are local."""

from __future__ import annotations

from typing import Any

from policies_app.policy import ALL_TOOLS
from runs_app.engine.providers import ToolSpec
from runs_app.engine.tools import files, shell

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
                "agent": {"type": "string"},
                "prompt": {"type": "string"},
                "context": {"type": "string"},
                "background": {"type": "boolean"},
                "parallel": {"type": "array", "items": {"type": "string"}},
                "task_id": {"type": "string"},
                "task_ids": {"type": "array", "items": {"type": "string"}},
                "timeout_ms": {"type": "integer"},
            },
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

LOCAL_TOOLS: frozenset[str] = frozenset(
    {"file_read", "file_write", "file_list", "shell", "memory_store", "memory_recall", "model_switch"}
)
# Tools that the duplicate-call guard never skips (SPEC §5).
DEDUP_EXEMPT: frozenset[str] = frozenset({"spawn_subagent", "delegate"})

_SPEC_OBJECTS: dict[str, ToolSpec] = {name: ToolSpec(**spec) for name, spec in ALL_SPECS.items()}


def tool_specs(names: list[str] | tuple[str, ...]) -> list[ToolSpec]:
    return [_SPEC_OBJECTS[n] for n in names if n in _SPEC_OBJECTS]
