"""Output shapes of the runs API, and the schedule serializer (the one model edited through CRUD)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agents_app.cron import cron_error
from agents_app.models import Agent
from runs_app.engine import messages as msg
from runs_app.models import Run, Schedule


class RunSerializer(serializers.ModelSerializer[Run]):
    parent_id = serializers.UUIDField(read_only=True, allow_null=True)
    root_id = serializers.UUIDField(read_only=True, allow_null=True)
    continued_from_id = serializers.UUIDField(read_only=True, allow_null=True)
    created_by = serializers.SerializerMethodField()
    # Blank for runs that are not delegates (the model field is blank=True).
    mode = serializers.ChoiceField(choices=Run.Mode.choices, allow_blank=True, read_only=True)

    class Meta:
        model = Run
        fields = [
            "id", "parent_id", "root_id", "agent", "kind", "mode", "execution", "spawn_site", "depth", "spawn_depth",
            "session_key", "task_name", "label", "prompt", "context", "status", "output", "error",
            "tool_result", "provider_requested", "provider_served", "model", "input_tokens",
            "output_tokens", "cost_cents", "turns", "created_at", "started_at", "finished_at",
            "heartbeat_at", "deadline", "timeout_secs", "owner", "created_by", "idempotency_key",
            "continued_from_id", "via_api", "tools", "workspace",
        ]  # fmt: skip
        read_only_fields = fields

    def get_created_by(self, run: Run) -> str | None:
        user = run.created_by
        return user.get_username() if user is not None else None


class ToolResultSerializer(serializers.Serializer[dict[str, Any]]):
    """The `{success, output, error}` of a tool, with the child run(s) it started, if any."""

    success = serializers.BooleanField()
    output = serializers.CharField(allow_blank=True)
    error = serializers.CharField(allow_null=True)
    run_id = serializers.UUIDField(required=False)
    run_ids = serializers.ListField(child=serializers.UUIDField(), required=False)
    status = serializers.CharField(required=False, help_text="status of a child not finished within `wait`")


class EventSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    run_id = serializers.UUIDField()
    root_id = serializers.UUIDField()
    type = serializers.CharField()
    at = serializers.DateTimeField()
    data = serializers.DictField()  # type: ignore[assignment]


class TranscriptMessageSerializer(serializers.Serializer[dict[str, Any]]):
    seq = serializers.IntegerField()
    role = serializers.CharField()
    content = serializers.CharField(allow_blank=True, allow_null=True)
    tool_calls = serializers.JSONField(allow_null=True)
    tool_call_id = serializers.CharField(allow_blank=True, allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)


class TranscriptToolCallSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    turn = serializers.IntegerField()
    position = serializers.IntegerField()
    call_id = serializers.CharField(allow_blank=True)
    name = serializers.CharField()
    arguments = serializers.JSONField()
    status = serializers.ChoiceField(
        choices=["pending", "done", "cancelled"],
        help_text="`cancelled`: closed unanswered because its run ended (cancelled, timed out, lost)",
    )
    result = serializers.JSONField(allow_null=True)
    wait_kind = serializers.CharField(allow_blank=True)
    children = serializers.ListField(child=serializers.UUIDField())
    approval = serializers.JSONField(allow_null=True)
    created_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True, help_text="when it stopped being pending")


class TranscriptSerializer(serializers.Serializer[dict[str, Any]]):
    run_id = serializers.UUIDField()
    messages = TranscriptMessageSerializer(many=True)
    tool_calls = TranscriptToolCallSerializer(many=True)


class ChainLinkSerializer(serializers.Serializer[dict[str, Any]]):
    run_id = serializers.UUIDField()
    agent = serializers.CharField()
    kind = serializers.CharField()


class ApprovalSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    status = serializers.ChoiceField(choices=["pending", "approved", "denied", "cancelled"])
    run_id = serializers.UUIDField()
    root_id = serializers.UUIDField()
    agent = serializers.CharField()
    tool = serializers.CharField()
    arguments = serializers.JSONField()
    call_id = serializers.CharField()
    chain = ChainLinkSerializer(many=True, help_text="root → … → the run that asked")
    created_at = serializers.DateTimeField()
    decided_by = serializers.CharField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField(allow_blank=True)


class CancelResultSerializer(serializers.Serializer[dict[str, Any]]):
    cancelled = serializers.IntegerField(help_text="runs that changed to cancelled (the run and descendants)")
    run = RunSerializer()


class SteerResultSerializer(serializers.Serializer[dict[str, Any]]):
    id = serializers.IntegerField()
    run_id = serializers.UUIDField()
    message = serializers.CharField()
    created_at = serializers.DateTimeField()


class ScheduleSerializer(serializers.ModelSerializer[Schedule]):
    created_by = serializers.SerializerMethodField()

    class Meta:
        model = Schedule
        fields = [
            "id",
            "name",
            "agent",
            "prompt",
            "cron",
            "enabled",
            "last_run_at",
            "created_by",
            "created_at",
        ]
        read_only_fields = ["id", "last_run_at", "created_by", "created_at"]

    def get_created_by(self, schedule: Schedule) -> str | None:
        user = schedule.created_by
        return user.get_username() if user is not None else None

    def validate_cron(self, value: str) -> str:
        value = value.strip()
        if (problem := cron_error(value)) is not None:
            raise serializers.ValidationError(problem)
        return value

    def validate_agent(self, value: str) -> str:
        if not Agent.objects.filter(alias=value).exists():
            raise serializers.ValidationError(f"Unknown agent '{value}'")
        return value

    def validate_prompt(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("The prompt must not be blank")
        if (too_long := msg.too_long("prompt", value)) is not None:
            raise serializers.ValidationError(too_long)
        return value
