"""The SQLite backend's writer lock (zeroclaw_site/sqlite_backend/base.py): the threads of one
process that open write transactions take turns on a lock of their own, held from BEGIN to the
end of the transaction whatever the ending."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, connections, transaction

from runs_app.models import Steer
from zeroclaw_site.sqlite_backend.base import writer_lock

pytestmark = pytest.mark.django_db(transaction=True)


def lock() -> threading.Lock:
    return writer_lock(connection.settings_dict["NAME"])


def in_thread(fn: Any) -> threading.Thread:
    def run() -> None:
        try:
            fn()
        finally:
            connections.close_all()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_the_backend_in_use_is_ours() -> None:
    assert connection.settings_dict["ENGINE"] == "zeroclaw_site.sqlite_backend"
    assert connection.vendor == "sqlite"


def test_a_write_transaction_holds_the_lock_until_it_commits() -> None:
    assert not lock().locked()
    with transaction.atomic():
        assert lock().locked()
        with transaction.atomic():  # a savepoint takes nothing more
            assert lock().locked()
        assert lock().locked()
    assert not lock().locked()


def test_the_lock_is_released_by_a_rollback_and_by_a_close() -> None:
    with pytest.raises(ZeroDivisionError), transaction.atomic():
        assert lock().locked()
        1 / 0  # noqa: B018
    assert not lock().locked()
    with transaction.atomic():
        assert lock().locked()
        connection.close()
        assert not lock().locked()
    connection.connect()


def test_a_second_writer_waits_for_the_first_to_commit_then_goes_on() -> None:
    order: list[str] = []
    first_in = threading.Event()

    def first() -> None:
        with transaction.atomic():
            first_in.set()
            time.sleep(0.3)
            order.append("first commits")

    def second() -> None:
        first_in.wait(5)
        with transaction.atomic():
            order.append("second begins")

    threads = [in_thread(first), in_thread(second)]
    for t in threads:
        t.join(10)
    assert order == ["first commits", "second begins"]
    assert not lock().locked()


def test_a_writer_that_waits_past_the_timeout_goes_on_without_the_lock() -> None:
    held = lock()
    held.acquire()  # as if another thread of this process never let go
    try:
        options = connection.settings_dict.setdefault("OPTIONS", {})
        saved = options.get("timeout")
        options["timeout"] = 0.2
        try:
            started = time.monotonic()
            with transaction.atomic():  # SQLite itself is free: BEGIN IMMEDIATE succeeds
                Steer.objects.all().count()
                assert connection._writer is None  # type: ignore[attr-defined]
            assert time.monotonic() - started >= 0.2
        finally:
            options["timeout"] = saved
    finally:
        held.release()


def test_every_connection_is_opened_with_the_deployed_pragmas() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    pragmas = {}
    with connection.cursor() as cursor:
        for name in ("journal_mode", "synchronous", "busy_timeout", "temp_store"):
            cursor.execute(f"PRAGMA {name}")
            pragmas[name] = cursor.fetchone()[0]
    # WAL; NORMAL (1); 30 s; temporary b-trees (statement journals, sorts) in memory (2),
    # rather than a file created and unlinked under /var/tmp for each
    assert pragmas == {"journal_mode": "wal", "synchronous": 1, "busy_timeout": 30000, "temp_store": 2}
