"""Whether and how run trees are exported, from the OpenTelemetry SDK's own environment
variables (docs/deployment.md#traces): read once, when the settings load."""

from __future__ import annotations

import os
from collections.abc import Mapping

CAPTURE_VALUES = frozenset({"span_only", "span_and_event", "true", "1"})


def export_enabled(environ: Mapping[str, str] = os.environ) -> bool:
    """On when an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the traces-only
    `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), unless `OTEL_SDK_DISABLED=true` or
    `OTEL_TRACES_EXPORTER=none`."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return bool(
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    )


def capture_content(environ: Mapping[str, str] = os.environ) -> bool:
    """Prompts, messages, tool arguments and results go into spans only when the operator asks
    (the GenAI conventions' `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`)."""
    value = environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "")
    return value.strip().lower() in CAPTURE_VALUES
