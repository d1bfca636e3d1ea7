"""Server time and SQL queries of the run page (`GET /runs/<id>/`) and of the REST tree
(`GET /api/v1/runs/<id>/tree/`) for finished trees of 100, 1,000 and 10,000 runs.

Each whole Django request is timed in-process (middleware, session, role, the tree query, the
HTML built in Python and the template, or the JSON rendering), with the test client and DEBUG
off, on a throwaway SQLite database. Two tree shapes:
  fanout-10  every run has up to 10 children, so every node is on the page
  flat       one root with N-1 children: the page shows the first 50, the rest load on demand
             (the REST tree always has every node)
Reported: median of --repeat requests after a warm-up, SQL queries of one request, response
size, and the parts inside the views (the tree query with its subtree sums, the HTML of the
nodes, the JSON of the tree). The load average is printed before and after: the figures are
only comparable between runs on an equally busy machine.

Usage: python bench/tree_page.py [--sizes 100,1000,10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
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


def timed_get(client: Any, url: str, repeat: int) -> dict[str, Any]:
    """Median server time of `repeat` GETs after a warm-up, the queries of one more, its size."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    response = client.get(url, secure=True)  # warm-up
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        response = client.get(url, secure=True)
        times.append(time.perf_counter() - start)
    with CaptureQueriesContext(connection) as queries:
        client.get(url, secure=True)
    return {
        "ms": median(times) * 1000,
        "queries": len(queries.captured_queries),
        "kb": len(response.content) / 1024,
        "body": response.content,
    }


def part_ms(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return median(times) * 1000


def measure(client: Any, root: str, repeat: int) -> dict[str, Any]:
    from rest_framework.renderers import JSONRenderer

    from runs_app import selectors, tree_html

    page = timed_get(client, f"/runs/{root}/", repeat)
    api = timed_get(client, f"/api/v1/runs/{root}/tree/", repeat)
    tree = selectors.run_tree(root)
    return {
        "page": page,
        "api": api,
        "nodes": page["body"].count(b'<li class="node"'),
        "tree_ms": part_ms(lambda: selectors.run_tree(root), repeat),
        "html_ms": part_ms(lambda: tree_html.node_html(tree), repeat),
        "json_ms": part_ms(lambda: JSONRenderer().render(tree), repeat),
    }


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    load_before = load_average()
    setup()
    from django.test import Client

    from agents_app.users import user_create_or_update

    user, _, _ = user_create_or_update(username="bench-viewer", role="viewer")
    client = Client()
    client.force_login(user)  # a session: the dashboard and the REST API both accept it
    rows = []
    for size in [int(s) for s in args.sizes.split(",")]:
        for shape, fanout in (("fanout-10", 10), ("flat", size)):
            m = measure(client, build_tree(size, fanout), args.repeat)
            page, api = m["page"], m["api"]
            rows.append(
                [
                    size,
                    shape,
                    m["nodes"],
                    f"{page['ms']:.1f}",
                    page["queries"],
                    f"{api['ms']:.1f}",
                    api["queries"],
                    f"{m['tree_ms']:.1f}",
                    f"{m['html_ms']:.1f}",
                    f"{m['json_ms']:.1f}",
                    f"{page['kb']:.0f}",
                    f"{api['kb']:.0f}",
                ]
            )
    print(
        f"Finished trees, median of {args.repeat} requests after a warm-up (SQLite, DEBUG off); "
        f"load average (1, 5, 15 min) {load_before} before, {load_average()} after"
    )
    print("page = GET /runs/<root>/, REST = GET /api/v1/runs/<root>/tree/")
    print(
        table(
            [
                "runs",
                "shape",
                "nodes on page",
                "page ms",
                "page SQL",
                "REST ms",
                "REST SQL",
                "tree query ms",
                "node HTML ms",
                "JSON ms",
                "page KiB",
                "REST KiB",
            ],
            rows,
        )
    )


if __name__ == "__main__":
    main()
