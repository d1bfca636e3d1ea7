"""Dashboard pages for configuration: list, edit (inline §2.5 errors), live preview,
dry-run delete, the delegation map with its policy simulator, and import/export."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST
from rest_framework.exceptions import NotFound, ValidationError

from agents_app.api.errors import field_errors as api_field_errors
from agents_app.api.policy_views import policy_check_run
from agents_app.entries import (
    EntryNotFound,
    entry_create,
    entry_delete,
    entry_update,
    plan_create,
    plan_delete,
    plan_update,
)
from agents_app.forms import (
    AgentForm,
    McpBundleForm,
    McpServerForm,
    ProviderForm,
    agent_initial,
    mcp_bundle_initial,
    mcp_server_initial,
    provider_initial,
)
from agents_app.mcp_grants import mcp_grants
from agents_app.policy_check import agent_tools
from agents_app.reachability import reachable
from agents_app.representation import entry_to_json
from agents_app.roles import has_role
from agents_app.selectors import config_snapshot_get
from agents_app.services import ConfigValidationError
from agents_app.snapshot import ConfigSnapshot
from agents_app.validation import validate_snapshot
from agents_app.web import admin_required, field_errors, viewer_required
from policies_app.forms import (
    GRID_COLUMNS,
    RiskProfileForm,
    RuntimeProfileForm,
    risk_initial,
    runtime_initial,
)
from policies_app.policy import ALL_TOOLS, WILDCARD, filter_tools, is_auto_approved, needs_approval
from policies_app.presets import preset_spec


@dataclass(frozen=True)
class Kind:
    name: str  # snapshot attribute
    label: str
    url: str
    form: type[forms.Form]
    initial: Any
    template: str


KINDS: dict[str, Kind] = {
    "agents": Kind("agents", "Agent", "agents", AgentForm, agent_initial, "agents/agent_form.html"),
    "risk_profiles": Kind(
        "risk_profiles",
        "Risk profile",
        "risk-profiles",
        RiskProfileForm,
        risk_initial,
        "agents/risk_form.html",
    ),
    "runtime_profiles": Kind(
        "runtime_profiles",
        "Runtime profile",
        "runtime-profiles",
        RuntimeProfileForm,
        runtime_initial,
        "agents/runtime_form.html",
    ),
    "providers": Kind(
        "providers", "Provider", "providers", ProviderForm, provider_initial, "agents/provider_form.html"
    ),
    "mcp_servers": Kind(
        "mcp_servers", "MCP server", "mcp/servers", McpServerForm, mcp_server_initial, "agents/mcp_form.html"
    ),
    "mcp_bundles": Kind(
        "mcp_bundles", "MCP bundle", "mcp/bundles", McpBundleForm, mcp_bundle_initial, "agents/mcp_form.html"
    ),
}
# Where a kind's validation messages point (`mcp.servers.<name>.command`).
_PATH_PREFIX = {"mcp_servers": "mcp.servers"}


def _make_form(kind: Kind, snap: ConfigSnapshot, data: Any = None, initial: Any = None) -> forms.Form:
    if kind.form in (AgentForm, McpBundleForm):
        return kind.form(data, initial=initial, snapshot=snap)  # type: ignore[call-arg]
    return kind.form(data, initial=initial)


@viewer_required
def entry_list(request: HttpRequest, kind_name: str) -> HttpResponse:
    kind = KINDS[kind_name]
    snap = config_snapshot_get()
    q = request.GET.get("q", "").strip().lower()
    rows = [
        entry_to_json(spec) for key, spec in getattr(snap, kind.name).items() if not q or q in key.lower()
    ]
    extra: dict[str, Any] = {}
    if kind.name == "agents":
        extra["rosters"] = {a: len(reachable(snap, a)) for a in snap.agents}
    return render(
        request,
        "agents/entry_list.html",
        {"kind": kind, "rows": rows, "q": q, "errors": validate_snapshot(snap), **extra},
    )


def _entry_context(kind: Kind, snap: ConfigSnapshot, form: forms.Form, key: str | None) -> dict[str, Any]:
    ctx: dict[str, Any] = {"kind": kind, "form": form, "key": key, "snap": snap}
    if kind.name == "agents":
        if form.is_bound:
            delegates = form.delegates()  # type: ignore[attr-defined]
        elif key:
            delegates = [{"agent": d.agent, "mode": d.mode} for d in snap.agents[key].delegates]
        else:
            delegates = []
        ctx["delegates"] = delegates + [{"agent": "", "mode": "bounded"}]
        ctx["agent_choices"] = sorted(snap.agents)
    if kind.name == "risk_profiles":
        ctx["grid"] = _grid_rows(form, snap.risk_profiles.get(key) if key else None, snap)
    if key and kind.name == "agents":
        ctx["preview"] = _agent_preview(snap, key)
    return ctx


def _grid_rows(form: forms.Form, spec: Any, snap: ConfigSnapshot) -> list[dict[str, Any]]:
    """One row per tool with its four checkboxes and the effective result."""
    if form.is_bound:
        picked = form.grid()  # type: ignore[attr-defined]
    elif spec is not None:
        picked = {field: list(getattr(spec, field)) for field, _ in GRID_COLUMNS}
    else:  # a new profile, perhaps prefilled from a preset
        picked = {field: list(form.initial.get(field) or []) for field, _ in GRID_COLUMNS}
    # Every saved name gets a row, also one the registry does not know (an old revision may
    # hold it): the editor never hides what a profile says.
    known = (*ALL_TOOLS, WILDCARD)
    extra = sorted({name for field, _ in GRID_COLUMNS for name in picked[field] if name not in known})
    rows = []
    for tool in (*known, *extra):
        cells = [{"name": f"{col}__{tool}", "checked": tool in picked[field]} for field, col in GRID_COLUMNS]
        # An MCP tool (`<server>__<tool>`) of a configured server is a name the profile may hold.
        server, separator, rest = tool.partition("__")
        mcp_tool = bool(separator and rest) and server in snap.mcp_servers
        rows.append({"tool": tool, "cells": cells, "unknown": tool in extra and not mcp_tool})
    return rows


def _agent_preview(snap: ConfigSnapshot, alias: str) -> dict[str, Any]:
    return {
        "tools": agent_tools(snap, alias),
        "roster": reachable(snap, alias),
        "mcp": mcp_grants(snap, snap.agents[alias]),
        "mcp_bundles": snap.agents[alias].mcp_bundles,
    }


def _add_config_errors(
    form: forms.Form, kind: Kind, key: str | None, exc: ConfigValidationError, extra: dict[str, list[str]]
) -> None:
    """The §2.5 messages next to the fields they are about; a field that already shows its
    own error keeps only that one."""
    cleaned = form.cleaned_data if hasattr(form, "cleaned_data") else {}
    alias = cleaned.get("alias") or cleaned.get("name")
    fallback = form.data.get("alias") or form.data.get("name", "")
    prefix = f"{_PATH_PREFIX.get(kind.name, kind.name)}.{key or alias or fallback}"
    by_field, general = field_errors(exc.errors, prefix)
    for name, msgs in by_field.items():
        if name in form.fields:
            if name in form.errors:
                continue
            for m in msgs:
                form.add_error(name, m)
        else:  # e.g. delegates, edited as rows outside the form class
            extra.setdefault(name, []).extend(msgs)
    for m in general:
        form.add_error(None, m)


def _config_errors_of_valid_fields(
    form: forms.Form, kind: Kind, snap: ConfigSnapshot, key: str | None
) -> ConfigValidationError | None:
    """The configuration errors of an invalid form: the entry as the form has it, each field
    that failed its own check taken as stored (or as its default for a new entry), planned
    without saving. None when that cannot be built (then the field errors stand alone)."""
    stored = kind.initial(entry_to_json(getattr(snap, kind.name)[key])) if key else {}
    valid_data = form.cleaned_data
    cleaned = dict(valid_data)
    form.cleaned_data = cleaned
    typed = str(form.data.get("alias", ""))
    if key is None and "alias" not in valid_data and "alias" in form.fields:
        # A new entry whose alias failed its own check: the rest is checked under a stand-in
        # name, and the messages speak of the alias as typed.
        stored = {"alias": STAND_IN_ALIAS}
    try:
        for name, field in form.fields.items():
            if name in valid_data:
                continue
            cleaned[name] = field.clean(stored.get(name, field.initial))
            if hasattr(form, f"clean_{name}"):  # as Form.full_clean runs it
                cleaned[name] = getattr(form, f"clean_{name}")()
        body = form.to_body()  # type: ignore[attr-defined]
        if key is None:
            plan_create(snap, kind=kind.name, body=body)
        else:
            plan_update(snap, kind=kind.name, key=key, body=body, partial=False)
    except ConfigValidationError as exc:
        if stored.get("alias") == STAND_IN_ALIAS and key is None:
            named = f"{kind.name}.{typed}"
            stand_in = f"{kind.name}.{STAND_IN_ALIAS}"
            return ConfigValidationError(
                [(f.replace(stand_in, named), m.replace(stand_in, named)) for f, m in exc.errors]
            )
        return exc
    except (forms.ValidationError, EntryNotFound, KeyError, TypeError, ValueError):
        return None
    finally:
        form.cleaned_data = valid_data
    return None


STAND_IN_ALIAS = "alias-being-typed"


@viewer_required
@require_http_methods(["GET", "POST"])
def entry_edit(request: HttpRequest, kind_name: str, key: str | None = None) -> HttpResponse:
    kind = KINDS[kind_name]
    snap = config_snapshot_get()
    if key is not None and key not in getattr(snap, kind.name):
        raise Http404(f"No {kind.label.lower()} '{key}'")
    extra_errors: dict[str, list[str]] = {}
    if request.method == "POST":
        if not has_role(request.user, "admin"):
            raise PermissionDenied("You need the admin role to change configuration.")
        form = _make_form(kind, snap, data=request.POST)
        if form.is_valid():
            try:
                body = form.to_body()  # type: ignore[attr-defined]
                if key is None:
                    new_key, _ = entry_create(kind=kind.name, body=body, user=request.user)
                else:
                    new_key, _ = entry_update(kind=kind.name, key=key, body=body, user=request.user)
            except ConfigValidationError as exc:
                _add_config_errors(form, kind, key, exc, extra_errors)
            except EntryNotFound as exc:
                raise Http404(str(exc)) from exc
            else:
                messages.success(request, f"{kind.label} {new_key} saved.")
                return redirect(f"/{kind.url}/{quote(new_key)}/")
        else:  # one round: what the validator says about the fields that passed, too
            config_error = _config_errors_of_valid_fields(form, kind, snap, key)
            if config_error is not None:
                _add_config_errors(form, kind, key, config_error, extra_errors)
        status = 400
    else:
        initial: dict[str, Any] = {}
        if key is not None:
            initial = kind.initial(entry_to_json(getattr(snap, kind.name)[key]))
        elif kind.name == "risk_profiles" and request.GET.get("preset"):
            try:
                initial = risk_initial(entry_to_json(preset_spec(request.GET["preset"], "")))
            except ValueError:
                initial = {}
            initial["preset"] = request.GET["preset"]
        form = _make_form(kind, snap, initial=initial)
        status = 200
    ctx = _entry_context(kind, snap, form, key)
    ctx["extra_errors"] = extra_errors
    return render(request, kind.template, ctx, status=status)


@viewer_required
@require_POST
def entry_preview(request: HttpRequest, kind_name: str, key: str | None = None) -> HttpResponse:
    """HTMX: the effective result of the form as it stands, without saving anything."""
    kind = KINDS[kind_name]
    snap = config_snapshot_get()
    form = _make_form(kind, snap, data=request.POST)
    ctx: dict[str, Any] = {"kind": kind, "errors": []}
    if not form.is_valid():
        ctx["errors"] = [m for msgs in form.errors.values() for m in msgs]
        config_error = _config_errors_of_valid_fields(form, kind, snap, key)
        if config_error is not None:
            ctx["errors"] += [m for _, m in config_error.errors]
        return render(request, "agents/_preview.html", ctx)
    try:
        body = form.to_body()  # type: ignore[attr-defined]
        if key is None:
            new_key, new = plan_create(snap, kind=kind.name, body=body)
        else:
            new_key, new = plan_update(snap, kind=kind.name, key=key, body=body, partial=False)
    except (ConfigValidationError, EntryNotFound) as exc:
        ctx["errors"] = [m for _, m in exc.errors] if isinstance(exc, ConfigValidationError) else [str(exc)]
        return render(request, "agents/_preview.html", ctx)
    if kind.name == "agents":
        ctx["preview"] = _agent_preview(new, new_key)
    elif kind.name == "risk_profiles":
        spec = new.risk_profiles[new_key]
        allowed = set(filter_tools(ALL_TOOLS, spec))
        ctx["effective"] = [
            {
                "tool": t,
                "allowed": t in allowed,
                "ask": needs_approval(spec, t),
                "auto": is_auto_approved(spec, t),
            }
            for t in ALL_TOOLS
        ]
    return render(request, "agents/_preview.html", ctx)


@admin_required
@require_http_methods(["GET", "POST"])
def entry_delete_view(request: HttpRequest, kind_name: str, key: str) -> HttpResponse:
    kind = KINDS[kind_name]
    snap = config_snapshot_get()
    try:
        plan, new = plan_delete(snap, kind=kind.name, key=key)
    except EntryNotFound as exc:
        raise Http404(str(exc)) from exc
    if kind.name == "agents":  # the plan lists the references scrubbed; say what goes first
        plan = [f"remove agents.{key}", *plan]
    errors = validate_snapshot(new)
    refusal = ""
    if request.method == "POST" and not errors:
        # The dry-run page is the confirmation: its form, and only it, says confirm=yes.
        if request.POST.get("confirm") == "yes":
            entry_delete(kind=kind.name, key=key, user=request.user)
            messages.success(request, f"{kind.label} {key} deleted.")
            return redirect(f"/{kind.url}/")
        refusal = "Confirm the deletion on this page."
    return render(
        request,
        "agents/entry_delete.html",
        {"kind": kind, "key": key, "plan": plan, "errors": errors, "refusal": refusal},
        status=400 if refusal else 200,
    )


# -- delegation map and policy simulator ---------------------------------------------------------


def delegation_graph(snap: ConfigSnapshot) -> dict[str, Any]:
    """Nodes on a circle and one edge per reachable (caller, target) pair."""
    import math

    aliases = list(snap.agents)
    n = max(1, len(aliases))
    radius = 60 + 28 * n
    size = 2 * radius + 220
    nodes = []
    pos: dict[str, tuple[float, float]] = {}
    for i, alias in enumerate(aliases):
        angle = 2 * math.pi * i / n - math.pi / 2
        x, y = size / 2 + radius * math.cos(angle), size / 2 + radius * math.sin(angle)
        pos[alias] = (x, y)
        spec = snap.agents[alias]
        risk = snap.risk_profiles.get(spec.risk_profile)
        nodes.append(
            {
                "alias": alias,
                "x": round(x, 1),
                "y": round(y, 1),
                "enabled": spec.enabled,
                "delegable": spec.delegable,
                "forbidden": risk is None or risk.delegation_mode != "allow",
                "risk_profile": spec.risk_profile,
            }
        )
    edges = []
    for alias in aliases:
        explicit = {d.agent for d in snap.agents[alias].delegates}
        for target, mode in reachable(snap, alias).items():
            (x1, y1), (x2, y2) = pos[alias], pos[target]
            dx, dy = x2 - x1, y2 - y1
            length = math.hypot(dx, dy) or 1
            # stop short of the target's circle so the arrow head stays visible
            x2e, y2e = x2 - dx / length * 30, y2 - dy / length * 30
            edges.append(
                {
                    "source": alias,
                    "target": target,
                    "mode": mode,
                    "explicit": target in explicit,
                    # a disabled agent never runs, so it never delegates: its edges are greyed
                    "active": snap.agents[alias].enabled,
                    "x1": round(x1, 1),
                    "y1": round(y1, 1),
                    "x2": round(x2e, 1),
                    "y2": round(y2e, 1),
                }
            )
    return {"nodes": nodes, "edges": edges, "size": round(size)}


@viewer_required
def delegation_map(request: HttpRequest) -> HttpResponse:
    snap = config_snapshot_get()
    ctx: dict[str, Any] = {"graph": delegation_graph(snap), "agents": sorted(snap.agents)}
    if request.GET.get("caller") or request.GET.get("target"):
        ctx.update(_simulate(request.GET))
    ctx["form"] = {k: request.GET.get(k, "") for k in ("caller", "target", "mode", "depth", "background")}
    return render(request, "agents/delegation_map.html", ctx)


def _simulate(src: Any) -> dict[str, Any]:
    """The simulator's answer, validated by the very function of `POST /policy/check/`: its
    result, or the messages REST would give (`<field>: <message>`, or the 404's detail). An
    empty form field means the field is absent, as a JSON body would leave it out."""
    data = {
        k: src.get(k) for k in ("caller", "target", "mode", "depth", "background") if src.get(k, "") != ""
    }
    data.setdefault("caller", "")
    data.setdefault("target", "")
    try:
        return {"check": policy_check_run(data)}
    except ValidationError as exc:
        return {"sim_errors": [f"{e['field']}: {e['message']}" for e in api_field_errors(exc)]}
    except NotFound as exc:
        return {"sim_errors": [str(exc.detail)]}


@viewer_required
@require_POST
def simulate(request: HttpRequest) -> HttpResponse:
    return render(request, "agents/_simulation.html", _simulate(request.POST))


# -- config import / export / revisions ------------------------------------------------------------


def _import_text(request: HttpRequest) -> str | bytes:
    upload = request.FILES.get("file")
    if upload is not None:
        return bytes(upload.read())  # parse_toml reports a file that is not UTF-8
    # Browsers send a textarea's newlines as CRLF; the file meant LF.
    return request.POST.get("toml", "").replace("\r\n", "\n")


def located_errors(text: str, errors: Any) -> list[dict[str, Any]]:
    """(path, message) pairs with the line of the file each path points to, as the page
    shows them (the API gives the same path as `field`)."""
    from agents_app.toml_lines import line_of

    return [{"message": m, "path": f, "line": line_of(text, f) if f else None} for f, m in errors]


def _import_check(request: HttpRequest) -> dict[str, Any]:
    """The import plan of the posted file, as the REST import and the command line show it."""
    from agents_app.config_io import ConfigParseError, ConfigShapeError, parse_toml
    from agents_app.imports import import_plan

    text = _import_text(request)
    shown = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    prune = request.POST.get("prune", "") in ("true", "1", "on")
    try:
        result = parse_toml(text)
    except ConfigParseError as exc:
        return {"errors": [{"message": str(exc), "path": "", "line": exc.line}], "toml": shown}
    except ConfigShapeError as exc:
        return {"errors": located_errors(shown, exc.errors), "toml": shown}
    plan = import_plan(result, prune=prune)
    return {
        "errors": located_errors(shown, plan.errors),
        "warnings": plan.warnings,
        "changes": plan.changes,
        "kept": plan.kept,
        "diff": plan.diff,
        "toml": shown,
        "result": result,
        "prune": prune,
    }


@viewer_required
def config_page(request: HttpRequest) -> HttpResponse:
    from agents_app.config_io import export_toml
    from agents_app.selectors import config_revision_list

    return render(
        request,
        "agents/config.html",
        {"export": export_toml(config_snapshot_get()), "revisions": config_revision_list(limit=50)},
    )


@admin_required
@require_POST
def config_import_preview(request: HttpRequest) -> HttpResponse:
    return render(request, "agents/_import_preview.html", _import_check(request))


def _apply_checked(
    request: HttpRequest,
    checked: dict[str, Any],
    *,
    template: str,
    errors_of: Callable[[list[tuple[str, str]]], list[dict[str, Any]]],
    what: str,
    back: str,
    **apply: Any,
) -> HttpResponse:
    """Apply an import the preview checked: its errors again (status 400) if it has any or if
    the save refuses it, else the revision it made and back to its page."""
    from agents_app.imports import import_apply

    if checked["errors"]:
        return render(request, template, checked, status=400)
    try:
        _, revision = import_apply(checked["result"], user=request.user, **apply)
    except ConfigValidationError as exc:
        checked["errors"] = errors_of(exc.errors)
        return render(request, template, checked, status=400)
    messages.success(request, f"{what} imported (revision {revision.pk})." if revision else "No change.")
    return redirect(back)


@admin_required
@require_POST
def config_import(request: HttpRequest) -> HttpResponse:
    checked = _import_check(request)
    return _apply_checked(
        request,
        checked,
        template="agents/_import_preview.html",
        errors_of=lambda errors: located_errors(checked["toml"], errors),
        what="Configuration",
        back="/config/",
        prune=checked.get("prune", False),
        summary="import (dashboard)",
    )


@viewer_required
def config_revision(request: HttpRequest, pk: int) -> HttpResponse:
    from agents_app.models import ConfigRevision

    rev = ConfigRevision.objects.filter(pk=pk).select_related("created_by").first()
    if rev is None:
        raise Http404("No such revision")
    return render(request, "agents/revision.html", {"rev": rev, **_restore_plan(rev)})


def _restore_plan(rev: Any) -> dict[str, Any]:
    """What restoring `rev` would do to the configuration as it is now: the diff (current →
    restored), the agents it adds, changes and removes, the other entries likewise, and
    whether it may be offered at all (never for the newest revision, nor a no-op)."""
    from agents_app.config_io import (
        ConfigParseError,
        ConfigShapeError,
        diff_snapshots,
        parse_toml,
        summarize_diff,
    )
    from agents_app.models import ConfigRevision

    newest = ConfigRevision.objects.order_by("-pk").values_list("pk", flat=True).first() == rev.pk
    plan: dict[str, Any] = {"newest": newest, "restorable": False, "restore_error": ""}
    try:
        target = parse_toml(rev.toml).snapshot
    except (ConfigParseError, ConfigShapeError) as exc:
        plan["restore_error"] = f"Revision {rev.pk} cannot be read: {exc}"
        return plan
    current = config_snapshot_get()
    agents: dict[str, list[str]] = {"add": [], "change": [], "remove": []}
    entries: dict[str, list[str]] = {"add": [], "change": [], "remove": []}
    verbs = {"+": "add", "-": "remove", "~": "change"}
    for line in summarize_diff(current, target):
        verb, path = verbs[line[0]], line[2:]
        if path.startswith("agents."):
            agents[verb].append(path.split(":", 1)[0].removeprefix("agents."))
        else:
            entries[verb].append(path.split(":", 1)[0])
    diff = diff_snapshots(current, target)
    plan.update(
        {
            "restore_diff": diff,
            "agents_plan": agents,
            "entries_plan": entries,
            "restorable": bool(diff) and not newest,
        }
    )
    return plan


@admin_required
@require_POST
def config_revision_restore_view(request: HttpRequest, pk: int) -> HttpResponse:
    from agents_app.models import ConfigRevision
    from agents_app.services import config_revision_restore

    rev = ConfigRevision.objects.filter(pk=pk).select_related("created_by").first()
    if rev is None:
        raise Http404("No such revision")
    plan = _restore_plan(rev)
    refusal = ""
    if not plan["restorable"]:
        refusal = (
            plan["restore_error"]
            or f"Revision {pk} is the current configuration; restoring it changes nothing."
        )
    elif request.POST.get("confirm") != "yes":
        refusal = "Tick the confirmation to restore this revision."
    if refusal:
        return render(request, "agents/revision.html", {"rev": rev, **plan, "refusal": refusal}, status=400)
    try:
        new = config_revision_restore(revision=rev, user=request.user)
    except ConfigValidationError as exc:
        messages.error(request, f"Revision {pk} cannot be restored: {exc}")
        return redirect(f"/config/revisions/{pk}/")
    messages.success(
        request, f"Restored revision {pk}" + (f" as revision {new.pk}." if new else " (no change).")
    )
    return redirect("/config/")


# -- MCP servers ----------------------------------------------------------------------------------


@viewer_required
def mcp_page(request: HttpRequest) -> HttpResponse:
    """Servers, bundles, the `[mcp]` switches and the mcpServers JSON import. Each server's
    state (what the workers last saw) comes from runs_app as a fragment (`/mcp/state/`)."""
    snap = config_snapshot_get()
    bundles = []
    for alias in sorted(snap.mcp_bundles):
        row = entry_to_json(snap.mcp_bundles[alias])
        row["agents"] = [a for a in sorted(snap.agents) if alias in snap.agents[a].mcp_bundles]
        bundles.append(row)
    return render(
        request,
        "agents/mcp.html",
        {
            "servers": [entry_to_json(snap.mcp_servers[n]) for n in sorted(snap.mcp_servers)],
            "bundles": bundles,
            "mcp": snap.mcp,
            "errors": [m for path, m in validate_snapshot(snap) if path.startswith("mcp")],
        },
    )


@admin_required
@require_POST
def mcp_settings_view(request: HttpRequest) -> HttpResponse:
    from agents_app.entries import mcp_settings_update

    body = {name: request.POST.get(name) == "on" for name in ("enabled", "deferred_loading")}
    try:
        mcp_settings_update(body=body, user=request.user)
    except ConfigValidationError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, "MCP settings saved.")
    return redirect("/mcp/")


def _located(message: str, path: str = "") -> dict[str, Any]:
    """An error as the import preview shows it: its path (a pasted JSON has no line) and text."""
    return {"message": message, "path": path, "line": None}


def _mcp_import_check(request: HttpRequest) -> dict[str, Any]:
    """The plan of the pasted mcpServers JSON, as the REST dry run shows it."""
    import json

    from agents_app.config_io import ConfigParseError, ConfigShapeError
    from agents_app.imports import import_plan
    from agents_app.mcp_json import mcp_json_read

    text = request.POST.get("json", "")
    bundle = request.POST.get("bundle", "").strip()
    shown: dict[str, Any] = {"json": text, "bundle": bundle}
    try:
        result = mcp_json_read(json.loads(text))
    except json.JSONDecodeError as exc:
        return {
            **shown,
            "errors": [_located(f"the text is not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})")],
        }
    except ConfigParseError as exc:
        return {**shown, "errors": [_located(str(exc))]}
    except ConfigShapeError as exc:
        return {**shown, "errors": [_located(m, p) for p, m in exc.errors]}
    plan = import_plan(result, prune=False, bundle=bundle)
    return {
        **shown,
        "errors": [_located(m, p) for p, m in plan.errors],
        "warnings": plan.warnings,
        "changes": plan.changes,
        "kept": [],
        "diff": plan.diff,
        "result": result,
    }


@admin_required
@require_POST
def mcp_import_preview(request: HttpRequest) -> HttpResponse:
    return render(request, "agents/_mcp_import_preview.html", _mcp_import_check(request))


@admin_required
@require_POST
def mcp_import(request: HttpRequest) -> HttpResponse:
    checked = _mcp_import_check(request)
    return _apply_checked(
        request,
        checked,
        template="agents/_mcp_import_preview.html",
        errors_of=lambda errors: [_located(m, p) for p, m in errors],
        what="MCP servers",
        back="/mcp/",
        prune=False,
        summary="import mcpServers (dashboard)",
        bundle=checked["bundle"],
    )
