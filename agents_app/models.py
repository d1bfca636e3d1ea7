from __future__ import annotations

from django.conf import settings
from django.db import models

from agents_app.snapshot import (
    MCP_TRANSPORTS,
    AgentSpec,
    DelegateEntry,
    McpBundleSpec,
    McpGlobals,
    McpServerSpec,
    ProviderSpec,
    SecretValue,
)


class ModelProvider(models.Model):
    type = models.SlugField(max_length=32)
    alias = models.SlugField(max_length=64)
    model = models.CharField(max_length=200, blank=True, default="")
    uri = models.CharField(max_length=500, blank=True, default="")
    api_key_env = models.CharField(max_length=128, blank=True, default="")
    # A Fernet token (agents_app.secrets), never the key itself.
    api_key = models.TextField(blank=True, default="")
    temperature = models.FloatField(null=True, blank=True)
    timeout_secs = models.PositiveIntegerField(default=60)
    max_tokens = models.PositiveIntegerField(null=True, blank=True)
    input_per_mtok_cents = models.FloatField(default=0)
    output_per_mtok_cents = models.FloatField(default=0)
    fallback_models = models.JSONField(default=list, blank=True)
    fallback = models.JSONField(default=list, blank=True)
    script = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["type", "alias"]
        constraints = [models.UniqueConstraint(fields=["type", "alias"], name="provider_type_alias")]

    def __str__(self) -> str:
        return f"{self.type}.{self.alias}"

    @property
    def ref(self) -> str:
        return f"{self.type}.{self.alias}"

    def to_spec(self) -> ProviderSpec:
        return ProviderSpec(
            type=self.type,
            alias=self.alias,
            model=self.model,
            uri=self.uri,
            api_key_env=self.api_key_env,
            api_key=self.api_key,
            temperature=self.temperature,
            timeout_secs=self.timeout_secs,
            max_tokens=self.max_tokens,
            input_per_mtok_cents=self.input_per_mtok_cents,
            output_per_mtok_cents=self.output_per_mtok_cents,
            fallback_models=tuple(self.fallback_models),
            fallback=tuple(self.fallback),
            script=self.script,
        )


class Agent(models.Model):
    alias = models.CharField(max_length=64, unique=True)
    enabled = models.BooleanField(default=True)
    model_provider = models.CharField(max_length=100, blank=True, default="")
    risk_profile = models.CharField(max_length=64, blank=True, default="")
    runtime_profile = models.CharField(max_length=64, blank=True, default="")
    system_prompt = models.TextField(blank=True, default="")
    delegate_same_risk_profile = models.BooleanField(default=True)
    # Ordered list of {"agent": alias, "mode": "bounded"|"independent"} (see docs/decisions.md).
    delegates = models.JSONField(default=list, blank=True)
    read_memory_from = models.JSONField(default=list, blank=True)
    workspace = models.CharField(max_length=500, blank=True, default="")
    delegable = models.BooleanField(default=True)
    # Aliases of `[mcp_bundles.<alias>]`: the MCP servers this agent may use (none when empty).
    mcp_bundles = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["alias"]

    def __str__(self) -> str:
        return self.alias

    def to_spec(self) -> AgentSpec:
        return AgentSpec(
            alias=self.alias,
            model_provider=self.model_provider,
            risk_profile=self.risk_profile,
            runtime_profile=self.runtime_profile,
            enabled=self.enabled,
            system_prompt=self.system_prompt,
            delegate_same_risk_profile=self.delegate_same_risk_profile,
            # A bare string means bounded (SPEC §2.4), wherever the row was written from.
            delegates=tuple(
                DelegateEntry(agent=d, mode="bounded")
                if isinstance(d, str)
                else DelegateEntry(agent=d["agent"], mode=d.get("mode", "bounded"))
                for d in self.delegates
            ),
            read_memory_from=tuple(self.read_memory_from),
            workspace=self.workspace,
            delegable=self.delegable,
            mcp_bundles=tuple(self.mcp_bundles),
        )


def _secret_values(data: dict[str, dict[str, str]]) -> dict[str, SecretValue]:
    return {
        key: SecretValue(token=value.get("token", ""), env=value.get("env", ""))
        for key, value in data.items()
    }


class McpSettings(models.Model):
    """The global `[mcp]` section: a single row (pk=1)."""

    enabled = models.BooleanField(default=True)
    deferred_loading = models.BooleanField(default=False)

    class Meta:
        verbose_name = "MCP settings"
        verbose_name_plural = "MCP settings"

    def __str__(self) -> str:
        return "[mcp]"

    def to_spec(self) -> McpGlobals:
        return McpGlobals(enabled=self.enabled, deferred_loading=self.deferred_loading)


class McpServer(models.Model):
    """One `[[mcp.servers]]` entry. `env` and `headers` map a name to {"token": <Fernet token>}
    (a value kept in Clawboard, agents_app.secrets) or {"env": <variable name>}."""

    name = models.CharField(max_length=64, unique=True)
    transport = models.CharField(
        max_length=8, choices=[(t, t) for t in MCP_TRANSPORTS], default=MCP_TRANSPORTS[0]
    )
    command = models.CharField(max_length=1000, blank=True, default="")
    args = models.JSONField(default=list, blank=True)
    env = models.JSONField(default=dict, blank=True)
    url = models.CharField(max_length=2000, blank=True, default="")
    headers = models.JSONField(default=dict, blank=True)
    tool_timeout_secs = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "MCP server"

    def __str__(self) -> str:
        return self.name

    def to_spec(self) -> McpServerSpec:
        return McpServerSpec(
            name=self.name,
            transport=self.transport,
            command=self.command,
            args=tuple(self.args),
            env=_secret_values(self.env),
            url=self.url,
            headers=_secret_values(self.headers),
            tool_timeout_secs=self.tool_timeout_secs,
        )


class McpBundle(models.Model):
    """One `[mcp_bundles.<alias>]`: a grant of MCP servers that agents reference."""

    alias = models.CharField(max_length=64, unique=True)
    servers = models.JSONField(default=list, blank=True)
    exclude = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["alias"]
        verbose_name = "MCP bundle"

    def __str__(self) -> str:
        return self.alias

    def to_spec(self) -> McpBundleSpec:
        return McpBundleSpec(alias=self.alias, servers=tuple(self.servers), exclude=tuple(self.exclude))


class ConfigRevision(models.Model):
    """Every saved configuration change: who, when, the whole TOML after it, and the diff."""

    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    summary = models.CharField(max_length=300, blank=True, default="")
    toml = models.TextField()
    diff = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"revision {self.pk}: {self.summary}"
