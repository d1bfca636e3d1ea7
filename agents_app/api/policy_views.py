"""Roster, effective tools and the policy simulator (SPEC §10, §3.3, §3.4, §6.1)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agents_app.api.parsers import JSONParser
from agents_app.policy_check import agent_tools, policy_check
from agents_app.reachability import reachable
from agents_app.selectors import config_snapshot_get


class RosterEntrySerializer(serializers.Serializer[dict[str, Any]]):
    agent = serializers.CharField()
    mode = serializers.CharField(help_text="bounded or independent")


class ToolRowSerializer(serializers.Serializer[dict[str, Any]]):
    tool = serializers.CharField()
    allowed = serializers.BooleanField()
    always_ask = serializers.BooleanField()
    auto_approve = serializers.BooleanField()


class AgentRosterApi(APIView):
    @extend_schema(operation_id="agents_roster", tags=["agents"], responses=RosterEntrySerializer(many=True))
    def get(self, request: Request, key: str) -> Response:
        snap = config_snapshot_get()
        if key not in snap.agents:
            raise NotFound(f"No agent '{key}'.")
        return Response([{"agent": a, "mode": m} for a, m in reachable(snap, key).items()])


class AgentToolsApi(APIView):
    @extend_schema(operation_id="agents_tools", tags=["agents"], responses=ToolRowSerializer(many=True))
    def get(self, request: Request, key: str) -> Response:
        snap = config_snapshot_get()
        if key not in snap.agents:
            raise NotFound(f"No agent '{key}'.")
        return Response(agent_tools(snap, key))


class PolicyCheckInputSerializer(serializers.Serializer[dict[str, Any]]):
    caller = serializers.CharField(max_length=64)
    target = serializers.CharField(max_length=64)
    mode = serializers.ChoiceField(choices=["bounded", "independent"], required=False)
    depth = serializers.IntegerField(min_value=0, max_value=100, required=False, default=0)
    background = serializers.BooleanField(required=False, default=False)

    class Meta:
        ref_name = "PolicyCheckInput"


def policy_check_run(data: Any) -> dict[str, Any]:
    """`POST /policy/check/` and the dashboard's simulator: the input validated once, then
    every gate. Raises ValidationError (field errors) or NotFound (an unknown caller)."""
    valid: dict[str, Any] = dict(PolicyCheckInputSerializer(data=data).run_validation(data))
    snap = config_snapshot_get()
    if valid["caller"] not in snap.agents:
        raise NotFound(f"No agent '{valid['caller']}'.")
    return policy_check(
        snap,
        caller=valid["caller"],
        target=valid["target"].strip(),
        mode=valid.get("mode"),
        depth=valid["depth"],
        background=valid["background"],
    )


class PolicyCheckApi(APIView):
    parser_classes = [JSONParser]
    InputSerializer = PolicyCheckInputSerializer

    @extend_schema(
        operation_id="policy_check",
        tags=["policy"],
        request=PolicyCheckInputSerializer,
        responses={200: OpenApiTypes.OBJECT, 404: OpenApiTypes.OBJECT},
    )
    def post(self, request: Request) -> Response:
        return Response(policy_check_run(request.data))
