"""This thread's default database connection, looked up once per thread.

`django.db.connection.x` and `transaction.get_connection()` go through asgiref's Local on every
use, which costs two raised-and-caught exceptions each time (the attribute lookup that fails
before `__getattr__`, then `asyncio.get_running_loop()` in a thread with no loop). The engine
asks about a hundred times per child, so that lookup alone was about 8% of a spawn's time
(bench/spawn_overhead.py under py-spy). Worker and request threads are plain threads, where
Django keeps one connection wrapper per thread for the thread's whole life, so the wrapper
found once is the one every later lookup would find."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from functools import cache
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

_thread = threading.local()


def default() -> Any:
    """This thread's wrapper of the default database, as `django.db.connection` gives it."""
    try:
        return _thread.conn
    except AttributeError:
        _thread.conn = connections[DEFAULT_DB_ALIAS]
        return _thread.conn


def when(value: datetime | None) -> Any:
    """A timestamp as the backend's `adapt_datetimefield_value` gives it, without its settings
    and time-zone lookups for the usual case: an aware UTC time (`timezone.now()`)."""
    mode = _when_mode()
    if mode == "same":
        return value
    if mode == "utc-text" and value is not None and value.tzinfo is UTC:
        return str(value.replace(tzinfo=None))
    return default().ops.adapt_datetimefield_value(value)


@cache
def _when_mode() -> str:
    """ "same": the driver takes datetimes as they are (PostgreSQL); "utc-text": SQLite with
    USE_TZ and a UTC connection, which stores `str()` of the naive UTC time; else "django"."""
    db = connections[DEFAULT_DB_ALIAS]
    if db.vendor == "postgresql":
        return "same"
    if db.vendor == "sqlite" and settings.USE_TZ and db.timezone is UTC:
        return "utc-text"
    return "django"
