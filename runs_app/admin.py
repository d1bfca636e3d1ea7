"""Runs in the Django admin: for looking, not for driving. Runs change state only through
the engine and its services, so the admin is read-only for them; schedules are editable."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.core.exceptions import ValidationError
from django.forms import ModelForm

from runs_app.models import Announce, Approval, MemoryEntry, Message, Run, RunEvent, Schedule, Steer, ToolCall


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Run)
class RunAdmin(ReadOnlyAdmin):
    list_display = ("id", "agent", "kind", "mode", "execution", "status", "created_at", "finished_at")
    list_filter = ("status", "kind", "mode", "execution")
    search_fields = ("id", "agent", "prompt", "session_key")
    date_hierarchy = "created_at"


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ("id", "type", "run", "at")
    list_filter = ("type",)
    search_fields = ("run__id", "root_id")


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ("run", "seq", "role", "created_at")
    list_filter = ("role",)


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyAdmin):
    list_display = ("run", "turn", "position", "name", "status", "wait_kind")
    list_filter = ("status", "name")


@admin.register(Approval)
class ApprovalAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "status", "decided_by", "decided_at", "created_at")
    list_filter = ("status",)


@admin.register(Announce)
class AnnounceAdmin(ReadOnlyAdmin):
    list_display = ("child", "parent", "delivered", "created_at")


@admin.register(Steer)
class SteerAdmin(ReadOnlyAdmin):
    list_display = ("run", "created_by", "delivered", "created_at")


@admin.register(MemoryEntry)
class MemoryEntryAdmin(admin.ModelAdmin):
    list_display = ("agent", "key", "updated_at")
    list_filter = ("agent",)
    search_fields = ("key", "content")


class ScheduleForm(ModelForm):
    class Meta:
        model = Schedule
        fields = ("name", "agent", "prompt", "cron", "enabled")

    def clean_cron(self) -> str:
        from agents_app.cron import cron_error

        cron = str(self.cleaned_data.get("cron", "")).strip()
        if (problem := cron_error(cron)) is not None:
            raise ValidationError(problem)
        return cron


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    form = ScheduleForm
    list_display = ("name", "agent", "cron", "enabled", "last_run_at")
    list_filter = ("enabled", "agent")

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        if not change:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)
