"""One immutable snapshot of the whole configuration.

Every pure gate works on a `ConfigSnapshot`. The database (selectors), a TOML file
(config_io) and a JSON document all convert to and from this one shape.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from policies_app.specs import DelegateGlobals, RiskProfileSpec, RuntimeProfileSpec

ALIAS_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
DELEGATE_MODES: tuple[str, ...] = ("bounded", "independent")
RESERVED_AGENT_ALIAS = "default"
# The model an imported provider without `model` gets (ZeroClaw accepts one). A family not
# listed has no default: its provider needs a model (docs/decisions.md).
FAMILY_DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-sonnet-4-5",
    "openrouter": "anthropic/claude-sonnet-4.5",
    "groq": "llama-3.3-70b-versatile",
    "deepseek": "deepseek-chat",
    "mistral": "mistral-large-latest",
    "together": "meta-llama/Llama-3.3-70B-Instruct-Turbo",
    "ollama": "llama3.1",
}


@dataclass(frozen=True)
class ProviderSpec:
    type: str
    alias: str
    model: str = ""
    uri: str = ""
    api_key_env: str = ""
    # The Fernet token of a key kept in Clawboard (agents_app.secrets); never the key itself.
    api_key: str = ""
    temperature: float | None = None
    timeout_secs: int = 60
    max_tokens: int | None = None
    input_per_mtok_cents: float = 0
    output_per_mtok_cents: float = 0
    fallback_models: tuple[str, ...] = ()
    fallback: tuple[str, ...] = ()
    # `script` is JSON (lists/dicts); kept as given. Treat as read-only.
    script: Any = field(default_factory=list, compare=True, hash=False)

    @property
    def ref(self) -> str:
        return f"{self.type}.{self.alias}"


MCP_TRANSPORTS: tuple[str, ...] = ("stdio", "http", "sse")
MCP_DEFAULT_TOOL_TIMEOUT_SECS = 180
MCP_MAX_TOOL_TIMEOUT_SECS = 600


@dataclass(frozen=True)
class SecretValue:
    """One value of an MCP server's `env` or `headers`: a Fernet token of a value kept in
    Clawboard (agents_app.secrets), or the name of an environment variable of Clawboard's own
    process to read it from. Never the plain value."""

    token: str = ""
    env: str = ""

    @property
    def missing(self) -> bool:
        """Neither: a value that could not be read (a ZeroClaw `enc2:` secret) and must be
        entered again before the server can start."""
        return not self.token and not self.env


@dataclass(frozen=True)
class McpServerSpec:
    """One `[[mcp.servers]]` entry (docs/configuration.md#mcp-servers)."""

    name: str
    transport: str = "stdio"  # one of MCP_TRANSPORTS; "http" is streamable HTTP
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, SecretValue] = field(default_factory=dict, hash=False)
    url: str = ""
    headers: dict[str, SecretValue] = field(default_factory=dict, hash=False)
    tool_timeout_secs: int | None = None  # None: MCP_DEFAULT_TOOL_TIMEOUT_SECS

    @property
    def timeout_secs(self) -> int:
        return self.tool_timeout_secs or MCP_DEFAULT_TOOL_TIMEOUT_SECS


@dataclass(frozen=True)
class McpBundleSpec:
    """One `[mcp_bundles.<alias>]`: the servers it grants, less those it excludes."""

    alias: str
    servers: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()


@dataclass(frozen=True)
class McpGlobals:
    """The `[mcp]` section's own keys."""

    enabled: bool = True
    deferred_loading: bool = False


@dataclass(frozen=True)
class DelegateEntry:
    agent: str
    mode: str = "bounded"


@dataclass(frozen=True)
class AgentSpec:
    alias: str
    model_provider: str = ""
    risk_profile: str = ""
    runtime_profile: str = ""
    enabled: bool = True
    system_prompt: str = ""
    delegate_same_risk_profile: bool = True
    delegates: tuple[DelegateEntry, ...] = ()
    read_memory_from: tuple[str, ...] = ()
    workspace: str = ""  # "" = <DATA_DIR>/agents/<alias>/workspace
    delegable: bool = True
    mcp_bundles: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigSnapshot:
    """Dicts are keyed by alias (providers by "<type>.<alias>") and kept sorted by key."""

    providers: dict[str, ProviderSpec] = field(default_factory=dict)
    risk_profiles: dict[str, RiskProfileSpec] = field(default_factory=dict)
    runtime_profiles: dict[str, RuntimeProfileSpec] = field(default_factory=dict)
    agents: dict[str, AgentSpec] = field(default_factory=dict)
    delegate: DelegateGlobals = field(default_factory=DelegateGlobals)
    mcp: McpGlobals = field(default_factory=McpGlobals)
    mcp_servers: dict[str, McpServerSpec] = field(default_factory=dict)
    mcp_bundles: dict[str, McpBundleSpec] = field(default_factory=dict)

    def mcp_servers_of(self, agent: AgentSpec) -> tuple[McpServerSpec, ...]:
        """The MCP servers an agent's bundles grant: none without a bundle (omission is not a
        grant) or with `[mcp] enabled = false`; the union of its bundles' `servers` in
        first-seen order, less every name any of them excludes (deny wins)."""
        if not self.mcp.enabled:
            return ()
        bundles = [self.mcp_bundles[b] for b in agent.mcp_bundles if b in self.mcp_bundles]
        excluded = {name for bundle in bundles for name in bundle.exclude}
        names = dict.fromkeys(name for bundle in bundles for name in bundle.servers)
        return tuple(
            self.mcp_servers[name] for name in names if name not in excluded and name in self.mcp_servers
        )

    def runtime_of(self, agent: AgentSpec) -> RuntimeProfileSpec:
        from policies_app.specs import DEFAULT_RUNTIME

        return self.runtime_profiles.get(agent.runtime_profile, DEFAULT_RUNTIME)
