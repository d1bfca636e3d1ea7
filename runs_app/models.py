from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "cancelled", "timed_out", "lost"})
ACTIVE_STATUSES: frozenset[str] = frozenset({"queued", "running", "waiting", "awaiting_approval"})


class RunQuerySet(models.QuerySet["Run"]):
    def one(self) -> Run | None:
        """The one run these filters select (by primary key), or None. Unlike `first()`,
        `get()` compiles no ORDER BY for Meta.ordering, which costs about as much again as the
        read; the engine reads a run this way at every step."""
        try:
            return self.get()
        except self.model.DoesNotExist:
            return None


class Run(models.Model):
    class Kind(models.TextChoices):
        TOP_LEVEL = "top_level"
        CRON = "cron"
        SUBAGENT = "subagent"
        DELEGATE = "delegate"

    class Mode(models.TextChoices):
        BOUNDED = "bounded"
        INDEPENDENT = "independent"

    class Execution(models.TextChoices):
        SYNC = "sync"
        BACKGROUND = "background"
        PARALLEL = "parallel"

    class SpawnSite(models.TextChoices):
        """Where the run was started (the structured logs' and the traces' `spawn_site`)."""

        SPAWN_SUBAGENT = "spawn_subagent"
        DELEGATE = "delegate"
        CRON = "cron"
        REST = "rest"
        DASHBOARD = "dashboard"

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        WAITING = "waiting"
        AWAITING_APPROVAL = "awaiting_approval"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"
        TIMED_OUT = "timed_out"
        LOST = "lost"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No single-column index on parent, root or status: each leads a composite index below
    # (Meta.indexes), which serves the same lookups; one index fewer to write per change.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="children", db_index=False
    )
    root = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # The tool call of the parent that waits on this run (spawn/delegate), if any.
    parent_call = models.ForeignKey(
        "ToolCall", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    agent = models.CharField(max_length=64, db_index=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.TOP_LEVEL)
    mode = models.CharField(max_length=16, choices=Mode.choices, blank=True, default="")
    execution = models.CharField(max_length=16, choices=Execution.choices, default=Execution.SYNC)
    spawn_site = models.CharField(max_length=16, choices=SpawnSite.choices, blank=True, default="")
    depth = models.PositiveSmallIntegerField(default=0)
    spawn_depth = models.PositiveSmallIntegerField(default=0)
    session_key = models.CharField(max_length=80, blank=True, default="")
    task_name = models.CharField(max_length=64, blank=True, default="")
    label = models.CharField(max_length=200, blank=True, default="")
    prompt = models.TextField(blank=True, default="")
    context = models.TextField(blank=True, default="")
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    output = models.TextField(blank=True, default="")
    error = models.TextField(blank=True, default="")
    tool_result = models.JSONField(null=True, blank=True)
    provider_requested = models.CharField(max_length=100, blank=True, default="")
    provider_served = models.CharField(max_length=100, blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    cost_cents = models.FloatField(default=0)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    owner = models.CharField(max_length=200, blank=True, default="")
    # Set while the run's model call is in flight (engine/inflight.py): a run whose worker
    # died then is queued again by the reaper rather than lost, and the call is made again.
    model_call_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # NULL (not "") when absent, so the unique constraint ignores runs without a key.
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001

    # Frozen at admission: what this run may do, whose budget it spends, where it acts.
    # By digest: a snapshot's key is its content, so what a process parsed once stays true.
    # (Every run the engine admits has one; rows written by hand, as in fixtures, may not.)
    snapshot = models.ForeignKey(
        "PolicySnapshot",
        to_field="digest",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="+",
        db_column="snapshot_digest",
    )
    # How many characters of this run's final text its parent accepts (the parent's
    # max_tool_result_chars), and the runs whose max_output_tokens budget this run spends
    # (itself and ancestors that have one): tree facts worked out once, at admission.
    result_chars = models.PositiveIntegerField(default=6000)
    budget_holders = models.JSONField(default=list, blank=True)
    tools = models.JSONField(default=list, blank=True)
    tracker_key = models.CharField(max_length=128, blank=True, default="")
    workspace = models.CharField(max_length=500, blank=True, default="")
    memory_agent = models.CharField(max_length=64, blank=True, default="")
    results_dir = models.CharField(max_length=500, blank=True, default="")
    provider_ref = models.CharField(max_length=100, blank=True, default="")
    system_prompt = models.TextField(blank=True, default="")
    agentic = models.BooleanField(default=True)
    turns = models.PositiveIntegerField(default=0)
    deadline = models.DateTimeField(null=True, blank=True)
    timeout_secs = models.PositiveIntegerField(null=True, blank=True)
    continued_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="continuations"
    )
    # Started through REST on behalf of the parent: the parent's conversation is not changed.
    via_api = models.BooleanField(default=False)
    # Held back by [delegate].max_concurrent_runs; dispatched again when a running run stops.
    deferred = models.BooleanField(default=False)
    # A steer or an announce waits to be delivered before the next model turn.
    has_inbox = models.BooleanField(default=False)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["root", "created_at"]),
            models.Index(fields=["status", "heartbeat_at"]),
            # a run's active children (spawn's max_children_per_run check) without reading
            # every child it ever had
            models.Index(fields=["parent", "status"]),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["created_by", "idempotency_key"],
                condition=models.Q(idempotency_key__isnull=False),
                name="run_idempotency_per_user",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.agent} {self.id}"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class ToolCall(models.Model):
    """One tool call of a model turn: the single record of what a run waits for."""

    class Status(models.TextChoices):
        PENDING = "pending"
        DONE = "done"
        # Closed unanswered because its run ended (cancelled, timed out, lost).
        CANCELLED = "cancelled"

    # indexed by (run, status) and (run, turn) below
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="tool_calls", db_index=False)
    turn = models.PositiveIntegerField()
    position = models.PositiveSmallIntegerField(default=0)
    call_id = models.CharField(max_length=100)
    name = models.CharField(max_length=64)
    arguments = models.JSONField(default=dict, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    result = models.JSONField(null=True, blank=True)
    wait_kind = models.CharField(max_length=16, blank=True, default="")  # children | approval | yield | await
    deadline = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # When the call stopped being pending (done or cancelled); None while pending.
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["turn", "position"]
        indexes = [models.Index(fields=["run", "status"]), models.Index(fields=["run", "turn"])]

    def __str__(self) -> str:
        return f"{self.name} ({self.status})"


class Message(models.Model):
    # indexed by the (run, seq) unique constraint below
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="messages", db_index=False)
    seq = models.PositiveIntegerField()
    role = models.CharField(max_length=16)
    content = models.TextField(blank=True, default="")
    tool_calls = models.JSONField(default=list, blank=True)
    tool_call_id = models.CharField(max_length=100, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="message_run_seq")]

    def __str__(self) -> str:
        return f"{self.role} #{self.seq}"


class RunEvent(models.Model):
    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    root_id = models.UUIDField()  # indexed by (root_id, id) below
    type = models.CharField(max_length=32)
    at = models.DateTimeField()
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["id"]
        indexes = [models.Index(fields=["root_id", "id"])]

    def __str__(self) -> str:
        return f"{self.id} {self.type}"


class Approval(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        DENIED = "denied"
        CANCELLED = "cancelled"  # the run ended (cancelled, timed out, lost) before a decision

    tool_call = models.OneToOneField(ToolCall, on_delete=models.CASCADE, related_name="approval")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="approvals")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING, db_index=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"approval {self.pk} ({self.status})"


class Announce(models.Model):
    """One per background child: the unique constraint makes announces exactly-once."""

    child = models.OneToOneField(Run, on_delete=models.CASCADE, related_name="announce")
    parent = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="announces")
    text = models.TextField()
    delivered = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"announce of {self.child_id}"


class MemoryEntry(models.Model):
    agent = models.CharField(max_length=64, db_index=True)
    key = models.CharField(max_length=200)
    content = models.TextField()
    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["agent", "key"]
        constraints = [models.UniqueConstraint(fields=["agent", "key"], name="memory_agent_key")]

    def __str__(self) -> str:
        return f"{self.agent}:{self.key}"


class Schedule(models.Model):
    name = models.CharField(max_length=100)
    agent = models.CharField(max_length=64)
    prompt = models.TextField()
    cron = models.CharField(max_length=100)
    enabled = models.BooleanField(default=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Steer(models.Model):
    """An operator message waiting to be injected before the run's next model turn."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steers")
    text = models.TextField()
    delivered = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]

    def __str__(self) -> str:
        return f"steer {self.pk} of {self.run_id}"


class PolicySnapshot(models.Model):
    """A run's frozen snapshot: its risk and runtime profiles and its provider chain (scripts
    included) as they were when it was admitted, stored once by content digest. A subagent
    runs under its parent's snapshot, so a child costs the same however long a script is, and
    a configuration change never alters a run in flight."""

    digest = models.CharField(max_length=64, unique=True)
    data = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return self.digest[:12]


class McpServerState(models.Model):
    """What the workers last saw of an MCP server, for the dashboard: the tools it listed, its
    last error and its last call. One row per server name, written by whichever worker last
    talked to it."""

    server = models.CharField(max_length=64, unique=True)
    tools = models.JSONField(default=list, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    last_call_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["server"]
        verbose_name = "MCP server state"

    def __str__(self) -> str:
        return self.server
