"""The run page's trace view, pure (no ORM): where each run and each model or tool call sits on
the waterfall, and how a duration is written.

Offsets are milliseconds from the root's start. A node is drawn inside its parent: its start
is never before the parent's, its end never after the parent's end (a cancelled child that
wrote its end a little after its parent's would otherwise look longer than the parent), and
its calls are drawn inside it the same way (a call still open when its run ended stops there). Durations are floored, never rounded, so a span
that is no longer than another is never written as longer."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from runs_app.templatetags.clawboard import duration

ACTIVE = ("queued", "running", "waiting", "awaiting_approval")


def duration_text(ms: float | None) -> str:
    """A span in milliseconds, in the dashboard's one format (the `duration` filter: `87 ms`,
    `1.23 s`, `1m 05s`, floored); `…` while unknown."""
    if ms is None or ms != ms:  # None or NaN
        return "…"
    return duration(max(0.0, ms) / 1000)


def _ms(value: str | None, t0: datetime) -> float | None:
    if not value:
        return None
    return (datetime.fromisoformat(value) - t0).total_seconds() * 1000


def _clamp(value: float, low: float, high: float | None) -> float:
    value = max(low, value)
    return value if high is None else min(value, high)


def layout(root: dict[str, Any], spans: dict[str, list[dict[str, Any]]], now: datetime) -> dict[str, Any]:
    """Set on every node of `root` (a `selectors.run_tree` answer): `level` (0 for the root),
    `s_ms` and `e_ms` (None while it runs), `duration_ms`, `parallel` (it overlaps a sibling)
    and `spans`, its model and tool calls from `spans` (by run id), clamped inside it.
    Returns {"t0": root start (ISO), "now_ms": now as an offset, "end_ms": the tree's end}."""
    t0 = datetime.fromisoformat(root["started_at"] or root["created_at"])
    now_ms = (now - t0).total_seconds() * 1000
    end_ms = 0.0
    root["level"] = 0
    order = [root]
    bounds: dict[str, tuple[float, float | None]] = {}
    for node in order:
        parent = bounds.get(node["parent_id"] or "") if node is not root else None
        low, high = parent if parent is not None else (0.0, None)
        start = _ms(node["started_at"] or node["created_at"], t0) or 0.0
        finished = _ms(node["finished_at"], t0)
        s = _clamp(start, low, high)
        e = None if finished is None else _clamp(finished, s, high)
        if e is None and node["status"] not in ACTIVE:
            e = s  # ended without an end time (a row written by hand): a point
        node["s_ms"], node["e_ms"] = s, e
        node["duration_ms"] = (e if e is not None else max(s, now_ms)) - s
        end_ms = max(end_ms, e if e is not None else now_ms)
        bounds[node["id"]] = (s, e)
        node["spans"] = [_clamped_span(span, t0, s, e) for span in spans.get(node["id"], ())]
        node["parallel"] = False
        for child in node["children"]:
            child["level"] = node["level"] + 1
        order.extend(node["children"])
    for node in order:
        _mark_parallel(node["children"])
    return {"t0": t0.isoformat(), "now_ms": now_ms, "end_ms": max(end_ms, 1.0)}


def _clamped_span(span: dict[str, Any], t0: datetime, low: float, high: float | None) -> dict[str, Any]:
    start = _ms(span["start"], t0)
    end = _ms(span["end"], t0)
    s = _clamp(start if start is not None else low, low, high)
    if end is None and high is not None:
        # The run ended while the call was open (cancelled, timed out, lost): the call was
        # closed with it, so its bar stops at the run's end instead of growing on.
        return {**span, "s_ms": s, "e_ms": high, "closed": True}
    e = None if end is None else _clamp(end, s, high)
    return {**span, "s_ms": s, "e_ms": e}


def _mark_parallel(children: list[dict[str, Any]]) -> None:
    """Siblings whose times overlap ran side by side (a running one reaches to now and on)."""
    reach, reacher = -math.inf, None
    for child in sorted(children, key=lambda c: c["s_ms"]):
        if reacher is not None and child["s_ms"] < reach:
            child["parallel"] = reacher["parallel"] = True
        end = math.inf if child["e_ms"] is None else child["e_ms"]
        if end > reach:
            reach, reacher = end, child
