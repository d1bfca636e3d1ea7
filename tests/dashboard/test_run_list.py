"""The runs list: roots with a child count, durations, sorting, filters that refuse bad values,
and full-text search over prompts, outputs and errors (runs_app/selectors.run_search)."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from agents_app.users import user_create_or_update
from runs_app import selectors
from runs_app.models import Run
from tests.dashboard.support import Runs, make_run, text_of

STATUS_LIST = "queued, running, waiting, awaiting_approval, completed, failed, cancelled, timed_out, lost"
AGE_HINT = "use a date (2026-11-30), a date and time (2026-11-30T08:00) or an age (90m, 24h, 7d)"


def rows(response: object) -> list[str]:
    """The run ids of the list's rows, in order."""
    return re.findall(r'<tr id="row-([0-9a-f-]{36})"', response.content.decode())  # type: ignore[attr-defined]


def refusal(response: object) -> list[str]:
    body = response.content.decode()  # type: ignore[attr-defined]
    return [
        text_of_fragment(li)
        for block in re.findall(r'<ul class="filter-errors"[^>]*>(.*?)</ul>', body, flags=re.S)
        for li in re.findall(r"<li>(.*?)</li>", block, flags=re.S)
    ]


def text_of_fragment(fragment: str) -> str:
    import html

    return html.unescape(fragment)


def test_the_list_shows_root_runs_by_default_with_their_child_count(viewer: Client, runs: Runs) -> None:
    response = viewer.get("/runs/")
    ids = rows(response)
    assert str(runs.root.pk) in ids
    assert str(runs.child.pk) not in ids and str(runs.gated.pk) not in ids
    assert re.search(rf'id="row-{runs.root.pk}".*?<td class="children">3</td>', text_of(response), re.S)


def test_scope_all_lists_children_too(viewer: Client, runs: Runs) -> None:
    ids = rows(viewer.get("/runs/?scope=all"))
    assert {str(runs.root.pk), str(runs.child.pk), str(runs.gated.pk), str(runs.task.pk)} <= set(ids)


def test_the_duration_and_the_cost_are_readable(viewer: Client, config: None) -> None:
    now = timezone.now()
    run = make_run(
        "alpha",
        started_at=now - timedelta(milliseconds=42),
        finished_at=now,
        cost_cents=0.42,
        input_tokens=1200,
    )
    page = text_of(viewer.get("/runs/"))
    row = re.search(rf'<tr id="row-{run.pk}".*?</tr>', page, re.S)
    assert row is not None
    assert "<td>42 ms</td>" in row.group(0)
    assert "$0.0042" in row.group(0)
    assert "1,205" in row.group(0)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("status=bogus", f"Unknown status 'bogus'. Use one of: {STATUS_LIST}"),
        ("kind=weird", "Unknown kind 'weird'. Use one of: top_level, cron, subagent, delegate"),
        ("since=yesterday", f"Invalid since 'yesterday': {AGE_HINT}"),
        ("until=soon", f"Invalid until 'soon': {AGE_HINT}"),
        ("since=2026-13-45", f"Invalid since '2026-13-45': {AGE_HINT}"),
        ("since=1e400h", f"Invalid since '1e400h': {AGE_HINT}"),
        ("since=99999999d", f"Invalid since '99999999d': {AGE_HINT}"),
        (
            "sort=price",
            "Unknown sort 'price'. Use one of: started, -started, duration, -duration, cost, -cost, tokens, -tokens",
        ),
        ("scope=some", "Unknown scope 'some'. Use one of: roots, all"),
        ("user=ghost", "Unknown user 'ghost'"),
        ("agent=Not An Alias", "Invalid agent 'Not An Alias': an alias is [a-z0-9][a-z0-9_-]{0,63}"),
        ("since=2026-11-30&until=2026-11-01", "since must be before until"),
    ],
)
def test_a_bad_filter_is_refused_with_a_visible_message(
    viewer: Client, runs: Runs, query: str, message: str
) -> None:
    response = viewer.get(f"/runs/?{query}")
    assert response.status_code == 400
    assert refusal(response) == [message]
    assert rows(response) == []  # never silently everything


def test_every_bad_filter_is_listed_at_once(viewer: Client, runs: Runs) -> None:
    response = viewer.get("/runs/?status=bogus&since=yesterday")
    assert refusal(response) == [
        f"Unknown status 'bogus'. Use one of: {STATUS_LIST}",
        f"Invalid since 'yesterday': {AGE_HINT}",
    ]


def test_filters_narrow_the_list(viewer: Client, runs: Runs) -> None:
    assert rows(viewer.get("/runs/?status=failed")) == [str(runs.failed.pk)]
    assert rows(viewer.get("/runs/?agent=loner")) == [str(runs.failed.pk)]
    assert set(rows(viewer.get("/runs/?scope=all&kind=delegate"))) == {str(runs.gated.pk), str(runs.task.pk)}
    assert set(rows(viewer.get("/runs/?status=lost,failed"))) == {str(runs.failed.pk), str(runs.lost.pk)}


def test_the_date_range_accepts_dates_datetimes_and_ages(viewer: Client, config: None) -> None:
    old = make_run("alpha")
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    new = make_run("alpha")
    assert rows(viewer.get("/runs/?since=24h")) == [str(new.pk)]
    assert rows(viewer.get("/runs/?since=90m")) == [str(new.pk)]
    assert set(rows(viewer.get("/runs/?since=7d"))) == {str(old.pk), str(new.pk)}
    two_days_ago = (timezone.now() - timedelta(days=2)).date().isoformat()
    assert rows(viewer.get(f"/runs/?until={two_days_ago}")) == [str(old.pk)]
    assert rows(viewer.get(f"/runs/?since={two_days_ago}T00:00")) == [str(new.pk)]


def test_the_user_filter_lists_the_runs_a_user_started(viewer: Client, config: None) -> None:
    otto, _, _ = user_create_or_update(username="otto", role="operator")
    mine = make_run("alpha", created_by=otto)
    make_run("alpha")
    assert rows(viewer.get("/runs/?user=otto")) == [str(mine.pk)]


def test_sorting_by_duration_cost_and_tokens(viewer: Client, config: None) -> None:
    now = timezone.now()
    slow = make_run(
        "alpha", started_at=now - timedelta(seconds=30), finished_at=now, cost_cents=1, input_tokens=5
    )
    fast = make_run(
        "alpha", started_at=now - timedelta(seconds=1), finished_at=now, cost_cents=9, input_tokens=50
    )
    assert rows(viewer.get("/runs/?sort=-duration")) == [str(slow.pk), str(fast.pk)]
    assert rows(viewer.get("/runs/?sort=duration")) == [str(fast.pk), str(slow.pk)]
    assert rows(viewer.get("/runs/?sort=-cost")) == [str(fast.pk), str(slow.pk)]
    assert rows(viewer.get("/runs/?sort=tokens")) == [str(slow.pk), str(fast.pk)]
    assert rows(viewer.get("/runs/?sort=started")) == [str(slow.pk), str(fast.pk)]
    assert rows(viewer.get("/runs/")) == [str(fast.pk), str(slow.pk)]


def test_search_finds_prompts_outputs_and_errors(viewer: Client, config: None) -> None:
    by_prompt = make_run("alpha", prompt="summarise the quarterly zeppelin report")
    by_output = make_run("alpha", output="The Zeppelins landed at noon")
    by_error = make_run("beta", status=Run.Status.FAILED, error="provider refused: zeppelinish quota")
    make_run("alpha", prompt="nothing to see")
    assert set(rows(viewer.get("/runs/?q=zeppelin"))) == {
        str(by_prompt.pk),
        str(by_output.pk),
        str(by_error.pk),
    }
    assert rows(viewer.get("/runs/?q=quarterly+zeppelin")) == [str(by_prompt.pk)]
    assert rows(viewer.get("/runs/?q=quota&agent=alpha")) == []


def test_search_follows_changes_and_deletions(viewer: Client, config: None) -> None:
    run = make_run("alpha", output="first draft")
    assert rows(viewer.get("/runs/?q=draft")) == [str(run.pk)]
    Run.objects.filter(pk=run.pk).update(output="final version")
    assert rows(viewer.get("/runs/?q=draft")) == []
    assert rows(viewer.get("/runs/?q=final")) == [str(run.pk)]
    run.delete()
    assert rows(viewer.get("/runs/?q=final")) == []


def test_search_reaches_child_runs(viewer: Client, runs: Runs) -> None:
    Run.objects.filter(pk=runs.child.pk).update(output="an outline about walruses")
    assert rows(viewer.get("/runs/?q=walruses")) == [str(runs.child.pk)]


@pytest.mark.parametrize(
    "q", ['"', "(((", "*", "a AND OR NOT", "NEAR(", "'; DROP TABLE x;--", "\x00", "é" * 300]
)
def test_search_never_fails_on_odd_input(viewer: Client, runs: Runs, q: str) -> None:
    response = viewer.get("/runs/", {"q": q})
    assert response.status_code == 200


def test_the_selector_searches_the_same_way_as_the_page(config: None) -> None:
    run = make_run("alpha", prompt="count the Narwhals please")
    assert list(selectors.run_search(Run.objects.all(), "narwhal").values_list("pk", flat=True)) == [run.pk]
    assert list(selectors.run_search(Run.objects.all(), "whals").values_list("pk", flat=True)) == []


def test_postgresql_searches_through_its_gin_index(config: None) -> None:
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL's query plan (test_run_list_postgres.py runs this file there)")
    make_run("alpha", prompt="index me")
    sql, params = selectors.run_search(Run.objects.all(), "index").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "runs_app_run_search" in plan


@pytest.mark.parametrize("collect", [0, 5000])
def test_both_ways_of_reading_many_or_few_matches_agree(
    viewer: Client, config: None, monkeypatch: pytest.MonkeyPatch, collect: int
) -> None:
    """PostgreSQL collects up to PG_COLLECT_MATCHES matches first and filters beyond that."""
    monkeypatch.setattr(selectors, "PG_COLLECT_MATCHES", collect)
    hits = [make_run("alpha", output=f"walrus number {i}") for i in range(3)]
    make_run("alpha", output="no such animal")
    assert rows(viewer.get("/runs/?q=walrus")) == [str(r.pk) for r in reversed(hits)]
    assert rows(viewer.get("/runs/?q=walrus+number&sort=cost")) != []
