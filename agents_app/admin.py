from __future__ import annotations

import dataclasses
from typing import Any

from django.contrib import admin

from agents_app.admin_support import (
    ConfigAdmin,
    ConfigModelForm,
    SecretMapField,
    keep_masked_rows,
    replace_entry,
)
from agents_app.models import Agent, ConfigRevision, McpBundle, McpServer, McpSettings, ModelProvider
from agents_app.snapshot import ConfigSnapshot
from agents_app.validation import (
    delete_agent,
    delete_mcp_bundle,
    delete_mcp_server,
    rename_agent,
    rename_mcp_bundle,
    rename_mcp_server,
)


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


def _mutate_mcp_server(snap: ConfigSnapshot, old: str | None, new: str | None, spec: Any) -> ConfigSnapshot:
    if old is not None and new is None:
        return delete_mcp_server(snap, old)
    if old is not None and new is not None and old != new:
        snap = rename_mcp_server(snap, old, new)
    return replace_entry("mcp_servers")(snap, new, new, spec)


class McpServerForm(ConfigModelForm):
    env = SecretMapField(
        required=False, help_text='values show as ******** (kept when sent back) or "${VAR}"'
    )
    headers = SecretMapField(
        required=False, help_text='values show as ******** (kept when sent back) or "${VAR}"'
    )

    def clean_env(self) -> Any:
        return keep_masked_rows(
            self.cleaned_data.get("env") or {}, self.instance.env if self.instance.pk else {}
        )

    def clean_headers(self) -> Any:
        stored = self.instance.headers if self.instance.pk else {}
        return keep_masked_rows(self.cleaned_data.get("headers") or {}, stored)


@admin.register(McpServer)
class McpServerAdmin(ConfigAdmin):
    list_display = ("name", "transport", "command", "url", "tool_timeout_secs")
    search_fields = ("name", "command", "url")
    section = "mcp_servers"
    mutator = staticmethod(_mutate_mcp_server)
    key_of = staticmethod(lambda obj: obj.name)

    def get_form(self, request: Any, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        kwargs["form"] = McpServerForm
        form = admin.ModelAdmin.get_form(self, request, obj, change=change, **kwargs)
        form.section = "mcp_servers"  # type: ignore[attr-defined]
        form.mutator = staticmethod(_mutate_mcp_server)  # type: ignore[attr-defined]
        form.key_of = staticmethod(lambda o: o.name)  # type: ignore[attr-defined]
        return form


def _mutate_mcp_bundle(snap: ConfigSnapshot, old: str | None, new: str | None, spec: Any) -> ConfigSnapshot:
    if old is not None and new is None:
        return delete_mcp_bundle(snap, old)
    if old is not None and new is not None and old != new:
        snap = rename_mcp_bundle(snap, old, new)
    return replace_entry("mcp_bundles")(snap, new, new, spec)


@admin.register(McpBundle)
class McpBundleAdmin(ConfigAdmin):
    list_display = ("alias", "servers", "exclude")
    search_fields = ("alias",)
    section = "mcp_bundles"
    mutator = staticmethod(_mutate_mcp_bundle)
    key_of = staticmethod(lambda obj: obj.alias)


def _mutate_mcp(snap: ConfigSnapshot, old: str | None, new: str | None, spec: Any) -> ConfigSnapshot:
    return dataclasses.replace(snap, mcp=spec) if spec is not None else snap


@admin.register(McpSettings)
class McpSettingsAdmin(ConfigAdmin):
    list_display = ("__str__", "enabled", "deferred_loading")
    section = "mcp"
    mutator = staticmethod(_mutate_mcp)
    key_of = staticmethod(lambda obj: "mcp")

    def has_add_permission(self, request: Any) -> bool:
        return not McpSettings.objects.exists()

    def has_delete_permission(self, request: Any, obj: Any = None) -> bool:
        return False
