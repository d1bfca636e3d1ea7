"""Server-rendered HTML of run-tree nodes, built in Python (not per-node template includes) so
a 1,000-node tree renders fast. The page, the on-demand "more children" batches and the live
refresh of node headers all come from these functions."""

from __future__ import annotations

from html import escape as _e
from typing import Any

from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from runs_app.templatetags.clawboard import money, tokens
from runs_app.trace import ACTIVE, duration_text

CHILDREN_PAGE = 50
LEAF = ' data-leaf="1"'


def _tokens(n: dict[str, Any]) -> str:
    own = f"{tokens(n['input_tokens'])}+{tokens(n['output_tokens'])} tok · {money(n['cost_cents'])}"
    sub = n["subtree"]
    if sub["runs"] > 1:
        own += (
            f" (subtree {tokens(sub['runs'])} runs: {tokens(sub['input_tokens'])}+"
            f"{tokens(sub['output_tokens'])} tok · {money(sub['cost_cents'])})"
        )
    return own


def _ms_attr(value: float | None) -> str:
    return "" if value is None else str(int(value))


def _bar_style(s: float, e: float | None, fallback: float) -> str:
    return f"--s:{int(s)};--e:{int(e if e is not None else max(s, fallback))}"


def _duration(n: dict[str, Any]) -> str:
    running = n.get("e_ms") is None and n["status"] in ACTIVE
    text = duration_text(n.get("duration_ms")) if "duration_ms" in n else "…"
    live = " live" if running else ""
    return f'<span class="meta duration{live}" id="run-{_e(n["id"])}-duration">{_e(text)}</span>'


def _lane(n: dict[str, Any]) -> str:
    """The node's row of the waterfall: its own bar, and one thin bar per model or tool call."""
    if "s_ms" not in n:
        return '<span class="lane"></span>'
    s, e = n["s_ms"], n["e_ms"]
    now = s + (n.get("duration_ms") or 0)
    status = _e(n["status"])
    running = " running" if e is None else ""
    parts = [
        f'<span class="lane"><i class="bar status-{status}{running}" style="{_bar_style(s, e, now)}" '
        f'title="{_e(n["agent"])} · {status} · {_e(duration_text(n.get("duration_ms")))}"></i>'
    ]
    for span in n.get("spans", ()):
        ss, se = span["s_ms"], span["e_ms"]
        kind = "model" if span["kind"] == "model" else "tool"
        state = " failed" if not span["ok"] else (" running" if se is None else "")
        took = duration_text(se - ss) if se is not None else "running"
        if span.get("closed"):
            state, took = " closed", f"cancelled after {duration_text(se - ss)}"
        label = f"{'model' if kind == 'model' else 'tool'} {span['name']} · {took}"
        parts.append(
            f'<i class="span span-{kind}{state}" style="{_bar_style(ss, se, now)}" title="{_e(label)}"></i>'
        )
    parts.append("</span>")
    return "".join(parts)


def _outcomes(n: dict[str, Any]) -> str:
    """A badge per mark of what the run ran into (a denial, a refusal, a tool error)."""
    return "".join(
        f'<span class="badge outcome" data-outcome="{_e(o)}">{_e(o)}</span> ' for o in n.get("outcomes", ())
    )


def _head(n: dict[str, Any], oob: bool) -> str:
    # f-strings with every value escaped (what format_html does, at a fraction of its cost: the
    # page of a 10,000-node tree builds 10,000 of these).
    rid = _e(n["id"])
    status = _e(n["status"])
    kind = n["kind"] + (f" · {n['mode']}" if n["mode"] else "") + f" · {n['execution']}"
    name = n["label"] or n["task_name"]
    named = f' <span class="meta">“{_e(name)}”</span>' if name else ""
    parallel = (
        ' <span class="parallel-mark" title="ran side by side with a sibling">∥</span>'
        if n.get("parallel")
        else ""
    )
    if n["error"]:
        preview = f'<span class="node-error" id="run-{rid}-error">{_e(n["error"][:300])}</span>'
    else:
        preview = f'<span class="preview" id="run-{rid}-output">{_e(n["output_preview"][:300])}</span>'
    swap = ' hx-swap-oob="true"' if oob else ""
    return (
        f'<div class="node-head" id="run-{rid}-head"{swap} hx-get="/runs/{rid}/detail/" '
        f'hx-target="#trace-detail" hx-swap="innerHTML" data-status="{status}" '
        f'data-s="{_ms_attr(n.get("s_ms"))}" data-e="{_ms_attr(n.get("e_ms"))}" role="treeitem" tabindex="-1">'
        f'<span class="node-label" style="--level:{int(n.get("level", 0))}">'
        f'<button type="button" class="twisty" tabindex="-1" aria-label="fold or unfold">▾</button>'
        f'<span class="badge status-{status}" id="run-{rid}-status">{status}</span> '
        f"{_outcomes(n)}"
        f'<span class="agent">{_e(n["agent"])}</span>{named} <span class="meta">{_e(kind)}</span>{parallel} '
        f'{_duration(n)} <span class="meta tokens" id="run-{rid}-tokens">{_e(_tokens(n))}</span> '
        f"{preview}</span>{_lane(n)}</div>"
    )


def node_head(n: dict[str, Any], *, oob: bool = False) -> str:
    return mark_safe(_head(n, oob))  # every value in it is escaped


def node_html(n: dict[str, Any], *, children_limit: int = CHILDREN_PAGE) -> str:
    """One node with its subtree (children beyond `children_limit` load on demand)."""
    parts: list[str] = []
    append = parts.append
    # iterative to survive deep trees: a stack of (node, phase)
    stack: list[tuple[dict[str, Any], int]] = [(n, 0)]
    while stack:
        node, phase = stack.pop()
        if phase == 0:
            rid = _e(node["id"])
            append(
                f'<li class="node" id="run-{rid}" data-parent="{_e(node["parent_id"] or "")}" '
                f'data-status="{_e(node["status"])}"{"" if node["children"] else LEAF}>'
            )
            append(_head(node, False))
            append(f'<ul class="children" id="run-{rid}-children" role="group">')
            stack.append((node, 1))
            shown = node["children"][:children_limit]
            for child in reversed(shown):
                stack.append((child, 0))
        else:
            hidden = len(node["children"]) - children_limit
            if hidden > 0:
                append(more_button(node["id"], children_limit, hidden))
            append("</ul></li>")
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
