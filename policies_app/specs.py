"""Frozen value objects for risk and runtime profiles.

These are the inputs of every pure gate (policy, escalation, reachability, validation).
They are built from one configuration snapshot (database or TOML) and never touch the ORM.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

LEVELS: tuple[str, ...] = ("readonly", "supervised", "full")
LEVEL_RANK = {name: i for i, name in enumerate(LEVELS)}
LEVEL_DISPLAY = {"readonly": "ReadOnly", "supervised": "Supervised", "full": "Full"}
DELEGATION_MODES: tuple[str, ...] = ("forbidden", "allow")
# `auto` picks the best backend the host has; today that is always bubblewrap (docs/tools.md).
SANDBOX_BACKENDS: tuple[str, ...] = ("auto", "bubblewrap")

DEFAULT_FORBIDDEN_PATHS: tuple[str, ...] = (
    "/etc", "/root", "/home", "/usr", "/bin", "/sbin", "/lib", "/opt", "/boot", "/dev",
    "/proc", "/sys", "/var", "/tmp", "~/.ssh", "~/.gnupg", "~/.aws", "~/.config",
)  # fmt: skip
# ZeroClaw's own Linux default (SPEC §2.2; docs/decisions.md).
DEFAULT_ALLOWED_COMMANDS: tuple[str, ...] = (
    "git", "npm", "cargo", "ls", "cat", "grep", "find", "echo", "pwd", "wc", "head", "tail", "date",
    "df", "du", "uname", "uptime", "hostname", "python", "python3", "pip", "node", "free",
)  # fmt: skip
# ZeroClaw merges its read-only defaults into every profile's auto_approve; these are the ones
# Clawboard has (the rest of ZeroClaw's list are tools Clawboard does not provide).
ALWAYS_AUTO_APPROVED: tuple[str, ...] = ("file_read", "memory_recall")


def with_always_auto_approved(names: tuple[str, ...]) -> tuple[str, ...]:
    """`names` with `ALWAYS_AUTO_APPROVED` appended where missing (trimmed names count)."""
    present = {name.strip() for name in names}
    return tuple(names) + tuple(name for name in ALWAYS_AUTO_APPROVED if name not in present)


@dataclass(frozen=True)
class RiskProfileSpec:
    alias: str
    level: str = "supervised"
    workspace_only: bool = True
    allowed_roots: tuple[str, ...] = ()
    allowed_roots_read_only: tuple[str, ...] = ()
    allowed_roots_write_only: tuple[str, ...] = ()
    forbidden_paths: tuple[str, ...] = DEFAULT_FORBIDDEN_PATHS
    allowed_commands: tuple[str, ...] = DEFAULT_ALLOWED_COMMANDS
    shell_env_passthrough: tuple[str, ...] = ()
    block_high_risk_commands: bool = True
    require_approval_for_medium_risk: bool = True
    allowed_tools: tuple[str, ...] = ()
    excluded_tools: tuple[str, ...] = ()
    auto_approve: tuple[str, ...] = ALWAYS_AUTO_APPROVED
    always_ask: tuple[str, ...] = ()
    delegation_mode: str = "forbidden"
    deny_all_tools: bool = False
    shell_network: bool = False
    sandbox_enabled: bool = True
    sandbox_backend: str = "auto"
    firejail_args: tuple[str, ...] = ()  # ZeroClaw's; kept for export, bubblewrap ignores it

    @property
    def effective_workspace_only(self) -> bool:
        # SPEC §2.2: workspace_only is forced false under `full`.
        return self.workspace_only and self.level != "full"


@dataclass(frozen=True)
class RuntimeProfileSpec:
    alias: str
    agentic: bool = False
    max_tool_iterations: int = 0
    max_actions_per_hour: int = 20
    max_cost_per_day_cents: int = 500
    shell_timeout_secs: int = 60
    max_delegation_depth: int = 0
    delegation_timeout_secs: int | None = None
    agentic_timeout_secs: int | None = None
    parallel_tools: bool = False
    max_tool_result_chars: int = 0
    tool_call_dedup_exempt: tuple[str, ...] = ()
    max_spawn_depth: int = 1
    max_children_per_run: int = 5
    subagent_timeout_secs: int = 0
    max_output_tokens: int = 0
    # Limits of each `shell` call's sandbox; 0 means the default below.
    shell_max_cpu_secs: int = 0
    shell_max_memory_mb: int = 0
    shell_max_file_size_mb: int = 0
    shell_max_processes: int = 0
    # Limits of each stdio MCP server's sandbox (a long-lived process); 0 means the default
    # below. The CPU limit counts each call's own seconds, not the server's whole life.
    mcp_max_cpu_secs: int = 0
    mcp_max_memory_mb: int = 0
    mcp_max_file_size_mb: int = 0
    mcp_max_processes: int = 0

    # Effective values: SPEC §2.3 says 0 means a default for some fields.
    @property
    def effective_max_tool_iterations(self) -> int:
        return self.max_tool_iterations or 10

    @property
    def effective_max_delegation_depth(self) -> int:
        return self.max_delegation_depth or 3

    @property
    def effective_max_tool_result_chars(self) -> int:
        return self.max_tool_result_chars or DEFAULT_TOOL_RESULT_CHARS


DEFAULT_TOOL_RESULT_CHARS = 6000  # max_tool_result_chars = 0
DEFAULT_SHELL_LIMITS: dict[str, int] = {
    "shell_max_cpu_secs": 60,
    "shell_max_memory_mb": 2048,  # address space, so it counts reserved as well as used memory
    "shell_max_file_size_mb": 256,
    "shell_max_processes": 64,
}


DEFAULT_MCP_LIMITS: dict[str, int] = {
    "mcp_max_cpu_secs": 60,  # per tool call
    # Node reserves about 1 GiB of address space at start and aborts below it.
    "mcp_max_memory_mb": 4096,
    "mcp_max_file_size_mb": 256,
    "mcp_max_processes": 64,
}


def effective_shell_limit(runtime: RuntimeProfileSpec, name: str) -> int:
    value = getattr(runtime, name)
    return value if value > 0 else {**DEFAULT_SHELL_LIMITS, **DEFAULT_MCP_LIMITS}[name]


def effective_tool_result_chars(runtime: Any) -> int:
    """`effective_max_tool_result_chars` of a runtime profile as a frozen policy stores it
    (its JSON), without building the spec: the hot path reads this one number."""
    chars = runtime.get("max_tool_result_chars") if isinstance(runtime, dict) else None
    return chars if isinstance(chars, int) and chars > 0 else DEFAULT_TOOL_RESULT_CHARS


DEFAULT_RUNTIME = RuntimeProfileSpec(alias="")


@dataclass(frozen=True)
class DelegateGlobals:
    timeout_secs: int = 120
    agentic_timeout_secs: int = 300
    max_background: int = 128
    max_concurrent_runs: int = 8
