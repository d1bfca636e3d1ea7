"""Exact texts of SPEC §4–§6 that the engine hands to models and parents."""

from __future__ import annotations

import re
from datetime import timedelta

TASK_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
RUN_LOST = "run lost: its worker stopped before it finished"
MODEL_CALL_AGAIN = "its worker stopped during a model call; the call is made again"
CANCELLED_DIRECT = "Cancelled by user request"
CANCELLED_CASCADE = "Cancelled by parent session"
NO_OUTPUT = "subagent completed without output"
SILENT_REPLIES = frozenset({"announce_skip", "no_reply"})
BEGIN_FENCE = "<<<BEGIN_CHILD_RESULT>>>"
END_FENCE = "<<<END_CHILD_RESULT>>>"


def tool_message(result: dict | None) -> str:
    """The tool message a model reads for a finished call: its output, or `Error: <error>`."""
    result = result or {}
    return result.get("output", "") if result.get("success") else f"Error: {result.get('error')}"


def missing_prompt() -> str:
    return "Missing or empty 'prompt' parameter"


# A prompt or context longer than this is refused (REST, dashboard, schedules and the tools).
MAX_PROMPT_CHARS = 100_000


def too_long(field: str, value: object, limit: int = MAX_PROMPT_CHARS) -> str | None:
    """`prompt is too long (<n> chars, max 100000)`, or None when `value` fits."""
    if isinstance(value, str) and len(value) > limit:
        return f"{field} is too long ({len(value)} chars, max {limit})"
    return None


def nesting_refusal(depth: int, max_depth: int) -> str:
    if max_depth == 1:
        return "spawn_subagent: a subagent may not spawn its own subagents (depth-1 cap)"
    return f"spawn_subagent is not allowed at this depth (current depth: {depth}, max: {max_depth})"


def spawn_not_allowed(alias: str) -> str:
    return f"spawn_subagent: refused — agent '{alias}' risk_profile does not list spawn_subagent in allowed_tools"


def too_many_children(n: int, max_n: int) -> str:
    return f"spawn_subagent has reached max active children for this run ({n}/{max_n})"


def invalid_task_name(value: str) -> str:
    return f'Invalid task_name "{value}": must match [a-z][a-z0-9_-]{{0,63}} and not be "last" or "all"'


def duplicate_call(name: str) -> str:
    return f"Skipped duplicate tool call '{name}' with identical arguments in this turn."


def denied(reason: str) -> str:
    return f"Tool call denied by operator: {reason}"


def max_iterations(n: int) -> str:
    return f"Agent exceeded maximum tool iterations ({n})"


def output_budget(used: int, max_tokens: int) -> str:
    return f"Output token budget exhausted for this run tree ({used}/{max_tokens})"


def runtime_text(seconds: float) -> str:
    total = int(timedelta(seconds=max(0, seconds)).total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def fence(text: str) -> str:
    """A child's text is data: markers inside it are neutralised so it cannot close the fence."""
    return text.replace(BEGIN_FENCE, "<<<BEGIN_CHILD_RESULT (escaped)>>>").replace(
        END_FENCE, "<<<END_CHILD_RESULT (escaped)>>>"
    )


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... truncated: {len(text) - limit} more characters]"
