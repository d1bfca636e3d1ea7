from __future__ import annotations

import dataclasses
from typing import Any

from django.contrib import admin

from agents_app.admin_support import ConfigAdmin, replace_entry
from agents_app.snapshot import ConfigSnapshot
from policies_app.models import DelegateSettings, RiskProfile, RuntimeProfile, Tracker


@admin.register(RiskProfile)
class RiskProfileAdmin(ConfigAdmin):
    list_display = (
        "alias",
        "level",
        "delegation_mode",
        "workspace_only",
        "deny_all_tools",
        "sandbox_enabled",
    )
    search_fields = ("alias",)
    section = "risk_profiles"
    mutator = staticmethod(replace_entry("risk_profiles"))
    key_of = staticmethod(lambda obj: obj.alias)


@admin.register(RuntimeProfile)
class RuntimeProfileAdmin(ConfigAdmin):
    list_display = ("alias", "agentic", "max_tool_iterations", "max_actions_per_hour", "max_spawn_depth")
    search_fields = ("alias",)
    section = "runtime_profiles"
    mutator = staticmethod(replace_entry("runtime_profiles"))
    key_of = staticmethod(lambda obj: obj.alias)


def _mutate_delegate(snap: ConfigSnapshot, old: str | None, new: str | None, spec: Any) -> ConfigSnapshot:
    return dataclasses.replace(snap, delegate=spec) if spec is not None else snap


@admin.register(DelegateSettings)
class DelegateSettingsAdmin(ConfigAdmin):
    list_display = (
        "__str__",
        "timeout_secs",
        "agentic_timeout_secs",
        "max_background",
        "max_concurrent_runs",
    )
    section = "delegate"
    mutator = staticmethod(_mutate_delegate)
    key_of = staticmethod(lambda obj: "delegate")

    def has_add_permission(self, request: Any) -> bool:
        return not DelegateSettings.objects.exists()

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False


@admin.register(Tracker)
class TrackerAdmin(admin.ModelAdmin):
    list_display = ("key",)
    search_fields = ("key",)
