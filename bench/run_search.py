"""Server time of the runs list with a full-text search (`GET /runs/?q=...`) at 100,000 runs.

Builds 10,000 finished trees of 10 runs (one bulk_create; prompts and outputs drawn from a fixed
vocabulary, so a word is rare, uncommon or common), then times whole requests in-process (test
client, DEBUG off, one viewer's session: middleware, role, the count, the page of 50 and the
template): the plain list, a search for a rare word (10 runs), an uncommon one (about 1%), a
common one (about half the runs), two words, a prefix, a search within an agent, and sorts by
duration and cost. Median of --repeat after a warm-up, with the SQL queries of one request.

SQLite (FTS5) by default, on a throwaway database. `--postgresql URL` runs the same on a fresh
database created on that server (PostgreSQL full-text search, GIN index), dropped at the end.

Usage: python bench/run_search.py [--runs 100000] [--repeat 5] [--postgresql postgres://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import ROOT, median, table  # noqa: E402

VOCABULARY = (
    "report summary draft outline review budget invoice schedule deploy rollback migrate index "
    "customer ticket refund shipment forecast audit backlog release sprint metric latency"
).split()


def setup(pg_url: str | None) -> str | None:
    os.environ["DATA_DIR"] = tempfile.mkdtemp(prefix="clawboard-bench-")
    os.environ["DJANGO_DEBUG"] = "false"
    os.environ["SECURE_SSL_REDIRECT"] = "false"
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zeroclaw_site.settings")
    db_name = None
    if pg_url:
        import psycopg

        db_name = f"clawboard_bench_search_{os.getpid()}"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {db_name}")
        os.environ["DATABASE_URL"] = f"{pg_url.rsplit('/', 1)[0]}/{db_name}"
        os.environ["CLAWBOARD_DB_POOL_MAX"] = "0"
    else:
        os.environ.pop("DATABASE_URL", None)
    os.chdir(ROOT)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return db_name


def build(total: int) -> None:
    from django.utils import timezone

    from runs_app.models import Run

    rng = random.Random(17)
    now = timezone.now()
    rows: list[Run] = []
    per_tree = 10
    for t in range(total // per_tree):
        root_id = uuid.uuid4()
        created = now - timedelta(seconds=(total - t * per_tree) * 3)
        for i in range(per_tree):
            run_id = root_id if i == 0 else uuid.uuid4()
            n = t * per_tree + i
            words = " ".join(rng.choice(VOCABULARY) for _ in range(12))
            rare = " walrus" if n % 10_000 == 0 else ""
            uncommon = " narwhal" if n % 100 == 0 else ""
            rows.append(
                Run(
                    id=run_id,
                    parent_id=None if i == 0 else root_id,
                    root_id=root_id,
                    agent=f"agent{t % 5}",
                    kind=Run.Kind.TOP_LEVEL if i == 0 else Run.Kind.SUBAGENT,
                    status=Run.Status.COMPLETED if n % 7 else Run.Status.FAILED,
                    session_key=f"run-{run_id}",
                    prompt=f"task {n}: {words}{uncommon}",
                    output=f"done {n}: " + " ".join(rng.choice(VOCABULARY) for _ in range(30)) + rare,
                    error="" if n % 7 else "provider refused: quota exceeded",
                    created_at=created,
                    started_at=created,
                    finished_at=created + timedelta(milliseconds=rng.randint(5, 90_000)),
                    input_tokens=rng.randint(10, 5000),
                    output_tokens=rng.randint(5, 2000),
                    cost_cents=rng.random() * 5,
                )
            )
        if len(rows) >= 5000:
            Run.objects.bulk_create(rows, batch_size=1000)
            rows = []
    if rows:
        Run.objects.bulk_create(rows, batch_size=1000)


def timed(client: Any, url: str, repeat: int) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url, secure=True)
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url, secure=True)
        times.append(time.perf_counter() - start)
    with CaptureQueriesContext(connection) as queries:
        client.get(url, secure=True)
    body = response.content.decode()
    count = body.rsplit(" run", 1)[0].rsplit("· ", 1)[-1].strip()
    return {"ms": median(times) * 1000, "sql": len(queries.captured_queries), "matches": count}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--postgresql", default="", help="a server URL: run on a fresh database there")
    parser.add_argument(
        "--keep", action="store_true", help="leave the PostgreSQL database (its name is printed)"
    )
    args = parser.parse_args()
    db_name = setup(args.postgresql or None)
    try:
        from django.db import connection
        from django.test import Client

        from agents_app.users import user_create_or_update

        start = time.perf_counter()
        build(args.runs)
        built = time.perf_counter() - start
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE runs_app_run")
        user, _, _ = user_create_or_update(username="bench-viewer", role="viewer")
        client = Client()
        client.force_login(user)
        print(
            f"{connection.vendor}: {args.runs:,} runs built in {built:.1f} s; load average {os.getloadavg()[0]:.2f}"
        )
        cases = [
            ("list, roots, newest first", "/runs/"),
            ("search a rare word (10 runs)", "/runs/?q=walrus"),
            ("search an uncommon word (1%)", "/runs/?q=narwhal"),
            ("search a common word", "/runs/?q=invoice"),
            ("search two words", "/runs/?q=invoice+refund"),
            ("search a prefix", "/runs/?q=narwh"),
            ("search within one agent", "/runs/?q=narwhal&agent=agent0"),
            ("search errors, failed only", "/runs/?q=quota&status=failed"),
            ("list, roots, sort by duration", "/runs/?sort=-duration"),
            ("list, roots, sort by cost", "/runs/?sort=-cost"),
        ]
        out = []
        for name, url in cases:
            r = timed(client, url, args.repeat)
            out.append([name, url, r["matches"], f"{r['ms']:.1f}", r["sql"]])
        print(table(["request", "url", "matches", "median ms", "SQL"], out))
    finally:
        if db_name and args.keep:
            print(f"kept database {db_name}")
        elif db_name:
            from django.db import connections

            connections.close_all()
            import psycopg

            with psycopg.connect(args.postgresql, autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {db_name}")


if __name__ == "__main__":
    main()
