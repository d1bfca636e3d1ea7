"""`memory_store` and `memory_recall`: notes kept per agent. In a delegate they act on the
TARGET's memory (the run's `memory_agent`), never the caller's (SPEC §3.4)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q

from runs_app.engine.tools.base import ToolResult
from runs_app.models import MemoryEntry

MAX_KEY = 200
MAX_CONTENT = 20000


def memory_store(*, agent: str, run_id: Any, args: dict[str, Any]) -> ToolResult:
    key = args.get("key")
    content = args.get("content")
    if not isinstance(key, str) or not key.strip():
        return ToolResult.fail("Missing 'key' parameter")
    if not isinstance(content, str):
        return ToolResult.fail("Missing 'content' parameter")
    if len(key) > MAX_KEY or len(content) > MAX_CONTENT:
        return ToolResult.fail(
            f"Memory entry too large (key ≤ {MAX_KEY} chars, content ≤ {MAX_CONTENT} chars)"
        )
    MemoryEntry.objects.update_or_create(
        agent=agent, key=key.strip(), defaults={"content": content, "run_id": run_id}
    )
    return ToolResult.ok(f"Stored memory '{key.strip()}' for agent '{agent}'.")


def memory_recall(*, agent: str, readable: list[str], args: dict[str, Any]) -> ToolResult:
    query = args.get("query") or ""
    if not isinstance(query, str):
        return ToolResult.fail("'query' must be a string")
    limit = args.get("limit", 10)
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        limit = 10
    agents = sorted({agent, *readable})
    rows = MemoryEntry.objects.filter(agent__in=agents)
    if query.strip():
        rows = rows.filter(Q(key__icontains=query.strip()) | Q(content__icontains=query.strip()))
    found = list(rows.order_by("-updated_at")[: min(limit, 100)])
    if not found:
        return ToolResult.ok("No memories found.")
    return ToolResult.ok("\n".join(f"[{m.agent}] {m.key}: {m.content}" for m in found))
