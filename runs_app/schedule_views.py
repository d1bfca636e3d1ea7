"""The schedules page: list, create (with the next five times), enable/disable, delete.

Input is validated by the serializer of `POST /api/v1/schedules/`, so the page refuses what
REST refuses with the same messages (`<field>: <message>`), every one at once."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from agents_app.cron import cron_error, cron_next
from agents_app.models import Agent
from agents_app.roles import has_role
from agents_app.web import operator_required, viewer_required
from runs_app.api.serializers import ScheduleSerializer
from runs_app.models import Schedule

FIELDS = ("name", "agent", "prompt", "cron")


def _schedule_or_404(schedule_id: int) -> Schedule:
    schedule = Schedule.objects.filter(pk=schedule_id).first()
    if schedule is None:
        raise Http404("No such schedule")
    return schedule


def _rows() -> list[dict[str, Any]]:
    rows = []
    for s in Schedule.objects.select_related("created_by").order_by("name", "id"):
        upcoming = cron_next(s.cron, count=1) if s.enabled else []
        rows.append({"s": s, "next": upcoming[0] if upcoming else None, "problem": cron_error(s.cron)})
    return rows


def _page(
    request: HttpRequest, *, form: dict[str, Any], errors: list[str], status: int = 200
) -> HttpResponse:
    return render(
        request,
        "runs/schedules.html",
        {
            "rows": _rows(),
            "form": form,
            "errors": errors,
            "agents": list(
                Agent.objects.filter(enabled=True).order_by("alias").values_list("alias", flat=True)
            ),
            "preview": _preview(form.get("cron", "")),
        },
        status=status,
    )


def _preview(expr: str) -> dict[str, Any]:
    expr = expr.strip()
    if not expr:
        return {"expr": ""}
    return {"expr": expr, "error": cron_error(expr), "times": cron_next(expr)}


@viewer_required
@require_http_methods(["GET", "POST"])
def schedules_page(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        return _page(request, form={"enabled": True}, errors=[])
    if not has_role(request.user, "operator"):
        return HttpResponse("You need the operator role.", status=403)
    data: dict[str, Any] = {name: request.POST.get(name, "") for name in FIELDS}
    data["enabled"] = request.POST.get("enabled") == "on"
    serializer = ScheduleSerializer(data=data)
    if not serializer.is_valid():
        errors = [f"{field}: {message}" for field, msgs in serializer.errors.items() for message in msgs]
        return _page(request, form=data, errors=errors, status=400)
    schedule = serializer.save(created_by=request.user)
    messages.success(request, f"Schedule {schedule.name} created.")
    return redirect("/schedules/")


@viewer_required
def schedule_preview(request: HttpRequest) -> HttpResponse:
    """HTMX: the next five times of the cron expression being typed, or why it is refused."""
    return render(request, "runs/_cron_preview.html", {"preview": _preview(request.GET.get("cron", ""))})


@operator_required
@require_POST
def schedule_enabled(request: HttpRequest, schedule_id: int) -> HttpResponse:
    schedule = _schedule_or_404(schedule_id)
    value = request.POST.get("enabled", "")
    if value not in ("on", "off"):
        return HttpResponse("enabled must be on or off", status=400)
    serializer = ScheduleSerializer(schedule, data={"enabled": value == "on"}, partial=True)
    if not serializer.is_valid():
        return HttpResponse(
            "; ".join(f"{f}: {m}" for f, ms in serializer.errors.items() for m in ms), status=400
        )
    serializer.save()
    messages.success(request, f"Schedule {schedule.name} {'enabled' if value == 'on' else 'disabled'}.")
    return redirect("/schedules/")


@operator_required
@require_http_methods(["GET", "POST"])
def schedule_delete(request: HttpRequest, schedule_id: int) -> HttpResponse:
    """GET: what would be deleted, and a form to confirm. POST: deletes only with confirm=yes."""
    schedule = _schedule_or_404(schedule_id)
    if request.method == "POST":
        if request.POST.get("confirm") != "yes":
            return render(
                request,
                "runs/schedule_delete.html",
                {"schedule": schedule, "error": "Tick the confirmation to delete this schedule."},
                status=400,
            )
        name = schedule.name
        schedule.delete()
        messages.success(request, f"Schedule {name} deleted.")
        return redirect("/schedules/")
    return render(request, "runs/schedule_delete.html", {"schedule": schedule})
