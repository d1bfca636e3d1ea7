"""The runs list's tests again on PostgreSQL (scale-out's full-text search, migration
runs_app 0002): tests/dashboard/test_run_list.py in a child pytest whose DATABASE_URL points at
the local server (127.0.0.1:5432, user postgres, as tests/distributed finds it; override with
CLAWBOARD_DIST_PG). Skipped, saying why, when that server cannot be reached, except under CI=true."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PG_URL = os.environ.get("CLAWBOARD_DIST_PG", "postgres://postgres@127.0.0.1:5432/postgres")
IN_CI = os.environ.get("CI", "").strip().lower() in ("1", "true", "yes", "on")


def _postgres_unreachable() -> str | None:
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=2):
            return None
    except Exception as exc:  # any failure to connect means: not here
        return f"PostgreSQL at {PG_URL} is not reachable ({type(exc).__name__})"


def test_the_runs_list_and_its_search_work_on_postgresql(tmp_path: Path) -> None:
    reason = _postgres_unreachable()
    if reason:
        if IN_CI:
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    base = PG_URL.rsplit("/", 1)[0]
    env: dict[str, Any] = {
        **os.environ,
        "DATABASE_URL": f"{base}/clawboard_runlist_{os.getpid()}",
        "CLAWBOARD_DB_POOL_MAX": "0",
        "DATA_DIR": str(tmp_path),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/dashboard/test_run_list.py", "-o", "addopts=", "-q",
         "-p", "no:cacheprovider", "--create-db", "-rs"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout, done.stdout[-2000:]
