"""Dashboard pages for runs: home, the run list, the live run page, approvals, background tasks."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.html import escape, format_html
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods, require_POST

from agents_app.models import Agent
from agents_app.selectors import config_snapshot_get
from agents_app.web import operator_required, viewer_required
from policies_app.policy import is_mcp_name, mcp_server_of
from policies_app.tracker import tracker_usage
from runs_app import exchanges, selectors, trace, tree_html
from runs_app.api.throttling import dashboard_throttle
from runs_app.engine.outcomes import result_view
from runs_app.engine.tools import sandbox
from runs_app.events import event_json
from runs_app.models import TERMINAL_STATUSES, Approval, Run, RunEvent, Steer
from runs_app.run_filters import run_filters_parse
from runs_app.services import (
    RunServiceError,
    approval_decide,
    can_control,
    ensure_can_control,
    run_cancel,
    run_continue,
    run_resume,
    run_start,
    run_steer,
)
from runs_app.templatetags.clawboard import money
from traces_app.selectors import export_status

STATUSES = [s for s, _ in Run.Status.choices]
KINDS = [k for k, _ in Run.Kind.choices]
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _run_or_404(run_id: Any) -> Run:
    run = selectors.run_get(run_id)
    if run is None:
        raise Http404("No such run")
    return run


# -- home ---------------------------------------------------------------------------------------


def _gauges() -> list[dict[str, Any]]:
    snap = config_snapshot_get()
    rows = []
    for alias, spec in snap.agents.items():
        if not spec.enabled:  # a disabled agent spends nothing: no gauge to watch
            continue
        runtime = snap.runtime_of(spec)
        usage = tracker_usage(key=alias)
        actions_pct = (
            min(100, 100 * usage["actions_last_hour"] / runtime.max_actions_per_hour)
            if runtime.max_actions_per_hour
            else 100
        )
        cost_pct = (
            min(100, 100 * usage["cost_today_cents"] / runtime.max_cost_per_day_cents)
            if runtime.max_cost_per_day_cents
            else 100
        )
        rows.append(
            {
                "tracker": alias,
                "actions": usage["actions_last_hour"],
                "max_actions": runtime.max_actions_per_hour,
                "actions_pct": round(actions_pct),
                "cost": usage["cost_today_cents"],
                "max_cost": runtime.max_cost_per_day_cents,
                "cost_pct": round(cost_pct),
            }
        )
    return rows


def _home_context() -> dict[str, Any]:
    day_ago = timezone.now() - timedelta(hours=24)
    return {
        "active": list(
            Run.objects.filter(parent__isnull=True)
            .exclude(status__in=TERMINAL_STATUSES)
            .order_by("-created_at")[:20]
        ),
        "approvals": selectors.approval_list(status=Approval.Status.PENDING, limit=10),
        "gauges": _gauges(),
        "failures": list(
            Run.objects.filter(finished_at__gte=day_ago, status__in=["failed", "timed_out", "lost"]).order_by(
                "-finished_at"
            )[:20]
        ),
        "sandbox": sandbox.status(),
        "sandbox_fix": _sandbox_fix(sandbox.status()),
        "trace_export": export_status(),
    }


def _sandbox_fix(status: sandbox.SandboxStatus) -> str:
    """The command that gives this host what the sandbox is missing ("" when it works)."""
    if status.available:
        return ""
    if "not installed" in status.detail and "bubblewrap" in status.detail:
        return "make bwrap  (or: sudo apt-get install -y bubblewrap)"
    if "util-linux" in status.detail:
        return "sudo apt-get install -y util-linux"
    return "sudo sysctl -w kernel.unprivileged_userns_clone=1  (user namespaces must be allowed)"


@viewer_required
def home(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/home.html", {**_home_context(), "usage": selectors.usage_series()})


@viewer_required
def home_charts(request: HttpRequest) -> HttpResponse:
    """The home page's chart data (static/clawboard/charts.js reloads it every minute)."""
    return JsonResponse(selectors.usage_series())


@viewer_required
def home_live(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/_home_panels.html", _home_context())


# -- run list -----------------------------------------------------------------------------------


@viewer_required
def run_list(request: HttpRequest) -> HttpResponse:
    filters, errors = run_filters_parse(request.GET)
    runs = selectors.run_list(filters) if not errors else Run.objects.none()
    page = Paginator(runs, 50).get_page(request.GET.get("page"))
    marks = selectors.run_outcomes(r.pk for r in page)
    for r in page:
        r.outcomes = [selectors.OUTCOME_LABELS[o] for o in marks.get(str(r.pk), ())]  # type: ignore[attr-defined]
    if filters.get("roots"):
        counts = selectors.run_child_counts(r.pk for r in page)
        for r in page:
            r.child_count = counts[r.pk]  # type: ignore[attr-defined]
    query = request.GET.copy()
    query.pop("page", None)
    sort_query = query.copy()
    sort_query.pop("sort", None)
    return render(
        request,
        "runs/run_list.html",
        {
            "page": page,
            "errors": errors,
            "statuses": STATUSES,
            "kinds": KINDS,
            "outcomes": [(o, selectors.OUTCOME_LABELS[o]) for o in selectors.OUTCOMES],
            "status_known": all(x.strip() in STATUSES for x in request.GET.get("status", "").split(",")),
            "sorts": list(selectors.RUN_SORTS),
            "agents": list(Agent.objects.filter(enabled=True).values_list("alias", flat=True)),
            "f": {
                k: request.GET.get(k, "")
                for k in (
                    "status",
                    "outcome",
                    "kind",
                    "agent",
                    "user",
                    "since",
                    "until",
                    "q",
                    "sort",
                    "scope",
                )
            },
            "roots": bool(filters.get("roots")),
            "query": query.urlencode(),
            "sort_query": sort_query.urlencode(),
        },
        status=400 if errors else 200,
    )


@operator_required
@require_POST
def run_start_view(request: HttpRequest) -> HttpResponse:
    if (refusal := dashboard_throttle(request)) is not None:
        return refusal
    try:
        run = run_start(
            agent=request.POST.get("agent", ""),
            prompt=request.POST.get("prompt", ""),
            context=request.POST.get("context", ""),
            user=request.user,
            spawn_site=Run.SpawnSite.DASHBOARD,
        )
    except RunServiceError as exc:
        messages.error(request, exc.message)
        return redirect("/runs/")
    return redirect(f"/runs/{run.pk}/")


# -- run page -----------------------------------------------------------------------------------


def _trace_tree(root_id: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The run tree laid out on the waterfall (two queries whatever its size)."""
    tree = selectors.run_tree(root_id)
    meta = trace.layout(tree, selectors.run_spans(root_id), timezone.now())
    marks = selectors.run_tree_outcomes(root_id)
    if marks:
        for node in tree_html.index(tree).values():
            node["outcomes"] = [selectors.OUTCOME_LABELS[o] for o in marks.get(node["id"], ())]
    return tree, meta


@viewer_required
def run_page(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = _run_or_404(run_id)
    root_id = run.root_id or run.pk
    # The last event id first, the tree second: an event committed in between is then replayed
    # by the socket (harmless) instead of being skipped as already seen (a lost update).
    last_event = (
        RunEvent.objects.filter(root_id=root_id).order_by("-id").values_list("id", flat=True).first() or 0
    )
    tree, meta = _trace_tree(root_id)
    return render(
        request,
        "runs/run_page.html",
        {
            "run": run,
            "root_id": root_id,
            "tree_html": mark_safe(tree_html.node_html(tree)),  # built with format_html: escaped
            "trace": meta,
            "tree_running": tree["status"] in trace.ACTIVE,
            "last_event": last_event,
            **_controls_context(request, run),
            "focus": str(run.pk) if run.pk != root_id else "",
            "continues": run.continued_from,
            "continued_in": list(run.continuations.order_by("created_at")[:20]),
        },
    )


@viewer_required
def conversation_page(request: HttpRequest, run_id: Any) -> HttpResponse:
    """The runs that continue one another, in order: a conversation as one thread."""
    run = _run_or_404(run_id)
    thread = selectors.conversation_list(run)
    return render(request, "runs/conversation.html", {"run": run, "thread": thread})


def _controls_context(request: HttpRequest, run: Run, **extra: Any) -> dict[str, Any]:
    """The Controls panel: besides Cancel/Steer/Continue, the approvals pending anywhere in
    the run's tree (the run waits on them, whichever node asked), decidable there."""
    return {
        "run": run,
        "can_control": can_control(request.user, run),
        "tree_approvals": selectors.approval_list(
            status=Approval.Status.PENDING, limit=50, root_id=run.root_id or run.pk
        ),
        # a queued steer is still to be delivered: its notice stays until then
        "steer_pending": not run.is_terminal and Steer.objects.filter(run=run, delivered=False).exists(),
        **extra,
    }


@viewer_required
def run_controls(request: HttpRequest, run_id: Any) -> HttpResponse:
    """The Controls panel alone: the run page fetches it again when the run's status changes."""
    run = _run_or_404(run_id)
    return render(request, "runs/_controls.html", _controls_context(request, run))


@viewer_required
def run_children(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = _run_or_404(run_id)
    tree, _ = _trace_tree(run.root_id or run.pk)
    node = tree_html.find(tree, str(run.pk))
    if node is None:
        raise Http404("No such run")
    try:
        offset = max(0, int(request.GET.get("offset", tree_html.CHILDREN_PAGE)))
    except ValueError:
        offset = tree_html.CHILDREN_PAGE
    return HttpResponse(tree_html.children_batch(node, offset))


@viewer_required
def run_nodes(request: HttpRequest, root_id: Any) -> HttpResponse:
    """Live refresh: for `ids`, the header (out-of-band) of nodes already on the page, and for
    `new`, whole nodes to insert under their parent (the page's live.js places them)."""
    root = _run_or_404(root_id)
    tree, meta = _trace_tree(root.root_id or root.pk)
    nodes = tree_html.index(tree)
    parts: list[str] = [
        f'<template data-trace-end="{int(meta["end_ms"])}" data-trace-now="{int(meta["now_ms"])}"></template>'
    ]
    for rid in [i for i in request.GET.get("ids", "").split(",") if i][:200]:
        node = nodes.get(rid)
        if node is not None:
            parts.append(tree_html.node_head(node, oob=True))
    for rid in [i for i in request.GET.get("new", "").split(",") if i][:200]:
        node = nodes.get(rid)
        if node is not None:
            parts.append(f'<template data-new-node="{rid}" data-parent="{node["parent_id"] or ""}">')
            parts.append(tree_html.node_html(node))
            parts.append("</template>")
    return HttpResponse("".join(parts))


EVENTS_SHOWN = 500


@viewer_required
def run_detail(request: HttpRequest, run_id: Any) -> HttpResponse:
    """The detail panel of one node of the trace."""
    run = _run_or_404(run_id)
    transcript = selectors.run_transcript(run)
    events_total = RunEvent.objects.filter(run=run).count()
    events = [
        {"id": e.id, "type": e.type, "at": e.at, "json": _pretty(event_json(e))}
        for e in RunEvent.objects.filter(run=run).order_by("id")[:EVENTS_SHOWN]
    ]
    pending = list(
        Approval.objects.filter(run=run, status=Approval.Status.PENDING)
        .select_related("tool_call")
        .order_by("pk")
    )
    timings = selectors.run_tool_timings(run)
    tree_runs = _tree_run_ids(run, transcript)
    calls = [
        {
            **c,
            "arguments_json": linked_json(c["arguments"], tree_runs),
            "result_json": linked_json(c["result"], tree_runs) if c["result"] is not None else "",
            "server": mcp_server_of(c["name"]) if is_mcp_name(c["name"]) else "",
            "duration": trace.duration_text(timings.get(c["call_id"], {}).get("duration_ms"))
            if timings.get(c["call_id"], {}).get("duration_ms") is not None
            else "",
        }
        for c in transcript["tool_calls"]
    ]
    model_calls = [
        {
            **m,
            "latency": trace.duration_text(m["latency_ms"]),
            "cost": money(m["cost_cents"]),
            "answer_calls_json": _pretty(m["answer_calls"]) if m["answer_calls"] else "",
            "sent": [
                {**x, "calls_json": _pretty(x["tool_calls"]) if x["tool_calls"] else ""} for x in m["sent"]
            ],
        }
        for m in exchanges.model_exchanges(
            run.system_prompt, transcript["messages"], selectors.run_model_calls(run)
        )
    ]
    started, finished = run.started_at or run.created_at, run.finished_at
    permissions = selectors.run_permissions(run)
    return render(
        request,
        "runs/_detail.html",
        {
            "run": run,
            "transcript": transcript,
            "messages": [
                {
                    **m,
                    "text": linked_text(m["content"], tree_runs),
                    "calls": [{**c, "json": _pretty(c.get("arguments"))} for c in (m["tool_calls"] or [])],
                }
                for m in transcript["messages"]
            ],
            "tool_calls": calls,
            "model_calls": model_calls,
            "events": events,
            "events_total": events_total,
            "events_shown": EVENTS_SHOWN,
            "pending": pending,
            "permissions": permissions,
            "risk_json": _pretty(permissions["risk"]),
            "runtime_json": _pretty(permissions["runtime"]),
            "duration": trace.duration_text(
                ((finished or timezone.now()) - started).total_seconds() * 1000 if started else None
            ),
            "can_control": can_control(request.user, run),
        },
    )


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)


def _tree_run_ids(run: Run, transcript: dict[str, Any]) -> set[str]:
    """The ids of runs of this tree that the run's tool calls mention (one query)."""
    mentioned = [c["result"] for c in transcript["tool_calls"]] + [
        m["content"] for m in transcript["messages"]
    ]
    found = set(UUID_RE.findall(json.dumps(mentioned, default=str)))
    found.update(child for c in transcript["tool_calls"] for child in c["children"])
    if not found:
        return set()
    root = run.root_id or run.pk
    return {
        str(pk)
        for pk in Run.objects.filter(root_id=root, pk__in=list(found)[:500]).values_list("pk", flat=True)
    }


def linked_json(value: Any, run_ids: set[str]) -> str:
    """`value` as indented JSON, escaped, with each id of a run of the tree linked to its node."""
    return linked_text(_pretty(value), run_ids)


def linked_text(raw: str, run_ids: set[str]) -> str:
    """`raw` escaped, with each id of a run of the tree linked to its node."""
    text = str(escape(raw))
    if not run_ids:
        return mark_safe(text)  # escaped above

    def link(match: re.Match[str]) -> str:
        rid = match.group(0)
        if rid not in run_ids:
            return rid
        return f'<a href="/runs/{rid}/" class="run-link" data-run-link="{rid}">{rid}</a>'

    return mark_safe(UUID_RE.sub(link, text))  # the text was escaped; ids are [0-9a-f-]


def _safe_next(request: HttpRequest, default: str) -> str:
    """The form's `next`, when it is a path on this site (never an open redirect)."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts=None) and target.startswith("/"):
        return target
    return default


def _back(request: HttpRequest, run: Run) -> HttpResponse:
    if request.htmx:  # type: ignore[attr-defined]
        return HttpResponse(status=204)
    return redirect(_safe_next(request, f"/runs/{run.root_id or run.pk}/"))


def _subtree_active(run: Run) -> list[dict[str, Any]]:
    """The runs a cascade cancel of `run` would stop: it and its descendants still active."""
    root = selectors.run_tree(run.root_id or run.pk)
    stack = [root]
    start = None
    while stack:
        node = stack.pop()
        if node["id"] == str(run.pk):
            start = node
            break
        stack.extend(node["children"])
    if start is None:
        return []
    found, todo = [], [start]
    while todo:
        node = todo.pop(0)
        if node["status"] not in TERMINAL_STATUSES:
            found.append(node)
        todo.extend(node["children"])
    return found


@operator_required
@require_http_methods(["GET", "POST"])
def run_cancel_view(request: HttpRequest, run_id: Any) -> HttpResponse:
    """GET, or a POST without confirm=yes: what a cancel would stop, with the form that
    confirms it (an htmx request is sent to that page). POST with confirm=yes: cancel."""
    run = _run_or_404(run_id)
    try:
        ensure_can_control(request.user, run, "cancel")  # before the confirmation page too
    except RunServiceError as exc:
        return HttpResponse(exc.message, status=403)
    next_url = _safe_next(request, "") if request.method == "POST" else request.GET.get("next", "")
    if not (next_url.startswith("/") and url_has_allowed_host_and_scheme(next_url, allowed_hosts=None)):
        next_url = ""
    if request.method == "GET" or request.POST.get("confirm") != "yes":
        if request.method == "POST" and request.htmx:  # type: ignore[attr-defined]
            target = f"/runs/{run.pk}/cancel/" + (f"?next={next_url}" if next_url else "")
            return HttpResponse(status=200, headers={"HX-Redirect": target})
        return render(
            request,
            "runs/cancel_confirm.html",
            {"run": run, "active": _subtree_active(run), "next": next_url},
        )
    try:
        n = run_cancel(run=run, user=request.user)
    except RunServiceError as exc:
        if exc.code == "forbidden":
            return HttpResponse(exc.message, status=403)
        if not request.htmx:  # type: ignore[attr-defined]  # htmx: the live page shows the state
            messages.error(request, exc.message)
        return _back(request, run)
    if not request.htmx:  # type: ignore[attr-defined]
        messages.success(request, f"Cancelled {n} run(s).")
    return _back(request, run)


@operator_required
@require_POST
def run_steer_view(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = _run_or_404(run_id)
    text = request.POST.get("message", "")
    notice, error = "", ""
    try:
        run_steer(run=run, user=request.user, message=text)
        notice = "Message queued for the next model turn."
    except RunServiceError as exc:
        if exc.code == "forbidden":
            return HttpResponse(exc.message, status=403)
        error = exc.message
    if request.htmx:  # type: ignore[attr-defined]  # the Controls panel, the refused text kept
        run.refresh_from_db()
        context = _controls_context(
            request, run, steer_notice=notice, steer_error=error, steer_text=text if error else ""
        )
        return render(request, "runs/_controls.html", context)
    if error:
        messages.error(request, error)
    else:
        messages.success(request, notice)
    return redirect(f"/runs/{run.pk}/")


@operator_required
@require_POST
def run_resume_view(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = _run_or_404(run_id)
    if (refusal := dashboard_throttle(request)) is not None:
        return refusal
    try:
        new = run_resume(run=run, user=request.user, spawn_site=Run.SpawnSite.DASHBOARD)
    except RunServiceError as exc:
        messages.error(request, exc.message)
        return redirect(f"/runs/{run.pk}/")
    return redirect(f"/runs/{new.root_id or new.pk}/")


@operator_required
@require_POST
def run_continue_view(request: HttpRequest, run_id: Any) -> HttpResponse:
    run = _run_or_404(run_id)
    if (refusal := dashboard_throttle(request)) is not None:
        return refusal
    try:
        new = run_continue(
            run=run,
            user=request.user,
            prompt=request.POST.get("prompt", ""),
            spawn_site=Run.SpawnSite.DASHBOARD,
        )
    except RunServiceError as exc:
        messages.error(request, exc.message)
        return redirect(f"/runs/{run.pk}/")
    return redirect(f"/runs/{new.pk}/")


# -- approvals ----------------------------------------------------------------------------------


@viewer_required
def approvals_page(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/approvals.html", _approvals_context())


@viewer_required
def approvals_live(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/_approvals.html", _approvals_context())


def _approvals_context() -> dict[str, Any]:
    return {
        "pending": selectors.approval_list(status=Approval.Status.PENDING, limit=200),
        "decided": [a for a in selectors.approval_list(limit=100) if a["status"] != "pending"][:50],
    }


@operator_required
@require_POST
def approval_decide_view(request: HttpRequest, approval_id: int, decision: str) -> HttpResponse:
    approval = selectors.approval_get(approval_id)
    if approval is None or decision not in ("approve", "deny"):
        raise Http404("No such approval")
    notice, error = "", ""
    try:
        approval_decide(
            approval=approval,
            user=request.user,
            approve=decision == "approve",
            reason=request.POST.get("reason", ""),
        )
        notice = f"Approval {approval_id} {'approved' if decision == 'approve' else 'denied'}."
    except RunServiceError as exc:
        error = exc.message
    if request.htmx:  # type: ignore[attr-defined]  # answered in place: no flash for a later page
        if request.POST.get("fragment") == "node":  # the inline form of a run page node
            return HttpResponse(
                format_html(
                    '<p class="{}" id="node-approval-{}">{}</p>',
                    "error" if error else "muted",
                    approval_id,
                    error or notice,
                )
            )
        return render(
            request, "runs/_approvals.html", {**_approvals_context(), "notice": notice, "error": error}
        )
    if error:
        messages.error(request, error)
    else:
        messages.success(request, notice)
    return redirect(_safe_next(request, "/approvals/"))


def approval_label(approval: Approval) -> str:
    """An approval in the inbox's own terms (its ids appear nowhere on the page): the tool,
    the agent that asked, the run (its id's first 8 characters, as the page shows them in
    bold) and the start of the run's prompt."""
    run = approval.run
    prompt = " ".join(run.prompt.split())
    short = prompt if len(prompt) <= 40 else prompt[:39] + "…"
    return f"{approval.tool_call.name} of {run.agent} in run {str(run.pk)[:8]} (“{short}”)"


@operator_required
@require_POST
def approvals_bulk_view(request: HttpRequest) -> HttpResponse:
    """Approve or deny every selected approval with one reason. The selection is checked whole
    first (nothing is decided when an id is unknown); then each is decided on its own, and what
    could not be (its run finished, someone decided first) is reported by id."""
    decision = request.POST.get("decision", "")
    raw_ids = request.POST.getlist("ids")
    problem = ""
    approvals: list[Approval] = []
    if decision not in ("approve", "deny"):
        problem = "decision must be approve or deny"
    elif not raw_ids:
        problem = "Select at least one approval."
    else:
        for raw in dict.fromkeys(raw_ids):
            approval = selectors.approval_get(raw)
            if approval is None:
                problem = f"No approval '{raw}'."
                break
            approvals.append(approval)
    if problem:
        return render(
            request,
            "runs/approvals.html",
            {**_approvals_context(), "error": problem, "notice": ""},
            status=400,
        )
    reason = request.POST.get("reason", "")
    done: list[str] = []
    failed: list[str] = []
    for approval in approvals:
        try:
            approval_decide(
                approval=approval, user=request.user, approve=decision == "approve", reason=reason
            )
            done.append(approval_label(approval))
        except RunServiceError as exc:
            failed.append(f"{approval_label(approval)}: {exc.message}")
    if done:
        verb = "Approved" if decision == "approve" else "Denied"
        noun = "approval" if len(done) == 1 else "approvals"
        messages.success(request, f"{verb} {len(done)} {noun}: {', '.join(done)}.")
    for line in failed:
        messages.error(request, line)
    return redirect("/approvals/")


# -- background tasks ---------------------------------------------------------------------------


def _tasks_context() -> dict[str, Any]:
    runs = (
        Run.objects.filter(kind=Run.Kind.DELEGATE, execution=Run.Execution.BACKGROUND)
        .select_related("parent")
        .order_by("-created_at")[:200]
    )
    rows = []
    for r in runs:
        view = result_view(r)
        view["caller"] = r.parent.agent if r.parent_id and r.parent else ""
        view["caller_id"] = str(r.parent_id or "")
        view["root_id"] = str(r.root_id or r.pk)
        view["active"] = r.status not in TERMINAL_STATUSES
        rows.append(view)
    return {"tasks": rows}


@viewer_required
def tasks_page(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/tasks.html", _tasks_context())


@viewer_required
def tasks_live(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/_tasks.html", _tasks_context())
