from __future__ import annotations

from typing import Any

from django.contrib import admin

from agents_app.admin_support import ConfigAdmin, replace_entry
from agents_app.models import Agent, ConfigRevision, ModelProvider
from agents_app.snapshot import ConfigSnapshot
from agents_app.validation import delete_agent, rename_agent


def _mutate_agent(snap: ConfigSnapshot, old: str | None, new: str | None, spec: Any) -> ConfigSnapshot:
    if old is not None and new is None:
        return delete_agent(snap, old)
    if old is not None and new is not None and old != new:
        snap = rename_agent(snap, old, new)
    return replace_entry("agents")(snap, new, new, spec)


@admin.register(Agent)
class AgentAdmin(ConfigAdmin):
    list_display = ("alias", "enabled", "model_provider", "risk_profile", "runtime_profile", "delegable")
    list_filter = ("enabled", "delegable", "risk_profile")
    search_fields = ("alias", "system_prompt")
    section = "agents"
    mutator = staticmethod(_mutate_agent)
    key_of = staticmethod(lambda obj: obj.alias)


@admin.register(ModelProvider)
class ModelProviderAdmin(ConfigAdmin):
    list_display = ("type", "alias", "model", "uri", "api_key_env")
    search_fields = ("alias", "model")
    # The stored key is a Fernet token, never shown nor edited here (REST, TOML or the dashboard).
    exclude = ("api_key",)
    section = "providers"
    mutator = staticmethod(replace_entry("providers"))
    key_of = staticmethod(lambda obj: f"{obj.type}.{obj.alias}")


@admin.register(ConfigRevision)
class ConfigRevisionAdmin(admin.ModelAdmin):
    list_display = ("id", "created_at", "created_by", "summary")
    readonly_fields = ("created_at", "created_by", "summary", "toml", "diff")

    def has_add_permission(self, request: Any) -> bool:
        return False

    def has_change_permission(self, request: Any, obj: Any = None) -> bool:
        return False
