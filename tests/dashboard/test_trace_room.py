"""A trace view with room to read: a resizable split, bars with tooltips, and for each model
call what it was sent and what it answered, folded by default, secrets never shown."""

from __future__ import annotations

import re
from datetime import timedelta

from django.test import Client
from django.utils import timezone

from runs_app.models import Message, Run, RunEvent
from tests.dashboard.support import SECRET_VALUE, make_run, text_of


def run_with_two_turns() -> Run:
    run = make_run("alpha", Run.Status.COMPLETED, system_prompt="You are alpha.", output="it is 4")
    at = timezone.now() - timedelta(seconds=3)
    Message.objects.create(run=run, seq=1, role="user", content=f"what is 2+2? my key is {SECRET_VALUE}")
    Message.objects.create(
        run=run,
        seq=2,
        role="assistant",
        content="",
        tool_calls=[{"id": "c1", "name": "calc", "arguments": {"x": "2+2"}}],
    )
    Message.objects.create(run=run, seq=3, role="tool", content="4", tool_call_id="c1")
    Message.objects.create(run=run, seq=4, role="assistant", content="it is 4")
    for turn, tokens in ((1, 30), (2, 40)):
        RunEvent.objects.create(
            run=run,
            root_id=run.pk,
            type="model.request",
            at=at,
            data={"turn": turn, "requested_at": at.isoformat()},
        )
        RunEvent.objects.create(
            run=run,
            root_id=run.pk,
            type="model.response",
            at=at + timedelta(milliseconds=250),
            data={
                "turn": turn,
                "usage": {"input": tokens, "output": 5},
                "model": "demo-1",
                "provider": "scripted.demo",
            },
        )
    return run


def test_each_model_call_shows_what_it_was_sent_and_answered_folded(viewer: Client, config: None) -> None:
    run = run_with_two_turns()
    body = text_of(viewer.get(f"/runs/{run.pk}/detail/"))
    blocks = re.findall(
        r'<details class="model-exchange" id="model-call-(\d)">(.*?)</details>', body, flags=re.S
    )
    assert [n for n, _ in blocks] == ["1", "2"]  # no `open`: folded by default
    first, second = blocks[0][1], blocks[1][1]
    assert "Sent (2 messages)" in first and "You are alpha." in first and "what is 2+2?" in first
    assert '"name": "calc"' in first
    assert "Sent (4 messages)" in second
    assert re.search(r'<pre class="detail-text exchange-answer">it is 4</pre>', second)
    assert "250 ms" in second and "40 in / 5 out" in second


def test_a_secret_never_shows_in_a_model_exchange(viewer: Client, config: None) -> None:
    run = run_with_two_turns()
    body = text_of(viewer.get(f"/runs/{run.pk}/detail/"))
    exchanges = "".join(re.findall(r'<details class="model-exchange".*?</details>', body, flags=re.S))
    assert SECRET_VALUE not in exchanges
    assert "my key is [secret]" in exchanges


def test_the_run_page_has_a_resizable_split_and_bar_tooltips(viewer: Client, config: None) -> None:
    run = make_run("alpha", Run.Status.COMPLETED)
    page = text_of(viewer.get(f"/runs/{run.pk}/"))
    assert re.search(r'<button type="button" class="split-handle" id="trace-split" role="separator"', page)
    assert re.search(r'<i class="bar status-completed" style="[^"]*" title="alpha · completed · \d', page)
