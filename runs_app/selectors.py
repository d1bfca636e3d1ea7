"""Read-only queries over runs: lists, trees with usage sums, event logs, transcripts, approvals."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db.models import Case, IntegerField, QuerySet, Value, When

from runs_app.models import TERMINAL_STATUSES, Approval, Message, Run, RunEvent, ToolCall

PREVIEW_CHARS = 500
TREE_FIELDS: tuple[str, ...] = (
    "id", "parent_id", "root_id", "agent", "kind", "mode", "execution", "status", "depth", "spawn_depth",
    "session_key", "task_name", "label", "prompt", "output", "error", "input_tokens", "output_tokens",
    "cost_cents", "created_at", "started_at", "finished_at", "created_by_id",
)  # fmt: skip


def run_get(run_id: Any) -> Run | None:
    """The run with this id, or None (also for ids that are not UUIDs)."""
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        return None
    return Run.objects.select_related("created_by").filter(pk=pk).first()


def run_list(filters: Mapping[str, Any]) -> QuerySet[Run]:
    """Runs, newest first. Filters (all optional): status (one or a list), agent, kind, root, since."""
    qs = Run.objects.select_related("created_by").order_by("-created_at", "-id")
    status = filters.get("status")
    if status:
        qs = qs.filter(status__in=[status] if isinstance(status, str) else list(status))
    if filters.get("agent"):
        qs = qs.filter(agent=filters["agent"])
    if filters.get("kind"):
        qs = qs.filter(kind=filters["kind"])
    if filters.get("root"):
        qs = qs.filter(root_id=filters["root"])
    since: datetime | None = filters.get("since")
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    return qs


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _tree_node(run: Run) -> dict[str, Any]:
    end = run.finished_at
    duration = (end - run.started_at).total_seconds() if end and run.started_at else None
    return {
        "id": str(run.pk),
        "parent_id": str(run.parent_id) if run.parent_id else None,
        "agent": run.agent,
        "kind": run.kind,
        "mode": run.mode,
        "execution": run.execution,
        "status": run.status,
        "depth": run.depth,
        "spawn_depth": run.spawn_depth,
        "session_key": run.session_key,
        "task_name": run.task_name,
        "label": run.label,
        "prompt_preview": run.prompt[:PREVIEW_CHARS],
        "output_preview": run.output[:PREVIEW_CHARS],
        "error": run.error,
        "input_tokens": run.input_tokens,
        "output_tokens": run.output_tokens,
        "cost_cents": run.cost_cents,
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "duration_secs": duration,
        "subtree": {
            "runs": 1,
            "input_tokens": run.input_tokens,
            "output_tokens": run.output_tokens,
            "cost_cents": run.cost_cents,
        },
        "children": [],
    }


def run_tree(root_id: Any) -> dict[str, Any]:
    """The whole tree under `root_id`, children by creation time, each node with the usage sums
    of its subtree. One query, whatever the size of the tree. Raises Run.DoesNotExist."""
    runs = list(Run.objects.filter(root_id=root_id).only(*TREE_FIELDS).order_by("created_at", "id"))
    nodes = {str(r.pk): _tree_node(r) for r in runs}
    root = nodes.get(str(root_id))
    if root is None:
        raise Run.DoesNotExist(f"No run tree with root {root_id}")
    for run in runs:
        node = nodes[str(run.pk)]
        if node is root:
            continue
        parent = nodes.get(str(run.parent_id)) if run.parent_id else None
        (parent or root)["children"].append(node)
    # Breadth-first order puts every parent before its children; summing it backwards folds
    # each subtree into its parent without recursion (trees can be deep).
    order: list[dict[str, Any]] = [root]
    for node in order:
        order.extend(node["children"])
    for node in reversed(order):
        for child in node["children"]:
            for key in ("runs", "input_tokens", "output_tokens", "cost_cents"):
                node["subtree"][key] += child["subtree"][key]
    for node in order:
        node["subtree"]["cost_cents"] = round(node["subtree"]["cost_cents"], 6)
    return root


def event_scope(run: Run) -> dict[str, Any]:
    """Which events belong to a run's log: the whole tree for a root run, else the run's own."""
    if run.root_id is None or run.root_id == run.pk:
        return {"root_id": run.pk}
    return {"run_id": run.pk}


def run_events(root_or_run: Run, after: int = 0, limit: int | None = None) -> QuerySet[RunEvent]:
    qs = RunEvent.objects.filter(**event_scope(root_or_run), id__gt=after).order_by("id")
    return qs[:limit] if limit is not None else qs


def run_events_finished(root_or_run: Run) -> bool:
    """True when every run whose events `run_events` returns is terminal."""
    scope = event_scope(root_or_run)
    runs = (
        Run.objects.filter(root_id=scope["root_id"])
        if "root_id" in scope
        else Run.objects.filter(pk=scope["run_id"])
    )
    return not runs.exclude(status__in=TERMINAL_STATUSES).exists()


def _message_json(m: Message) -> dict[str, Any]:
    return {
        "seq": m.seq,
        "role": m.role,
        "content": m.content,
        "tool_calls": m.tool_calls,
        "tool_call_id": m.tool_call_id,
        "created_at": _iso(m.created_at),
    }


def _tool_call_json(c: ToolCall, children: list[str]) -> dict[str, Any]:
    approval: Approval | None = getattr(c, "approval", None)
    return {
        "id": c.pk,
        "turn": c.turn,
        "position": c.position,
        "call_id": c.call_id,
        "name": c.name,
        "arguments": c.arguments,
        "status": c.status,
        "result": c.result,
        "wait_kind": c.wait_kind,
        "children": children,
        "approval": None
        if approval is None
        else {"id": approval.pk, "status": approval.status, "reason": approval.reason},
        "created_at": _iso(c.created_at),
    }


def run_transcript(run: Run) -> dict[str, Any]:
    """The run's stored conversation and every tool call it made, with results and children."""
    messages = list(Message.objects.filter(run=run).order_by("seq"))
    calls = list(ToolCall.objects.filter(run=run).select_related("approval").order_by("turn", "position"))
    children: dict[int, list[str]] = {}
    for call_id, child_id in (
        Run.objects.filter(parent_call__run=run)
        .order_by("created_at", "id")
        .values_list("parent_call_id", "id")
    ):
        children.setdefault(call_id, []).append(str(child_id))
    return {
        "run_id": str(run.pk),
        "messages": [_message_json(m) for m in messages],
        "tool_calls": [_tool_call_json(c, children.get(c.pk, [])) for c in calls],
    }


def approval_get(approval_id: Any) -> Approval | None:
    try:
        pk = int(approval_id)
    except (TypeError, ValueError):
        return None
    return Approval.objects.select_related("tool_call", "run").filter(pk=pk).first()


def approval_list(*, status: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
    """Approvals, pending first then newest, each with its tool call and its chain of runs
    from the root down to the run that asked (two queries besides the approvals)."""
    qs = Approval.objects.select_related("tool_call", "run", "decided_by")
    if status:
        qs = qs.filter(status=status)
    qs = qs.annotate(
        pending_first=Case(
            When(status=Approval.Status.PENDING, then=Value(0)), default=Value(1), output_field=IntegerField()
        )
    ).order_by("pending_first", "-created_at", "-id")
    approvals = list(qs[:limit])
    chains = _chains(approvals)
    return [approval_json(a, chains) for a in approvals]


def _chains(approvals: Sequence[Approval]) -> dict[str, list[dict[str, str]]]:
    roots = {a.run.root_id or a.run_id for a in approvals}
    by_id = {
        str(r["id"]): r
        for r in Run.objects.filter(root_id__in=roots).values("id", "parent_id", "agent", "kind")
    }
    chains: dict[str, list[dict[str, str]]] = {}
    for a in approvals:
        chain: list[dict[str, str]] = []
        current = by_id.get(str(a.run_id))
        seen: set[str] = set()
        while current is not None and str(current["id"]) not in seen:
            seen.add(str(current["id"]))
            chain.append({"run_id": str(current["id"]), "agent": current["agent"], "kind": current["kind"]})
            parent = current["parent_id"]
            current = by_id.get(str(parent)) if parent else None
        chain.reverse()
        chains[str(a.run_id)] = chain
    return chains


def approval_json(
    approval: Approval, chains: dict[str, list[dict[str, str]]] | None = None
) -> dict[str, Any]:
    call = approval.tool_call
    chains = chains if chains is not None else _chains([approval])
    chain = chains.get(str(approval.run_id), [])
    decided_by = approval.decided_by
    return {
        "id": approval.pk,
        "status": approval.status,
        "run_id": str(approval.run_id),
        "root_id": str(approval.run.root_id or approval.run_id),
        "agent": approval.run.agent,
        "tool": call.name,
        "arguments": call.arguments,
        "call_id": call.call_id,
        "chain": chain,
        "created_at": _iso(approval.created_at),
        "decided_by": decided_by.get_username() if decided_by else None,
        "decided_at": _iso(approval.decided_at),
        "reason": approval.reason,
    }
