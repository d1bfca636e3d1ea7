from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _data_dir(settings: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Every test gets its own DATA_DIR (workspaces, delegate_results, ...)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    settings.DATA_DIR = data_dir  # type: ignore[attr-defined]
    return data_dir


@pytest.fixture(autouse=True)
def _no_trace_export(settings: pytest.FixtureRequest) -> None:
    """Whatever OTEL_* variables the shell has, a test exports traces only when it says so."""
    settings.CLAWBOARD_TRACES_EXPORT = False  # type: ignore[attr-defined]
    settings.CLAWBOARD_TRACES_CAPTURE = False  # type: ignore[attr-defined]


@pytest.fixture(autouse=True)
def _fresh_cache() -> None:
    """The run-rate counters live in the cache, and user ids repeat across tests: each test
    starts with none."""
    from django.core.cache import cache

    cache.clear()


_worker = None


@pytest.fixture
def worker(transactional_db: None) -> object:
    """A real Celery worker (threads pool, memory:// broker) in this process, shared by tests."""
    global _worker
    from zeroclaw_site.embedded import EmbeddedWorkerThread

    if _worker is None:
        _worker = EmbeddedWorkerThread(concurrency=2).start()
    return _worker
