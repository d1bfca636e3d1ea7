"""Read-only queries over runs: lists, trees with usage sums, event logs, transcripts, approvals."""

from __future__ import annotations

import gc
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import (
    BooleanField,
    Case,
    Count,
    DurationField,
    Exists,
    ExpressionWrapper,
    F,
    IntegerField,
    OuterRef,
    Q,
    QuerySet,
    Value,
    When,
)
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KT
from django.db.models.functions import Left

from policies_app.tracker import tracker_usage
from runs_app.engine.frozen import policy_of
from runs_app.engine.tools import mcp_tools, sandbox
from runs_app.engine.tools.mcp_client import McpTool
from runs_app.models import TERMINAL_STATUSES, Approval, McpServerState, Message, Run, RunEvent, ToolCall

PREVIEW_CHARS = 500
# The columns of a tree node, in the order `run_tree` unpacks them (prompt and output follow,
# cut to PREVIEW_CHARS by the database: a long transcript's output is never read whole).
TREE_FIELDS: tuple[str, ...] = (
    "id", "parent_id", "agent", "kind", "mode", "execution", "status", "depth", "spawn_depth",
    "session_key", "task_name", "label", "error", "input_tokens", "output_tokens", "cost_cents",
    "created_at", "started_at", "finished_at",
)  # fmt: skip


def run_get(run_id: Any) -> Run | None:
    """The run with this id, or None (also for ids that are not UUIDs)."""
    try:
        pk = uuid.UUID(str(run_id))
    except ValueError:
        return None
    return Run.objects.select_related("created_by").filter(pk=pk).first()


# What `sort` accepts, and the column(s) each orders by (newest first by default).
RUN_SORTS: dict[str, tuple[str, ...]] = {
    "started": ("created_at", "id"),
    "-started": ("-created_at", "-id"),
    "duration": ("duration", "-created_at"),
    "-duration": ("-duration", "-created_at"),
    "cost": ("cost_cents", "-created_at"),
    "-cost": ("-cost_cents", "-created_at"),
    "tokens": ("tokens", "-created_at"),
    "-tokens": ("-tokens", "-created_at"),
}

# Must stay the expression of the GIN index of migration runs_app 0002, or PostgreSQL never uses it.
PG_SEARCH_VECTOR = (
    "to_tsvector('simple'::regconfig, left(prompt, 100000) || ' ' || left(output, 100000)"
    " || ' ' || left(error, 100000))"
)
# Up to this many matches, PostgreSQL collects the matching runs before ordering the list.
PG_COLLECT_MATCHES = 5000
SEARCH_MAX_TERMS = 16
SEARCH_MAX_TERM_CHARS = 100


def search_terms(text: str) -> list[str]:
    """The words of a search box, as both full-text engines cut them: runs of letters and
    digits (punctuation and operators are never syntax), lowercased, at most 16."""
    words = [w.lower()[:SEARCH_MAX_TERM_CHARS] for w in re.findall(r"[^\W_]+", text)]
    return list(dict.fromkeys(words))[:SEARCH_MAX_TERMS]


def run_search(qs: QuerySet[Run], text: str) -> QuerySet[Run]:
    """The runs of `qs` whose prompt, output or error holds every word of `text`, each word
    also as a prefix ("zeppelin" finds "Zeppelins"). SQLite FTS5 in embedded mode, PostgreSQL
    full-text search in scale-out (migration runs_app 0002; there one query runs at once, to
    count the matches); `text` without words: `qs`."""
    terms = search_terms(text)
    if not terms:
        return qs
    if connection.vendor == "sqlite":
        match = " ".join(f'"{t}"*' for t in terms)
        # `+id`: the matches are looked up per row while the runs are read in the list's order,
        # so a common word stops at the first page instead of sorting every match (bench/run_search.py).
        return qs.filter(
            RawSQL(
                '+"runs_app_run"."id" IN (SELECT k.run_id FROM runs_app_run_fts f'
                " JOIN runs_app_runsearchkey k ON k.id = f.rowid WHERE runs_app_run_fts MATCH %s)",
                [match],
                output_field=BooleanField(),
            )
        )
    if connection.vendor == "postgresql":
        tsquery = " & ".join(f"{t}:*" for t in terms)
        matches = f"{PG_SEARCH_VECTOR} @@ to_tsquery('simple'::regconfig, %s)"
        # PostgreSQL cannot estimate how many runs a prefix query matches: it guesses 2% and
        # then reads every run through created_at's index for a rare word (seconds at 100,000
        # runs). So ask the GIN index first (milliseconds): few matches are collected before
        # the list is ordered, many are filtered while the runs are read in order.
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT count(*) FROM runs_app_run WHERE {matches}", [tsquery])
            row = cursor.fetchone()
        if row is not None and row[0] <= PG_COLLECT_MATCHES:
            return qs.filter(
                RawSQL(
                    f'"runs_app_run"."id" IN (WITH m AS MATERIALIZED (SELECT id FROM runs_app_run WHERE {matches})'
                    " SELECT id FROM m)",
                    [tsquery],
                    output_field=BooleanField(),
                )
            )
        qualified = matches
        for column in ("prompt", "output", "error"):  # the same expression, on the listed row
            qualified = qualified.replace(f"left({column},", f'left("runs_app_run"."{column}",')
        return qs.filter(RawSQL(qualified, [tsquery], output_field=BooleanField()))
    for t in terms:  # another database: slower, same answers
        qs = qs.filter(Q(prompt__icontains=t) | Q(output__icontains=t) | Q(error__icontains=t))
    return qs


# What a run ran into on its way (docs/runs.md, "How a run ended"): its status stays the
# contract's (`completed` when the model answered), these marks say what happened before.
OUTCOMES = ("denied", "refused", "tool_error")
OUTCOME_LABELS = {"denied": "denied", "refused": "refused", "tool_error": "tool error"}
CHILD_TOOLS = ("spawn_subagent", "delegate")


def _failed_calls() -> QuerySet[ToolCall]:
    return ToolCall.objects.filter(status=ToolCall.Status.DONE, result__success=False)


def outcome_calls(outcome: str) -> QuerySet[ToolCall]:
    """The tool calls that give a run the mark `outcome`: a call the operator denied; a
    spawn or delegate refused before any child started (policy, depth, budget, validation);
    any other tool call that failed."""
    failed = _failed_calls()
    denied = Q(approval__status=Approval.Status.DENIED)
    if outcome == "denied":
        return ToolCall.objects.filter(denied)
    started_child = Exists(Run.objects.filter(parent_call_id=OuterRef("pk")))
    if outcome == "refused":
        return failed.filter(name__in=CHILD_TOOLS).exclude(denied).exclude(started_child)
    return failed.exclude(name__in=CHILD_TOOLS).exclude(denied)


def run_outcomes(run_ids: Iterable[Any]) -> dict[str, list[str]]:
    """The marks of each of these runs (run id as text -> marks in OUTCOMES order), three
    queries whatever their number; a run without any mark is absent."""
    ids = list(run_ids)
    found: dict[str, set[str]] = {}
    if not ids:
        return {}
    for outcome in OUTCOMES:
        for run_id in outcome_calls(outcome).filter(run_id__in=ids).values_list("run_id", flat=True):
            found.setdefault(str(run_id), set()).add(outcome)
    return {rid: [o for o in OUTCOMES if o in marks] for rid, marks in found.items()}


def run_tree_outcomes(root_id: Any) -> dict[str, list[str]]:
    """run_outcomes for every run of a tree, without listing its ids (three queries)."""
    found: dict[str, set[str]] = {}
    in_tree = Q(run__root_id=root_id) | Q(run_id=root_id)
    for outcome in OUTCOMES:
        for run_id in outcome_calls(outcome).filter(in_tree).values_list("run_id", flat=True):
            found.setdefault(str(run_id), set()).add(outcome)
    return {rid: [o for o in OUTCOMES if o in marks] for rid, marks in found.items()}


def run_list(filters: Mapping[str, Any]) -> QuerySet[Run]:
    """Runs, newest first. Filters (all optional): status (one or a list), outcome (a list of
    OUTCOMES, all of which the run has), agent, kind, root,
    since, until, user (a username), roots (top-level runs only), q (full-text search), sort
    (a key of RUN_SORTS). Each run carries `duration` and `tokens` (run_child_counts gives
    a page's child counts)."""
    qs: QuerySet[Run] = Run.objects.select_related("created_by").annotate(
        duration=ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField()),
        tokens=F("input_tokens") + F("output_tokens"),
    )
    status = filters.get("status")
    if status:
        qs = qs.filter(status__in=[status] if isinstance(status, str) else list(status))
    for outcome in filters.get("outcome") or ():
        qs = qs.filter(pk__in=outcome_calls(outcome).values("run_id"))
    if filters.get("agent"):
        qs = qs.filter(agent=filters["agent"])
    if filters.get("kind"):
        qs = qs.filter(kind=filters["kind"])
    if filters.get("root"):
        qs = qs.filter(root_id=filters["root"])
    if filters.get("user"):
        qs = qs.filter(created_by__username=filters["user"])
    since: datetime | None = filters.get("since")
    if since is not None:
        qs = qs.filter(created_at__gte=since)
    until: datetime | None = filters.get("until")
    if until is not None:
        qs = qs.filter(created_at__lt=until)
    if filters.get("roots"):
        qs = qs.filter(parent__isnull=True)
    if filters.get("q"):
        qs = run_search(qs, filters["q"])
    order = RUN_SORTS.get(filters.get("sort") or "-started", RUN_SORTS["-started"])
    # Unfinished runs have no duration: last either way. The other columns are never NULL, and
    # a NULLS LAST there would keep SQLite from reading created_at's index in order.
    ordering = [
        (F(o[1:]).desc(nulls_last=True) if o.startswith("-") else F(o).asc(nulls_last=True))
        if o.lstrip("-") == "duration"
        else o
        for o in order
    ]
    return qs.order_by(*ordering)


def run_child_counts(root_ids: Iterable[Any]) -> dict[Any, int]:
    """How many runs each of these roots has under it (every descendant), in one query."""
    ids = list(root_ids)
    counts = (
        Run.objects.filter(root_id__in=ids)
        .exclude(pk__in=ids)
        .order_by()
        .values("root_id")
        .annotate(n=Count("id"))
        .values_list("root_id", "n")
    )
    found = dict(counts)
    return {i: found.get(i, 0) for i in ids}


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


@contextmanager
def _collector_paused() -> Iterator[None]:
    """For building tens of thousands of dicts and lists, none of them garbage: left on, Python's
    cycle collector walks the whole heap while they pile up (a fifth of a 10,000-node tree's
    time). The switch is process-wide, so other threads' collections wait as long; they run as
    usual afterwards. Left alone when something else has turned the collector off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def run_tree(root_id: Any) -> dict[str, Any]:
    """The whole tree under `root_id`, children by creation time, each node with the usage sums
    of its subtree. One query, whatever the size of the tree. Raises Run.DoesNotExist."""
    rows = (
        Run.objects.filter(root_id=root_id)
        .order_by("created_at", "id")
        .values_list(*TREE_FIELDS, Left("prompt", PREVIEW_CHARS), Left("output", PREVIEW_CHARS))
    )
    with _collector_paused():
        root = _build_tree(rows, str(root_id))
    if root is None:
        raise Run.DoesNotExist(f"No run tree with root {root_id}")
    return root


def _build_tree(rows: Iterable[tuple[Any, ...]], root_key: str) -> dict[str, Any] | None:
    """The nodes of `rows` (TREE_FIELDS, prompt and output previews) linked to their parents
    and summed; None when the root is not among them."""
    root: dict[str, Any] | None = None
    by_pk: dict[Any, dict[str, Any]] = {}
    nodes: list[dict[str, Any]] = []
    parent_pks: list[Any] = []
    # Plain tuples, not model instances: building 10,000 Run objects cost more than the rest.
    for (
        pk, parent_pk, agent, kind, mode, execution, status, depth, spawn_depth, session_key,
        task_name, label, error, input_tokens, output_tokens, cost_cents, created_at, started_at,
        finished_at, prompt_preview, output_preview,
    ) in rows:  # fmt: skip
        node_id = str(pk)
        node = {
            "id": node_id,
            "parent_id": None,  # set below, from the parent's node when it is in the tree
            "agent": agent,
            "kind": kind,
            "mode": mode,
            "execution": execution,
            "status": status,
            "depth": depth,
            "spawn_depth": spawn_depth,
            "session_key": session_key,
            "task_name": task_name,
            "label": label,
            "prompt_preview": prompt_preview,
            "output_preview": output_preview,
            "error": error,
            "input_tokens": input_tokens,
            "output_tokens": output_tokens,
            "cost_cents": cost_cents,
            "created_at": created_at.isoformat() if created_at else None,
            "started_at": started_at.isoformat() if started_at else None,
            "finished_at": finished_at.isoformat() if finished_at else None,
            "duration_secs": (finished_at - started_at).total_seconds()
            if finished_at and started_at
            else None,
            "subtree": {
                "runs": 1,
                "input_tokens": input_tokens,
                "output_tokens": output_tokens,
                "cost_cents": cost_cents,
            },
            "children": [],
        }
        by_pk[pk] = node
        nodes.append(node)
        parent_pks.append(parent_pk)
        if node_id == root_key:
            root = node
    if root is None:
        return None
    # Linked once all are read: a child created in the same tick as its parent may come first.
    for node, parent_pk in zip(nodes, parent_pks, strict=True):
        parent = by_pk.get(parent_pk) if parent_pk else None
        if parent is not None:
            node["parent_id"] = parent["id"]
        elif parent_pk:
            node["parent_id"] = str(parent_pk)
        if node is not root:
            (parent or root)["children"].append(node)  # a parent outside the tree: the root
    _sum_subtrees(root)
    return root


def _sum_subtrees(root: dict[str, Any]) -> None:
    """Fold each node's usage into its ancestors' `subtree` sums (children in order, then
    cost rounded), without recursion: trees can be deep."""
    # Breadth-first order puts every parent before its children; summing it backwards folds
    # each subtree into its parent before the parent is folded into its own.
    order: list[dict[str, Any]] = [root]
    for node in order:
        order.extend(node["children"])
    for node in reversed(order):
        children = node["children"]
        if children:
            sums = node["subtree"]
            runs, input_tokens = sums["runs"], sums["input_tokens"]
            output_tokens, cost_cents = sums["output_tokens"], sums["cost_cents"]
            for child in children:
                child_sums = child["subtree"]
                runs += child_sums["runs"]
                input_tokens += child_sums["input_tokens"]
                output_tokens += child_sums["output_tokens"]
                cost_cents += child_sums["cost_cents"]
            sums["runs"], sums["input_tokens"] = runs, input_tokens
            sums["output_tokens"], sums["cost_cents"] = output_tokens, cost_cents
    for node in order:
        sums = node["subtree"]
        sums["cost_cents"] = round(sums["cost_cents"], 6)


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
        "finished_at": _iso(c.finished_at),
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


def conversation_list(run: Run, *, limit: int = 200) -> list[Run]:
    """The runs of `run`'s conversation: the first run, every run that continues one of them,
    oldest first (a run continued twice is a fork: both branches are listed, by time)."""
    first = run
    seen = {run.pk}
    while first.continued_from_id is not None and first.continued_from_id not in seen:
        earlier = Run.objects.filter(pk=first.continued_from_id).first()
        if earlier is None:
            break
        seen.add(earlier.pk)
        first = earlier
    found = {first.pk: first}
    frontier = [first.pk]
    while frontier and len(found) < limit:
        later = list(Run.objects.filter(continued_from_id__in=frontier).exclude(pk__in=list(found)))
        found.update((r.pk, r) for r in later)
        frontier = [r.pk for r in later]
    return sorted(found.values(), key=lambda r: (r.created_at, str(r.pk)))[:limit]


def approval_get(approval_id: Any) -> Approval | None:
    try:
        pk = int(approval_id)
    except (TypeError, ValueError):
        return None
    return Approval.objects.select_related("tool_call", "run").filter(pk=pk).first()


def approval_list(
    *, status: str | None = None, limit: int = 200, root_id: Any = None
) -> list[dict[str, Any]]:
    """Approvals, pending first then newest, each with its tool call and its chain of runs
    from the root down to the run that asked (two queries besides the approvals); with
    `root_id`, only those of that tree."""
    qs = Approval.objects.select_related("tool_call", "run", "decided_by")
    if status:
        qs = qs.filter(status=status)
    if root_id is not None:
        qs = qs.filter(Q(run__root_id=root_id) | Q(run_id=root_id))
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
        for r in Run.objects.filter(root_id__in=roots).values("id", "parent_id", "agent", "kind", "mode")
    }
    chains: dict[str, list[dict[str, str]]] = {}
    for a in approvals:
        chain: list[dict[str, str]] = []
        current = by_id.get(str(a.run_id))
        seen: set[str] = set()
        while current is not None and str(current["id"]) not in seen:
            seen.add(str(current["id"]))
            chain.append(
                {
                    "run_id": str(current["id"]),
                    "agent": current["agent"],
                    "kind": current["kind"],
                    "mode": current["mode"],
                }
            )
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
        # what tells two look-alike approvals apart: the run's task and when it was started
        "prompt": approval.run.prompt,
        "run_created_at": _iso(approval.run.created_at),
        "run_started_at": _iso(approval.run.started_at),
        "tool": call.name,
        "arguments": call.arguments,
        "call_id": call.call_id,
        "chain": chain,
        "created_at": _iso(approval.created_at),
        "decided_by": decided_by.get_username() if decided_by else None,
        "decided_at": _iso(approval.decided_at),
        "reason": approval.reason,
    }


# -- the trace view (run page) ------------------------------------------------------------------

SPAN_EVENT_TYPES = ("model.request", "model.response", "tool.call", "tool.result")


def _truthy(value: Any) -> bool:
    """A JSON boolean read with KT: SQLite gives 1/0, PostgreSQL 'true'/'false'."""
    return str(value).lower() in ("1", "true")


def run_spans(root_id: Any, run_ids: Iterable[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each run's model calls and tool calls as spans, by run id, derived from its events (one
    query, reading a few JSON keys, never whole event bodies): a model call lasts from the
    request's `requested_at` to its response event, a tool call from `tool.call` to its
    `tool.result`. A span without its end yet has `end` None. Each span: kind ("model" or
    "tool"), name, start and end (ISO), ok (False for a failed tool call)."""
    qs = RunEvent.objects.filter(root_id=root_id, type__in=SPAN_EVENT_TYPES)
    if run_ids is not None:
        qs = qs.filter(run_id__in=list(run_ids))
    rows = qs.order_by("id").values_list(
        "run_id", "type", "at", KT("data__requested_at"), KT("data__turn"), KT("data__call_id"),
        KT("data__name"), KT("data__success"), KT("data__model"),
    )  # fmt: skip
    spans: dict[str, list[dict[str, Any]]] = {}
    open_spans: dict[tuple[str, str, str], dict[str, Any]] = {}
    for run_id, type_, at, requested_at, turn, call_id, name, success, model in rows:
        run_key = str(run_id)
        if type_ == "model.request":
            span = {
                "kind": "model",
                "name": "",
                "start": requested_at or at.isoformat(),
                "end": None,
                "ok": True,
            }
            open_spans[(run_key, "model", str(turn))] = span
            spans.setdefault(run_key, []).append(span)
        elif type_ == "model.response":
            found = open_spans.pop((run_key, "model", str(turn)), None)
            if found is not None:
                found["end"], found["name"] = at.isoformat(), model or ""
        elif type_ == "tool.call":
            span = {"kind": "tool", "name": name or "", "start": at.isoformat(), "end": None, "ok": True}
            open_spans[(run_key, "tool", str(call_id))] = span
            spans.setdefault(run_key, []).append(span)
        else:
            found = open_spans.pop((run_key, "tool", str(call_id)), None)
            if found is not None:
                found["end"], found["ok"] = at.isoformat(), _truthy(success)
    return spans


def _latency_ms(start: str | None, end: datetime) -> float | None:
    if not start:
        return None
    try:
        return (end - datetime.fromisoformat(start)).total_seconds() * 1000
    except ValueError:
        return None


def run_model_calls(run: Run) -> list[dict[str, Any]]:
    """Every model call of the run, from its `model.request`/`model.response` events: turn,
    provider, model, latency (request to answer), input/output tokens, cost."""
    calls: list[dict[str, Any]] = []
    requests: dict[Any, dict[str, Any]] = {}
    for type_, at, data in (
        RunEvent.objects.filter(run=run, type__in=("model.request", "model.response"))
        .order_by("id")
        .values_list("type", "at", "data")
    ):
        data = data if isinstance(data, dict) else {}
        if type_ == "model.request":
            requests[data.get("turn")] = {"requested_at": data.get("requested_at") or at.isoformat()}
            continue
        request = requests.pop(data.get("turn"), {})
        raw_usage = data.get("usage")
        usage: dict[str, Any] = raw_usage if isinstance(raw_usage, dict) else {}
        calls.append(
            {
                "turn": data.get("turn"),
                "provider": data.get("provider", ""),
                "model": data.get("model", ""),
                "requested_at": request.get("requested_at"),
                "answered_at": at.isoformat(),
                "latency_ms": _latency_ms(request.get("requested_at"), at),
                "input_tokens": usage.get("input", 0),
                "output_tokens": usage.get("output", 0),
                "cost_cents": data.get("cost_cents", 0) or 0,
                "tool_calls": len(data.get("tool_calls") or []),
            }
        )
    return calls


def run_tool_timings(run: Run) -> dict[str, dict[str, Any]]:
    """call_id -> {"started_at", "finished_at", "duration_ms"} from the run's tool events."""
    found: dict[str, dict[str, Any]] = {}
    for type_, at, call_id in (
        RunEvent.objects.filter(run=run, type__in=("tool.call", "tool.result"))
        .order_by("id")
        .values_list("type", "at", KT("data__call_id"))
    ):
        entry = found.setdefault(str(call_id), {"started_at": None, "finished_at": None, "duration_ms": None})
        if type_ == "tool.call":
            entry["started_at"] = at
        else:
            entry["finished_at"] = at
            if entry["started_at"] is not None:
                entry["duration_ms"] = (at - entry["started_at"]).total_seconds() * 1000
    return found


REACHED_BY = {
    "top_level": "a top-level run: its agent's own risk and runtime profiles",
    "subagent": "spawned by its parent (spawn_subagent): the parent's authorization, narrowed by any override",
    "bounded": "a bounded delegate: its agent, under the caller's authorization and budget",
    "independent": "an independent delegate: its own agent's risk profile and budget",
}


def run_permissions(run: Run) -> dict[str, Any]:
    """What the run may do, as frozen when it was admitted: its risk profile after narrowing,
    its tool registry, the budgets it has left, the sandbox, and how it was reached."""
    data: dict[str, Any] = run.snapshot.data if run.snapshot_id and run.snapshot is not None else {}
    risk: dict[str, Any] = data.get("risk") or {}
    runtime: dict[str, Any] = data.get("runtime") or {}
    way = run.mode if run.kind == Run.Kind.DELEGATE and run.mode else run.kind
    budgets: list[dict[str, Any]] = []
    if run.tracker_key and runtime:
        usage = tracker_usage(key=run.tracker_key)
        actions = int(runtime.get("max_actions_per_hour", 0) or 0)
        cost = float(runtime.get("max_cost_per_day_cents", 0) or 0)
        budgets.append(
            {"name": "actions this hour", "used": usage["actions_last_hour"], "limit": actions,
             "left": max(0, actions - usage["actions_last_hour"])}
        )  # fmt: skip
        budgets.append(
            {"name": "cost today (cents)", "used": round(usage["cost_today_cents"], 4), "limit": cost,
             "left": round(max(0.0, cost - usage["cost_today_cents"]), 4)}
        )  # fmt: skip
    host = sandbox.status()
    enabled = bool(risk.get("sandbox_enabled", True)) if risk else None
    return {
        "has_snapshot": bool(data),
        "reached": way,
        "reached_text": REACHED_BY.get(way, way),
        "execution": run.execution,
        "tracker": run.tracker_key,
        "risk": risk,
        "runtime": runtime,
        "provider": data.get("provider", run.provider_ref),
        "tools": list(run.tools or []),
        "budgets": budgets,
        "sandbox": {
            "enabled": enabled,
            "backend": risk.get("sandbox_backend", ""),
            "host_available": host.available,
            "host_detail": host.detail,
            "state": "off (sandbox_enabled = false)"
            if enabled is False
            else ("on (bubblewrap)" if host.available else "unavailable: shell refuses to run"),
        },
        "workspace": run.workspace,
        "mcp": run_mcp_tools(run),
    }


def run_mcp_tools(run: Run) -> list[dict[str, Any]]:
    """The MCP tools of a run's frozen servers, as the workers last listed them, each admitted,
    gated (an approval before each call) or blocked, with the reason. Servers never started
    yet show one row saying so: the page never starts a server."""
    if not run.snapshot_id:
        return []
    policy = policy_of(run)
    if not policy.mcp:
        return []
    states = {s.server: s for s in McpServerState.objects.filter(server__in=[m.name for m in policy.mcp])}
    listed: dict[str, list[McpTool] | str] = {}
    for server in policy.mcp:
        state = states.get(server.name)
        if state is None or (not state.tools and state.last_error):
            listed[server.name] = state.last_error if state else "not started yet"
        else:
            listed[server.name] = [
                McpTool(t.get("name", ""), t.get("description", ""), {}, t.get("annotations") or {})
                for t in state.tools
            ]
    found = mcp_tools.verdicts(mcp_tools.run_mcp(policy, run.workspace), listed)
    return [{"name": v.name, "server": v.server, "status": v.status, "reason": v.reason} for v in found]


def mcp_server_states() -> list[dict[str, Any]]:
    """What the workers last saw of each MCP server (tools listed, last error, last call), for
    the dashboard's MCP page."""
    return [
        {
            "server": s.server,
            "tools": [t.get("name", "") for t in s.tools],
            "started_at": s.started_at,
            "last_call_at": s.last_call_at,
            "last_error": s.last_error,
            "last_error_at": s.last_error_at,
        }
        for s in McpServerState.objects.order_by("server")
    ]


# The home page's charts: (name, length, bucket) of each window, in hours.
USAGE_WINDOWS: tuple[tuple[str, int, int], ...] = (("24h", 24, 1), ("7d", 24 * 7, 6))
UNKNOWN_MODEL = "(no model)"


def usage_series(now: datetime | None = None) -> dict[str, Any]:
    """Runs, tokens and cost (dollars) over time per agent and per model, for the last 24
    hours (hourly) and 7 days (6-hourly): one query of hourly sums, folded here.

    Each window: `t` (bucket starts, Unix seconds) and, for `agent` and `model`, a mapping
    metric -> {name: [value per bucket]}. Every run of a tree counts (children spend too)."""
    from django.db.models import Sum
    from django.db.models.functions import TruncHour
    from django.utils import timezone

    now = now or timezone.now()
    hour = now.replace(minute=0, second=0, microsecond=0)
    longest = max(hours for _, hours, _ in USAGE_WINDOWS)
    first_hour = hour - timedelta(hours=longest - 1)
    rows = list(
        Run.objects.filter(created_at__gte=first_hour)
        .annotate(hour=TruncHour("created_at"))
        .values("hour", "agent", "model")
        .annotate(
            runs=Count("id"),
            input=Sum("input_tokens"),
            output=Sum("output_tokens"),
            cost=Sum("cost_cents"),
        )
        .order_by()
    )
    out: dict[str, Any] = {}
    for name, hours, step in USAGE_WINDOWS:
        n = hours // step
        start = hour - timedelta(hours=step * (n - 1))
        window: dict[str, Any] = {
            "t": [int((start + timedelta(hours=step * i)).timestamp()) for i in range(n)],
            "step_hours": step,
        }
        for group in ("agent", "model"):
            series: dict[str, dict[str, list[float]]] = {"runs": {}, "tokens": {}, "cost": {}}
            for r in rows:
                if r["hour"] is None or r["hour"] < start:
                    continue
                i = min(n - 1, int((r["hour"] - start).total_seconds() // (3600 * step)))
                key = r[group] or (UNKNOWN_MODEL if group == "model" else "")
                for metric, value in (
                    ("runs", r["runs"]),
                    ("tokens", (r["input"] or 0) + (r["output"] or 0)),
                    ("cost", (r["cost"] or 0.0) / 100),
                ):
                    values = series[metric].setdefault(key, [0] * n)
                    values[i] += value
            for metric in ("cost",):
                for values in series[metric].values():
                    values[:] = [round(v, 6) for v in values]
            window[group] = {m: dict(sorted(s.items())) for m, s in series.items()}
        out[name] = window
    return out
