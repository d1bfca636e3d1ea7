"""Shared set-up for benchmarks: a throwaway DATA_DIR and SQLite database, the embedded worker,
configuration from TOML, and waiting for runs. Benchmarks print figures; they assert nothing."""

from __future__ import annotations

import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def setup_django(*, workers: int = 2, before_worker: Any = None) -> Any:
    """Configure Django on a fresh database (unless DATABASE_URL is set) and start the
    in-process worker. Returns the worker. `before_worker()` runs just before it starts (a
    worker only consumes the tasks registered by then)."""
    if not os.environ.get("DATABASE_URL"):
        os.environ["DATA_DIR"] = tempfile.mkdtemp(prefix="clawboard-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zeroclaw_site.settings")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    # As deployed: with DEBUG on, Django keeps and formats every query (a third of the time).
    os.environ.setdefault("DJANGO_DEBUG", "false")
    os.environ.setdefault("SECURE_SSL_REDIRECT", "false")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    if before_worker is not None:
        before_worker()
    from zeroclaw_site.embedded import EmbeddedWorkerThread

    if (os.environ.get("CELERY_BROKER_URL") or "memory://").startswith("memory"):
        return EmbeddedWorkerThread(concurrency=workers).start()
    return None


def configure(toml_text: str) -> None:
    from agents_app.config_io import parse_toml
    from agents_app.services import config_replace

    config_replace(snapshot=parse_toml(toml_text).snapshot)


def wait_terminal(run_id: Any, timeout: float = 600) -> Any:
    from asgiref.sync import async_to_sync

    from runs_app import live
    from runs_app.models import TERMINAL_STATUSES, Run

    async_to_sync(live.wait_terminal)([run_id], timeout)
    run = Run.objects.get(pk=run_id)
    if run.status not in TERMINAL_STATUSES:
        raise RuntimeError(f"run {run_id} still {run.status} after {timeout}s")
    return run


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def median(values: list[float]) -> float:
    return statistics.median(values)


def timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def table(headers: list[str], rows: list[list[Any]]) -> str:
    cells = [headers] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    lines = [" | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in cells]
    lines.insert(1, "-+-".join("-" * w for w in widths))
    return "\n".join(lines)


def configure_doc(doc: dict[str, Any]) -> None:
    from agents_app.config_io import document_to_snapshot
    from agents_app.services import config_replace

    config_replace(snapshot=document_to_snapshot(doc).snapshot)


def team_doc(*, depth: int = 1, parallel_tools: bool = False) -> dict[str, Any]:
    """A risk and runtime profile that never gets in a benchmark's way."""
    return {
        "risk_profiles": {"bench": {"level": "full", "delegation_policy": {"mode": "allow"}}},
        "runtime_profiles": {
            "bench": {
                "agentic": True,
                "max_tool_iterations": 5000,
                "max_actions_per_hour": 10_000_000,
                "max_cost_per_day_cents": 10_000_000,
                "max_spawn_depth": depth,
                "max_children_per_run": 20,
                "parallel_tools": parallel_tools,
            }
        },
    }
