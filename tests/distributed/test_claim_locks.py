"""The claim lock never closes a deadlock on PostgreSQL (runs_app/engine/claims.py).

Claims count the running runs under one global, transaction-scoped advisory lock. A worker's
`claim` takes it as the first statement of its own transaction, before its tree's lock, so a
holder of the claim lock that then needs that tree's lock gets it. Against the real
PostgreSQL of the cluster, with Django code run by `manage.py shell` and this test's own
connection standing in for the other transaction.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import psycopg

from tests.distributed.conftest import Cluster

KEYS = """
from runs_app import events
from runs_app.engine import claims
print(f"keys {claims.CLAIM_LOCK_KEY} {events.EVENT_LOCK_SPACE}")
"""

# created_at an hour ahead keeps the reaper from re-sending the queued run to a worker meanwhile.
CLAIM = """
from datetime import timedelta
from django.db import connection
from django.utils import timezone
from runs_app.engine import claims
from runs_app.models import Run

RID = "{rid}"
with connection.cursor() as cur:
    cur.execute("SET lock_timeout = '60s'")
Run.objects.create(id=RID, agent="nobody", prompt="p", status="queued")
Run.objects.filter(pk=RID).update(root_id=RID, created_at=timezone.now() + timedelta(hours=1))
run = claims.claim(RID)
print(f"claimed: {{run and run.status}}")
Run.objects.filter(pk=RID).update(status="cancelled")
"""


def shell(c: Cluster, code: str) -> str:
    """What the script printed (no start-up banner: --no-imports)."""
    return c.manage("shell", "--no-imports", "-c", code, timeout=120).strip()


def lock_keys(c: Cluster) -> tuple[int, int]:
    words = shell(c, KEYS).split()
    assert words[0] == "keys", words
    return int(words[1]), int(words[2])


def holder(c: Cluster) -> psycopg.Connection[Any]:
    conn = psycopg.connect(c.db_url, autocommit=False)
    conn.execute("SET lock_timeout = '30s'")
    return conn


def test_a_worker_claim_waits_for_the_claim_lock_before_its_tree_lock(cluster: Cluster) -> None:
    c = cluster
    claim_key, tree_space = lock_keys(c)
    rid = str(uuid.uuid4())
    outcome: list[str | BaseException] = []

    def worker_claim() -> None:
        try:
            outcome.append(shell(c, CLAIM.format(rid=rid)))
        except BaseException as exc:  # reported by the assertion below
            outcome.append(exc)

    with holder(c) as other:
        # The other transaction holds the claim lock and goes on.
        other.execute("SELECT pg_advisory_xact_lock(%s)", [claim_key])
        thread = threading.Thread(target=worker_claim)
        thread.start()
        deadline = time.monotonic() + 60
        while not waiting_for_advisory(c, claim_key):
            assert thread.is_alive(), f"the claim did not wait for the claim lock: {outcome}"
            assert time.monotonic() < deadline, "the claim never came to wait for the claim lock"
            time.sleep(0.05)
        # ...and now needs the claimed run's tree: it must not find it held by the waiting claim.
        other.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [tree_space, rid])
        other.commit()
    thread.join(120)
    assert [str(o) for o in outcome] == ["claimed: running"]


def waiting_for_advisory(c: Cluster, key: int) -> bool:
    rows = c.q(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 0 AND objid = %s"
        " AND objsubid = 1 AND NOT granted AND database = (SELECT oid FROM pg_database WHERE datname = %s)",
        (key, c.db_name),
    )
    return int(rows[0][0]) > 0
