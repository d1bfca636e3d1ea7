"""Server-rendered HTML of run-tree nodes, built in Python (not per-node template includes) so
a 1,000-node tree renders fast. The page, the on-demand "more children" batches and the live
refresh of node headers all come from these functions."""

from __future__ import annotations

from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

CHILDREN_PAGE = 50
ACTIVE = ("queued", "running", "waiting", "awaiting_approval")


def _tokens(n: dict[str, Any]) -> str:
    own = f"{n['input_tokens']}+{n['output_tokens']} tok · ${n['cost_cents'] / 100:.4f}"
    sub = n["subtree"]
    if sub["runs"] > 1:
        own += (
            f" (subtree {sub['runs']} runs: {sub['input_tokens']}+{sub['output_tokens']} tok"
            f" · ${sub['cost_cents'] / 100:.4f})"
        )
    return own


def _duration(n: dict[str, Any]) -> str:
    started = n["started_at"] or n["created_at"]
    finished = n["finished_at"] or ""
    secs = n["duration_secs"]
    text = f"{secs:.1f}s" if secs is not None else "…"
    return format_html(
        '<span class="meta duration" data-started="{}"{}>{}</span>',
        started or "",
        format_html(' data-finished="{}"', finished) if finished or n["status"] not in ACTIVE else "",
        text,
    )


def node_head(n: dict[str, Any], *, oob: bool = False) -> str:
    rid = n["id"]
    kind = n["kind"] + (f" · {n['mode']}" if n["mode"] else "") + f" · {n['execution']}"
    name = n["label"] or n["task_name"]
    preview = (
        format_html('<span class="node-error" id="run-{}-error">{}</span>', rid, n["error"][:300])
        if n["error"]
        else format_html('<span class="preview" id="run-{}-output">{}</span>', rid, n["output_preview"][:300])
    )
    return format_html(
        '<div class="node-head" id="run-{}-head"{} hx-get="/runs/{}/detail/" hx-target="#run-{}-detail" '
        'hx-swap="innerHTML" data-status="{}">'
        '<span class="badge status-{}" id="run-{}-status">{}</span> '
        '<span class="agent">{}</span>{} <span class="meta">{}</span> {} '
        '<span class="meta tokens" id="run-{}-tokens">{}</span> {}</div>',
        rid,
        mark_safe(' hx-swap-oob="true"') if oob else "",
        rid,
        rid,
        n["status"],
        n["status"],
        rid,
        n["status"],
        n["agent"],
        format_html(' <span class="meta">“{}”</span>', name) if name else "",
        kind,
        _duration(n),
        rid,
        _tokens(n),
        preview,
    )


def node_html(n: dict[str, Any], *, children_limit: int = CHILDREN_PAGE) -> str:
    """One node with its subtree (children beyond `children_limit` load on demand)."""
    parts: list[str] = []
    # iterative to survive deep trees: a stack of (node, phase)
    stack: list[tuple[dict[str, Any], int]] = [(n, 0)]
    while stack:
        node, phase = stack.pop()
        if phase == 0:
            rid = node["id"]
            parts.append(
                format_html(
                    '<li class="node" id="run-{}" data-parent="{}" data-status="{}">',
                    rid,
                    node["parent_id"] or "",
                    node["status"],
                )  # fmt: skip
            )
            parts.append(node_head(node))
            parts.append(format_html('<div class="node-detail-wrap" id="run-{}-detail"></div>', rid))
            parts.append(format_html('<ul class="children" id="run-{}-children">', rid))
            stack.append((node, 1))
            shown = node["children"][:children_limit]
            for child in reversed(shown):
                stack.append((child, 0))
        else:
            rid = node["id"]
            hidden = len(node["children"]) - children_limit
            if hidden > 0:
                parts.append(more_button(rid, children_limit, hidden))
            parts.append("</ul></li>")
    return "".join(parts)


def more_button(run_id: str, offset: int, hidden: int) -> str:
    return format_html(
        '<li class="more" id="run-{}-more"><button type="button" class="button" hx-get="/runs/{}/children/?offset={}" '
        'hx-target="#run-{}-more" hx-swap="outerHTML">Show {} more children</button></li>',
        run_id,
        run_id,
        offset,
        run_id,
        hidden,
    )


def children_batch(node: dict[str, Any], offset: int) -> str:
    batch = node["children"][offset : offset + CHILDREN_PAGE]
    html = "".join(node_html(child) for child in batch)
    rest = len(node["children"]) - offset - len(batch)
    if rest > 0:
        html += more_button(node["id"], offset + len(batch), rest)
    return html


def index(root: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every node of the tree by run id (one walk, for looking up many nodes)."""
    found: dict[str, dict[str, Any]] = {}
    stack = [root]
    while stack:
        node = stack.pop()
        found[node["id"]] = node
        stack.extend(node["children"])
    return found


def find(root: dict[str, Any], run_id: str) -> dict[str, Any] | None:
    stack = [root]
    while stack:
        node = stack.pop()
        if node["id"] == run_id:
            return node
        stack.extend(node["children"])
    return None


def text(value: Any) -> str:
    return str(escape(value))
