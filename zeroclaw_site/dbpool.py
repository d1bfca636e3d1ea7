"""How big the database pool of a scale-out process is (PostgreSQL; settings.py, celery.py).

A thread of a Celery worker keeps the pooled connection it borrowed between tasks
(`CELERY_DB_REUSE_MAX`), so a worker with `-c N` threads needs N connections at once, plus
`POOL_RESERVE` for its other threads (the heartbeat). With fewer, the threads beyond the pool
wait `CLAWBOARD_DB_POOL_TIMEOUT` seconds for a connection and their task fails: with `-c 64`
and the old fixed default of 10, a tree of 20 children stalled.

So the pool is sized from the worker's concurrency when the worker starts: by default it is
`max(DEFAULT_POOL_MAX, N + POOL_RESERVE)`; a `CLAWBOARD_DB_POOL_MAX` that the operator set
below `N + POOL_RESERVE` makes the worker refuse to start, saying what it needs. daphne keeps
`DEFAULT_POOL_MAX`: its waiting requests hold no connection (runs_app/live.py).
"""

from __future__ import annotations

from typing import Any

DEFAULT_POOL_MAX = 10
POOL_RESERVE = 2  # connections of a worker's threads that are not task threads (the heartbeat)


def pool_max_setting(raw: str | None) -> tuple[int, bool]:
    """(the pool's max size, whether the operator chose it) from CLAWBOARD_DB_POOL_MAX."""
    if raw is None or not raw.strip():
        return DEFAULT_POOL_MAX, False
    return int(raw), True


def worker_pool_minimum(concurrency: int) -> int:
    return concurrency + POOL_RESERVE


def size_worker_pool(databases: dict[str, Any], concurrency: int, *, explicit: bool) -> str | None:
    """Fit the default database's pool to a worker with `concurrency` threads, in place.

    Returns the refusal to start when the operator's explicit pool is too small; None when the
    pool fits (or was raised to fit), or when there is no pool (SQLite, or the pool off).
    """
    pool = databases["default"].get("OPTIONS", {}).get("pool")
    if not isinstance(pool, dict):
        return None
    need = worker_pool_minimum(concurrency)
    size = int(pool.get("max_size", DEFAULT_POOL_MAX))
    if size >= need:
        return None
    if explicit:
        return (
            f"Clawboard: refusing to start: CLAWBOARD_DB_POOL_MAX={size} is too small for a worker "
            f"with -c {concurrency}: it needs at least {need} ({concurrency} threads + {POOL_RESERVE}), "
            f"or its threads would wait for a database connection and their runs stall. Raise "
            f"CLAWBOARD_DB_POOL_MAX, leave it unset (sized from -c), or lower -c."
        )
    pool["max_size"] = need
    return None
