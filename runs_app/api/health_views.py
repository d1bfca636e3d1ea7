"""`GET /api/v1/health/`: whether this host can run what Clawboard promises, for monitors."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from runs_app.engine.tools import sandbox


class HealthApi(APIView):
    """Open to anyone, like any health check: it names no configuration, only the host."""

    authentication_classes: list[type] = []
    permission_classes = [AllowAny]

    @extend_schema(
        responses=inline_serializer(
            "Health",
            {
                "status": serializers.CharField(),
                "sandbox": inline_serializer(
                    "SandboxHealth",
                    {
                        "available": serializers.BooleanField(),
                        "backend": serializers.CharField(),
                        "detail": serializers.CharField(),
                        "process_limit": serializers.CharField(),
                    },
                ),
            },
        )
    )
    def get(self, request: Request) -> Response:
        state = sandbox.status()
        # "degraded", not an error: the server works, but `shell` refuses under a sandboxed profile.
        return Response({"status": "ok" if state.available else "degraded", "sandbox": state.as_dict()})
