"""The database pool of a scale-out process is never smaller than the threads that borrow from it:
a worker's default pool grows with its concurrency, and a worker refuses an explicit pool
smaller than its threads need (zeroclaw_site/dbpool.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from zeroclaw_site.dbpool import (
    DEFAULT_POOL_MAX,
    POOL_RESERVE,
    pool_max_setting,
    size_worker_pool,
    worker_pool_minimum,
)

BASE_DIR = Path(__file__).resolve().parent.parent


def databases(max_size: int | None) -> dict[str, Any]:
    options: dict[str, Any] = (
        {} if max_size is None else {"pool": {"min_size": 1, "max_size": max_size, "timeout": 30.0}}
    )
    return {"default": {"ENGINE": "django.db.backends.postgresql", "OPTIONS": options}}


def test_a_worker_needs_a_connection_per_thread_and_a_reserve() -> None:
    assert POOL_RESERVE >= 1  # the heartbeat thread borrows one too
    assert worker_pool_minimum(4) == 4 + POOL_RESERVE
    assert worker_pool_minimum(64) == 64 + POOL_RESERVE


@pytest.mark.parametrize(
    ("threads", "expected"),
    [(1, DEFAULT_POOL_MAX), (4, DEFAULT_POOL_MAX), (64, 64 + POOL_RESERVE), (200, 200 + POOL_RESERVE)],
)
def test_the_default_pool_grows_with_the_worker_concurrency(threads: int, expected: int) -> None:
    dbs = databases(DEFAULT_POOL_MAX)
    assert size_worker_pool(dbs, threads, explicit=False) is None
    assert dbs["default"]["OPTIONS"]["pool"]["max_size"] == expected


def test_an_explicit_pool_smaller_than_the_threads_need_is_refused() -> None:
    dbs = databases(10)
    refusal = size_worker_pool(dbs, 64, explicit=True)
    assert refusal is not None
    assert "CLAWBOARD_DB_POOL_MAX=10" in refusal
    assert f"at least {64 + POOL_RESERVE}" in refusal
    assert "-c 64" in refusal
    assert dbs["default"]["OPTIONS"]["pool"]["max_size"] == 10  # left as configured


def test_an_explicit_pool_large_enough_is_kept() -> None:
    dbs = databases(100)
    assert size_worker_pool(dbs, 64, explicit=True) is None
    assert dbs["default"]["OPTIONS"]["pool"]["max_size"] == 100
    dbs = databases(6)
    assert size_worker_pool(dbs, 4, explicit=True) is None


def test_no_pool_means_nothing_to_size() -> None:
    off = databases(None)  # CLAWBOARD_DB_POOL_MAX=0: a connection per thread, nothing shared
    assert size_worker_pool(off, 64, explicit=True) is None
    assert off["default"]["OPTIONS"] == {}
    sqlite = {"default": {"ENGINE": "django.db.backends.sqlite3", "OPTIONS": {}}}
    assert size_worker_pool(sqlite, 64, explicit=False) is None


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, (DEFAULT_POOL_MAX, False)),
        ("", (DEFAULT_POOL_MAX, False)),
        ("25", (25, True)),
        ("0", (0, True)),
    ],
)
def test_the_setting_says_whether_the_operator_chose_it(raw: str | None, expected: tuple[int, bool]) -> None:
    assert pool_max_setting(raw) == expected


def test_a_celery_worker_refuses_a_small_explicit_pool_at_start(tmp_path: Path) -> None:
    """The real worker start: settings with PostgreSQL and a pool of 3, `-c 8`. The worker exits
    before it connects to anything (the broker URL leads nowhere)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CELERY_", "CLAWBOARD_"))}
    env.update(
        DATA_DIR=str(tmp_path),
        DATABASE_URL="postgres://nobody@127.0.0.1:1/none",
        CELERY_BROKER_URL="redis://127.0.0.1:1/0",
        CHANNEL_LAYER_URL="redis://127.0.0.1:1/1",
        CLAWBOARD_DB_POOL_MAX="3",
        DJANGO_SETTINGS_MODULE="zeroclaw_site.settings",
    )
    celery = Path(sys.executable).parent / "celery"
    done = subprocess.run(
        [str(celery), "-A", "zeroclaw_site", "worker", "-P", "threads", "-c", "8", "-Q", "pool-refusal-test"],
        cwd=BASE_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode != 0
    assert (
        f"CLAWBOARD_DB_POOL_MAX=3 is too small for a worker with -c 8: it needs at least {8 + POOL_RESERVE}"
        in (done.stdout + done.stderr)
    )
