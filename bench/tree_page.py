"""Server time of the run page (`GET /runs/<id>/`) for a finished tree of 1,000 and 10,000 runs.

The whole Django request is timed in-process (middleware, session, role, the tree query, the
HTML built in Python, the template), with the test client and DEBUG off, on a throwaway SQLite
database. Two tree shapes:
  fanout-10  every run has up to 10 children, so every node is on the page
  flat       one root with N-1 children: the page shows the first 50, the rest load on demand
Reported: median of --repeat requests after a warm-up, SQL queries per request, page size,
and the two parts inside the view (the tree query + sums, the HTML of the nodes).

Usage: python bench/tree_page.py [--sizes 1000,10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import ROOT, median, table  # noqa: E402


def setup() -> None:
    os.environ["DATA_DIR"] = tempfile.mkdtemp(prefix="clawboard-bench-")
    os.environ.pop("DATABASE_URL", None)
    os.environ["DJANGO_DEBUG"] = "false"
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zeroclaw_site.settings")
    os.chdir(ROOT)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def build_tree(size: int, fanout: int) -> str:
    """A finished tree of `size` runs, children filled breadth-first; one bulk_create."""
    from django.utils import timezone

    from runs_app.models import Run

    now = timezone.now()
    root_id = uuid.uuid4()
    rows: list[Run] = []
    for i in range(size):
        run_id = root_id if i == 0 else uuid.uuid4()
        rows.append(
            Run(
                id=run_id,
                parent_id=None if i == 0 else rows[(i - 1) // fanout].pk,
                root_id=root_id,
                agent="coordinator",
                kind=Run.Kind.TOP_LEVEL if i == 0 else Run.Kind.SUBAGENT,
                status=Run.Status.COMPLETED,
                session_key=f"subagent-{run_id}",
                prompt=f"part {i} of the work",
                output=f"finished part {i}: " + "lorem ipsum " * 8,
                started_at=now - timedelta(seconds=3),
                finished_at=now,
                input_tokens=120,
                output_tokens=40,
                cost_cents=0.02,
            )
        )
    Run.objects.bulk_create(rows, batch_size=1000)
    return str(root_id)


def measure(client: Any, root: str, repeat: int) -> dict[str, Any]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from runs_app import selectors, tree_html

    url = f"/runs/{root}/"
    response = client.get(url, secure=True)  # warm-up
    assert response.status_code == 200, response.status_code
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url, secure=True)
        times.append(time.perf_counter() - start)
    with CaptureQueriesContext(connection) as queries:
        client.get(url, secure=True)
    tree_times, html_times = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        tree = selectors.run_tree(root)
        tree_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        tree_html.node_html(tree)
        html_times.append(time.perf_counter() - start)
    return {
        "ms": median(times) * 1000,
        "queries": len(queries.captured_queries),
        "kb": len(response.content) / 1024,
        "nodes": response.content.count(b'<li class="node"'),
        "tree_ms": median(tree_times) * 1000,
        "html_ms": median(html_times) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    setup()
    from django.test import Client

    from agents_app.users import user_create_or_update

    user, _, _ = user_create_or_update(username="bench-viewer", role="viewer")
    client = Client()
    client.force_login(user)
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        for shape, fanout in (("fanout-10", 10), ("flat", size)):
            m = measure(client, build_tree(size, fanout), args.repeat)
            rows.append(
                [
                    size,
                    shape,
                    m["nodes"],
                    f"{m['ms']:.1f}",
                    m["queries"],
                    f"{m['tree_ms']:.1f}",
                    f"{m['html_ms']:.1f}",
                    f"{m['kb']:.0f}",
                ]
            )
    print(
        f"GET /runs/<root>/ of a finished tree: median of {args.repeat} after a warm-up (SQLite, DEBUG off)"
    )
    print(
        table(
            [
                "runs",
                "shape",
                "nodes on page",
                "server ms",
                "SQL queries",
                "tree query ms",
                "node HTML ms",
                "page KiB",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
