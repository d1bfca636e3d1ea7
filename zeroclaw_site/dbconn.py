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
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

_thread = threading.local()


def default() -> Any:
    """This thread's wrapper of the default database, as `django.db.connection` gives it."""
    try:
        return _thread.conn
    except AttributeError:
        _thread.conn = connections[DEFAULT_DB_ALIAS]
        return _thread.conn
