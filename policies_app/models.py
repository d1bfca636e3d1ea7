from __future__ import annotations

from django.db import models

from policies_app.specs import (
    DEFAULT_ALLOWED_COMMANDS,
    DEFAULT_FORBIDDEN_PATHS,
    DelegateGlobals,
    RiskProfileSpec,
    RuntimeProfileSpec,
    with_always_auto_approved,
)


def _default_forbidden_paths() -> list[str]:
    return list(DEFAULT_FORBIDDEN_PATHS)


def _default_allowed_commands() -> list[str]:
    return list(DEFAULT_ALLOWED_COMMANDS)


class RiskProfile(models.Model):
    class Level(models.TextChoices):
        READONLY = "readonly"
        SUPERVISED = "supervised"
        FULL = "full"

    class DelegationMode(models.TextChoices):
        FORBIDDEN = "forbidden"
        ALLOW = "allow"

    alias = models.SlugField(max_length=64, unique=True)
    level = models.CharField(max_length=16, choices=Level.choices, default=Level.SUPERVISED)
    workspace_only = models.BooleanField(default=True)
    allowed_roots = models.JSONField(default=list, blank=True)
    allowed_roots_read_only = models.JSONField(default=list, blank=True)
    allowed_roots_write_only = models.JSONField(default=list, blank=True)
    forbidden_paths = models.JSONField(default=_default_forbidden_paths, blank=True)
    allowed_commands = models.JSONField(default=_default_allowed_commands, blank=True)
    shell_env_passthrough = models.JSONField(default=list, blank=True)
    block_high_risk_commands = models.BooleanField(default=True)
    require_approval_for_medium_risk = models.BooleanField(default=True)
    allowed_tools = models.JSONField(default=list, blank=True)
    excluded_tools = models.JSONField(default=list, blank=True)
    auto_approve = models.JSONField(default=list, blank=True)
    always_ask = models.JSONField(default=list, blank=True)
    delegation_mode = models.CharField(
        max_length=16, choices=DelegationMode.choices, default=DelegationMode.FORBIDDEN
    )
    deny_all_tools = models.BooleanField(default=False)
    shell_network = models.BooleanField(default=False)
    sandbox_enabled = models.BooleanField(default=True)
    sandbox_backend = models.CharField(max_length=16, default="auto")
    firejail_args = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["alias"]

    def __str__(self) -> str:
        return self.alias

    def to_spec(self) -> RiskProfileSpec:
        return RiskProfileSpec(
            alias=self.alias,
            level=self.level,
            workspace_only=self.workspace_only,
            allowed_roots=tuple(self.allowed_roots),
            allowed_roots_read_only=tuple(self.allowed_roots_read_only),
            allowed_roots_write_only=tuple(self.allowed_roots_write_only),
            forbidden_paths=tuple(self.forbidden_paths),
            allowed_commands=tuple(self.allowed_commands),
            shell_env_passthrough=tuple(self.shell_env_passthrough),
            block_high_risk_commands=self.block_high_risk_commands,
            require_approval_for_medium_risk=self.require_approval_for_medium_risk,
            allowed_tools=tuple(self.allowed_tools),
            excluded_tools=tuple(self.excluded_tools),
            auto_approve=with_always_auto_approved(tuple(self.auto_approve)),
            always_ask=tuple(self.always_ask),
            delegation_mode=self.delegation_mode,
            deny_all_tools=self.deny_all_tools,
            shell_network=self.shell_network,
            sandbox_enabled=self.sandbox_enabled,
            sandbox_backend=self.sandbox_backend,
            firejail_args=tuple(self.firejail_args),
        )


class RuntimeProfile(models.Model):
    alias = models.SlugField(max_length=64, unique=True)
    agentic = models.BooleanField(default=False)
    max_tool_iterations = models.PositiveIntegerField(default=0)
    max_actions_per_hour = models.PositiveIntegerField(default=20)
    max_cost_per_day_cents = models.PositiveIntegerField(default=500)
    shell_timeout_secs = models.PositiveIntegerField(default=60)
    max_delegation_depth = models.PositiveIntegerField(default=0)
    delegation_timeout_secs = models.PositiveIntegerField(null=True, blank=True)
    agentic_timeout_secs = models.PositiveIntegerField(null=True, blank=True)
    parallel_tools = models.BooleanField(default=False)
    max_tool_result_chars = models.PositiveIntegerField(default=0)
    tool_call_dedup_exempt = models.JSONField(default=list, blank=True)
    max_spawn_depth = models.PositiveSmallIntegerField(default=1)
    max_children_per_run = models.PositiveSmallIntegerField(default=5)
    subagent_timeout_secs = models.PositiveIntegerField(default=0)
    max_output_tokens = models.PositiveIntegerField(default=0)
    shell_max_cpu_secs = models.PositiveIntegerField(default=0)
    shell_max_memory_mb = models.PositiveIntegerField(default=0)
    shell_max_file_size_mb = models.PositiveIntegerField(default=0)
    shell_max_processes = models.PositiveIntegerField(default=0)
    mcp_max_cpu_secs = models.PositiveIntegerField(default=0)
    mcp_max_memory_mb = models.PositiveIntegerField(default=0)
    mcp_max_file_size_mb = models.PositiveIntegerField(default=0)
    mcp_max_processes = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["alias"]

    def __str__(self) -> str:
        return self.alias

    def to_spec(self) -> RuntimeProfileSpec:
        return RuntimeProfileSpec(
            alias=self.alias,
            agentic=self.agentic,
            max_tool_iterations=self.max_tool_iterations,
            max_actions_per_hour=self.max_actions_per_hour,
            max_cost_per_day_cents=self.max_cost_per_day_cents,
            shell_timeout_secs=self.shell_timeout_secs,
            max_delegation_depth=self.max_delegation_depth,
            delegation_timeout_secs=self.delegation_timeout_secs,
            agentic_timeout_secs=self.agentic_timeout_secs,
            parallel_tools=self.parallel_tools,
            max_tool_result_chars=self.max_tool_result_chars,
            tool_call_dedup_exempt=tuple(self.tool_call_dedup_exempt),
            max_spawn_depth=self.max_spawn_depth,
            max_children_per_run=self.max_children_per_run,
            subagent_timeout_secs=self.subagent_timeout_secs,
            max_output_tokens=self.max_output_tokens,
            shell_max_cpu_secs=self.shell_max_cpu_secs,
            shell_max_memory_mb=self.shell_max_memory_mb,
            shell_max_file_size_mb=self.shell_max_file_size_mb,
            shell_max_processes=self.shell_max_processes,
            mcp_max_cpu_secs=self.mcp_max_cpu_secs,
            mcp_max_memory_mb=self.mcp_max_memory_mb,
            mcp_max_file_size_mb=self.mcp_max_file_size_mb,
            mcp_max_processes=self.mcp_max_processes,
        )


class DelegateSettings(models.Model):
    """The global `[delegate]` section: a single row (pk=1)."""

    timeout_secs = models.PositiveIntegerField(default=120)
    agentic_timeout_secs = models.PositiveIntegerField(default=300)
    max_background = models.PositiveIntegerField(default=128)
    max_concurrent_runs = models.PositiveIntegerField(default=8)

    class Meta:
        verbose_name = "delegate settings"
        verbose_name_plural = "delegate settings"

    def __str__(self) -> str:
        return "[delegate]"

    def to_spec(self) -> DelegateGlobals:
        return DelegateGlobals(
            timeout_secs=self.timeout_secs,
            agentic_timeout_secs=self.agentic_timeout_secs,
            max_background=self.max_background,
            max_concurrent_runs=self.max_concurrent_runs,
        )


class Tracker(models.Model):
    """A budget bucket (SPEC §3.1). One per agent, keyed by the agent's alias."""

    key = models.CharField(max_length=128, unique=True)

    def __str__(self) -> str:
        return self.key


class TrackerAction(models.Model):
    # indexed by (tracker, at) below
    tracker = models.ForeignKey(Tracker, on_delete=models.CASCADE, related_name="actions", db_index=False)
    at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["tracker", "at"])]

    def __str__(self) -> str:
        return f"{self.tracker_id} @ {self.at}"


class TrackerCost(models.Model):
    # indexed by the (tracker, day) unique constraint below
    tracker = models.ForeignKey(Tracker, on_delete=models.CASCADE, related_name="costs", db_index=False)
    day = models.DateField()
    cents = models.FloatField(default=0)
    # The worst-case cost of the model calls in flight (reserved before each call, released
    # when it settles), so concurrent calls cannot overshoot the day's budget together.
    reserved_cents = models.FloatField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tracker", "day"], name="tracker_cost_per_day")]

    def __str__(self) -> str:
        return f"{self.tracker_id} {self.day}: {self.cents}"
