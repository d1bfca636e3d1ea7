"""Django's SQLite backend, with one change: the threads of a process that open a write
transaction (`BEGIN IMMEDIATE`) queue on a lock of their own instead of on SQLite's busy handler.

SQLite lets one writer at a time hold the database. A second one that finds it taken sleeps in
the busy handler, in growing steps (1, 2, 5, 10 ... 100 ms), and tries again; when the holder
commits half a millisecond later, the waiter is still asleep, and the database sits idle. In
the embedded mode the worker threads and the server's threads all write to one file, so a
turn of twenty children spent about a fifth of its time asleep there (bench/spawn_overhead.py
under py-spy). A lock taken before `BEGIN IMMEDIATE` and released when the transaction ends
hands the database over at once, in arrival order.

The lock only orders writers inside one process. Another process (a management command, a
second server) still meets SQLite's own busy handler, as before. A thread that waits longer
than the database's busy timeout goes on to `BEGIN IMMEDIATE` without the lock, so the worst
case is SQLite's own behaviour: "database is locked" once its timeout passes."""

from __future__ import annotations

import threading
from typing import Any

from django.db.backends.sqlite3 import base

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def writer_lock(name: str) -> threading.Lock:
    """The lock of one database file, shared by every connection of this process to it."""
    with _locks_guard:
        return _locks.setdefault(str(name), threading.Lock())


class DatabaseWrapper(base.DatabaseWrapper):
    _writer: threading.Lock | None = None  # held by this connection's open write transaction

    def _start_transaction_under_autocommit(self) -> None:
        lock: threading.Lock | None = None
        if (
            getattr(self, "transaction_mode", None) in ("IMMEDIATE", "EXCLUSIVE")
            and not self.is_in_memory_db()
        ):
            lock = writer_lock(self.settings_dict["NAME"])
            timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
            if not lock.acquire(timeout=timeout):
                lock = None  # as if there were no lock: SQLite's busy handler decides
        self._writer = lock
        try:
            super()._start_transaction_under_autocommit()  # type: ignore[misc]
        except BaseException:
            self._release_writer()
            raise

    def _release_writer(self) -> None:
        lock, self._writer = self._writer, None
        if lock is not None:
            lock.release()

    def _set_autocommit(self, autocommit: Any) -> None:
        try:
            super()._set_autocommit(autocommit)  # type: ignore[misc]
        finally:
            if autocommit:  # the end of an atomic block: committed or rolled back
                self._release_writer()

    def _close(self) -> None:
        try:
            super()._close()  # type: ignore[misc]
        finally:
            self._release_writer()
