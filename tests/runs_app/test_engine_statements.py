"""How many SQL statements a run costs, counted as the database sees them: every statement this
process sends, BEGIN and SAVEPOINT included; COMMIT (sent by the driver) and RELEASE SAVEPOINT
not, nor the statements of SQLite's own triggers. A statement count is deterministic, so it is
pinned here like any other behaviour (docs/performance.md says where each statement goes).

Every message of the tree runs in the test's own thread (`QueuedDispatcher`), so the test's
connection sees every statement from `run_start` to the root's terminal event. Run with `-s` to
print where they go."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs_app.engine import dispatch
from runs_app.models import Run
from runs_app.services import run_start
from tests.runs_app.engine_support import agent, configure, inline, provider  # noqa: F401 - fixture

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("inline")]

CHILDREN = 60
# The budgets, per child of a coordinator that spawns one child per model turn, and for a
# top-level run of one model turn.
PER_CHILD = 28
ONE_TURN = 16

RUNTIME = """
[runtime_profiles.wide]
max_tool_iterations = 5000
max_actions_per_hour = 10000000
max_cost_per_day_cents = 10000000
max_children_per_run = 20
"""


def counted(queries: list[dict[str, Any]]) -> list[str]:
    return [q["sql"] for q in queries if not q["sql"].startswith(("RELEASE SAVEPOINT", "COMMIT"))]


def without_subqueries(sql: str) -> str:
    """The statement with each parenthesised SELECT cut out: what is left names its own table."""
    while (start := sql.find("(SELECT")) >= 0:
        depth, end = 0, start
        for end in range(start, len(sql)):
            depth += {"(": 1, ")": -1}.get(sql[end], 0)
            if depth == 0:
                break
        sql = sql[:start] + "(…)" + sql[end + 1 :]
    return sql


def shape(sql: str) -> str:
    """A statement without its values: its verb, its table, and what tells it apart."""
    sql = re.sub(r"'[^']*'", "?", sql)
    sql = re.sub(r"\b\d+(\.\d+)?\b", "?", sql)
    sql = without_subqueries(sql)
    verb = sql.split(None, 1)[0].upper()
    if verb in ("BEGIN", "SAVEPOINT"):
        return verb
    table = re.search(r'(?:FROM|INTO|UPDATE)\s+"(\w+)"', sql)
    name = table.group(1) if table else "?"
    if verb == "UPDATE":
        sets = re.findall(r'"(\w+)" = ', sql.split(" WHERE ")[0])
        return f"UPDATE {name} SET {','.join(sets)}"
    if verb == "SELECT":
        where = sql.split(" WHERE ", 1)[1] if " WHERE " in sql else ""
        cols = sorted(set(re.findall(r'"\w+"\."(\w+)"', where)))
        what = (
            "COUNT" if "COUNT(" in sql.upper() else ("EXISTS" if "LIMIT ?" in sql and "1 AS" in sql else "")
        )
        return f"SELECT {what} {name} WHERE {','.join(cols)}".replace("  ", " ")
    return f"{verb} {name}"


def report(title: str, statements: list[str], per: int) -> None:
    print(f"\n{title}: {len(statements)} statements, {len(statements) / per:.2f} each")
    for key, n in Counter(shape(s) for s in statements).most_common():
        print(f"{n / per:7.2f}  {key}")


def test_a_sequentially_spawned_child_costs_at_most_its_budget_of_statements() -> None:
    spawn = {"name": "spawn_subagent", "arguments": {"prompt": "child: work"}}
    turns: list[dict[str, Any]] = [{"tool_calls": [spawn]} for _ in range(CHILDREN)]
    configure(
        provider(
            "coord",
            [{"match": "^child:", "turns": [{"say": "ok"}]}, {"turns": [*turns, {"say": "done"}]}],
        )
        + agent("coordinator", "scripted.coord", runtime="wide")
        + RUNTIME
    )
    with CaptureQueriesContext(connection) as ctx:
        root = run_start(agent="coordinator", prompt="coordinate")
        dispatch.queued().run_until_idle()
    run = Run.objects.get(pk=root.pk)
    assert (run.status, run.output) == ("completed", "done")
    assert Run.objects.filter(parent=run, status="completed").count() == CHILDREN
    statements = counted(ctx.captured_queries)
    report("sequential", statements, CHILDREN)
    assert len(statements) <= PER_CHILD * CHILDREN


def test_a_top_level_run_of_one_model_turn_costs_at_most_its_budget_of_statements() -> None:
    configure(provider("solo", [{"turns": [{"say": "hello"}]}]) + agent("solo", "scripted.solo"))
    run_start(agent="solo", prompt="warm up")  # the configuration read once, as in a server
    dispatch.queued().run_until_idle()
    with CaptureQueriesContext(connection) as ctx:
        root = run_start(agent="solo", prompt="hi")
        dispatch.queued().run_until_idle()
    assert Run.objects.get(pk=root.pk).status == "completed"
    statements = counted(ctx.captured_queries)
    report("one turn", statements, 1)
    assert len(statements) <= ONE_TURN
