"""Conversations are threads: a continued run links to the run it continues and back, and a
conversation view lists the runs that continue one another, in order."""

from __future__ import annotations

import re
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from runs_app import selectors
from runs_app.models import Run
from tests.dashboard.support import make_run, text_of


def thread() -> list[Run]:
    start = timezone.now() - timedelta(minutes=10)
    first = make_run("alpha", prompt="plan the trip")
    second = make_run("alpha", prompt="now the budget", continued_from=first)
    third = make_run("alpha", prompt="and the packing list", continued_from=second)
    for i, run in enumerate((first, second, third)):
        Run.objects.filter(pk=run.pk).update(created_at=start + timedelta(minutes=i))
    return [first, second, third]


def test_a_continued_run_links_to_the_run_it_continues_and_back(viewer: Client, config: None) -> None:
    first, second, third = thread()
    page = text_of(viewer.get(f"/runs/{second.pk}/"))
    continues = re.search(r'<span id="continues">(.*?)</span>', page, flags=re.S)
    assert continues is not None and f'href="/runs/{first.pk}/"' in continues.group(1)
    assert "plan the trip" in continues.group(1)
    continued = re.search(r'<span id="continued-in">(.*?)</span>', page, flags=re.S)
    assert continued is not None and f'href="/runs/{third.pk}/"' in continued.group(1)
    assert f'href="/runs/{second.pk}/conversation/"' in page


def test_a_run_never_continued_shows_no_thread_links(viewer: Client, config: None) -> None:
    alone = make_run("alpha")
    assert 'id="thread-links"' not in text_of(viewer.get(f"/runs/{alone.pk}/"))


def test_the_conversation_view_lists_the_chain_in_order_from_any_of_its_runs(
    viewer: Client, config: None
) -> None:
    runs = thread()
    for run in runs:
        page = text_of(viewer.get(f"/runs/{run.pk}/conversation/"))
        assert re.findall(r'<li id="turn-([0-9a-f-]{36})"', page) == [str(r.pk) for r in runs]
    assert [r.prompt for r in selectors.conversation_list(runs[2])] == [
        "plan the trip",
        "now the budget",
        "and the packing list",
    ]


def test_an_unknown_conversation_is_a_404(viewer: Client, config: None) -> None:
    assert viewer.get("/runs/00000000-0000-0000-0000-000000000000/conversation/").status_code == 404
