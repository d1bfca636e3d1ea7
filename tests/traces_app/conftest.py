from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from traces_app import services


@pytest.fixture
def memory_exporter(settings: pytest.FixtureRequest) -> Iterator[InMemorySpanExporter]:
    """Export on, into the SDK's in-memory exporter."""
    settings.CLAWBOARD_TRACES_EXPORT = True  # type: ignore[attr-defined]
    found = InMemorySpanExporter()
    services.use_exporter(found)
    yield found
    services.use_exporter(None)
