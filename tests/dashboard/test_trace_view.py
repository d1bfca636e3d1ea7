"""The run page as a trace (issue 17 item 1): durations in ms, bars placed on a waterfall and
never longer than their parent's, the detail panel with every model call, pretty JSON tool
calls whose run ids link to their node, events as JSON, and the effective permissions; the
Controls panel that follows the run's status."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs_app.models import Message, Run, RunEvent, ToolCall
from runs_app.trace import duration_text
from tests.dashboard.support import Runs, bulk_tree, client_as, make_run, text_of


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0 ms"),
        (87, "87 ms"),
        (87.9, "87 ms"),
        (999.99, "999 ms"),
        (1000, "1.00 s"),
        (1239, "1.23 s"),
        (1999.9, "1.99 s"),
        (11_800, "11.80 s"),
        (12_000, "12.00 s"),
        (3_600_000, "1h 00m"),  # the dashboard's one format (the duration filter)
        (None, "…"),
        (-5, "0 ms"),
    ],
)
def test_durations_are_milliseconds_under_a_second_and_floored_seconds_above(
    ms: float | None, text: str
) -> None:
    assert duration_text(ms) == text


def duration_of(body: str, run_id: object) -> str:
    found = re.search(rf'<span class="meta duration[^"]*" id="run-{run_id}-duration">([^<]*)</span>', body)
    assert found, f"no duration for {run_id}"
    return found.group(1)


def bar_of(body: str, run_id: object) -> tuple[int, int]:
    head = re.search(
        rf'id="run-{run_id}-head".*?<span class="lane"><i class="bar[^"]*" style="--s:(\d+);--e:(\d+)"', body
    )
    assert head, f"no bar for {run_id}"
    return int(head.group(1)), int(head.group(2))


def test_a_child_that_ended_after_its_parent_is_drawn_inside_it(viewer: Client) -> None:
    start = timezone.now() - timedelta(minutes=1)
    parent = make_run("alpha", started_at=start, finished_at=start + timedelta(seconds=11.8))
    child = make_run(
        "alpha",
        Run.Status.CANCELLED,
        parent=parent,
        kind=Run.Kind.SUBAGENT,
        started_at=start + timedelta(milliseconds=40),
        finished_at=start + timedelta(seconds=12.0),
    )
    quick = make_run(
        "alpha",
        parent=parent,
        kind=Run.Kind.SUBAGENT,
        started_at=start + timedelta(seconds=1),
        finished_at=start + timedelta(seconds=1, milliseconds=87),
    )
    body = viewer.get(f"/runs/{parent.pk}/").content.decode()
    assert duration_of(body, parent.pk) == "11.80 s"
    assert duration_of(body, child.pk) == "11.76 s"  # not 12.0 s under a parent of 11.8 s
    assert duration_of(body, quick.pk) == "87 ms"
    assert bar_of(body, parent.pk) == (0, 11800)
    assert bar_of(body, child.pk) == (40, 11800)
    assert bar_of(body, quick.pk) == (1000, 1087)
    # the two children overlap in time: marked as side by side
    assert body.count('<span class="parallel-mark" title="ran side by side with a sibling">') == 2


def test_model_and_tool_calls_are_bars_in_their_run_row_from_the_events(viewer: Client) -> None:
    start = timezone.now() - timedelta(minutes=1)
    run = make_run("alpha", started_at=start, finished_at=start + timedelta(seconds=2))
    record_turn(run, start + timedelta(milliseconds=100), answered_ms=87, model="demo-1")
    tool_events(run, "call_1_0", "shell", start + timedelta(milliseconds=200), took_ms=300, success=False)
    body = viewer.get(f"/runs/{run.pk}/").content.decode()
    assert '<i class="span span-model" style="--s:100;--e:187" title="model demo-1 · 87 ms"></i>' in body
    assert '<i class="span span-tool failed" style="--s:200;--e:500" title="tool shell · 300 ms"></i>' in body


def record_turn(run: Run, requested: datetime, *, answered_ms: int, model: str, turn: int = 0) -> None:
    at = requested + timedelta(milliseconds=answered_ms)
    RunEvent.objects.create(
        run=run,
        root_id=run.root_id or run.pk,
        type="model.request",
        at=at,
        data={"turn": turn, "provider": "scripted.demo", "requested_at": requested.isoformat()},
    )
    RunEvent.objects.create(
        run=run,
        root_id=run.root_id or run.pk,
        type="model.response",
        at=at,
        data={
            "turn": turn,
            "text": "x",
            "tool_calls": [],
            "usage": {"input": 1234, "output": 56},
            "cost_cents": 0.5,
            "provider": "scripted.demo",
            "model": model,
        },
    )


def tool_events(run: Run, call_id: str, name: str, at: datetime, *, took_ms: int, success: bool) -> None:
    RunEvent.objects.create(
        run=run,
        root_id=run.root_id or run.pk,
        type="tool.call",
        at=at,
        data={"call_id": call_id, "name": name, "arguments": {}},
    )
    RunEvent.objects.create(
        run=run,
        root_id=run.root_id or run.pk,
        type="tool.result",
        at=at + timedelta(milliseconds=took_ms),
        data={"call_id": call_id, "name": name, "success": success, "output": "", "error": "no"},
    )


def test_the_detail_panel_lists_every_model_call_with_latency_tokens_and_cost(viewer: Client) -> None:
    start = timezone.now() - timedelta(minutes=1)
    run = make_run("alpha", started_at=start, finished_at=start + timedelta(seconds=3))
    record_turn(run, start + timedelta(milliseconds=10), answered_ms=87, model="demo-1", turn=0)
    record_turn(run, start + timedelta(milliseconds=500), answered_ms=1500, model="demo-2", turn=1)
    body = text_of(viewer.get(f"/runs/{run.pk}/detail/"))
    rows = re.findall(r'<tr class="model-call">(.*?)</tr>', body, flags=re.S)
    cells = [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in rows]
    assert cells == [
        ["0", "demo-1", "87 ms", "1,234", "56", "$0.0050", "0"],
        ["1", "demo-2", "1.50 s", "1,234", "56", "$0.0050", "0"],
    ]


def test_events_are_shown_whole_as_json_not_as_python_repr(viewer: Client) -> None:
    run = make_run("alpha")
    long_text = "word " * 100
    event = RunEvent.objects.create(
        run=run,
        root_id=run.root_id or run.pk,
        type="run.steered",
        at=timezone.now(),
        data={"message": long_text, "ok": True},
    )
    body = text_of(viewer.get(f"/runs/{run.pk}/detail/"))
    shown = re.search(
        r'<pre class="json-text">(\{\n  "id": ' + str(event.id) + r".*?)</pre>", body, flags=re.S
    )
    assert shown, body
    assert json.loads(shown.group(1))["data"] == {"message": long_text, "ok": True}
    assert "'ok': True" not in body


def test_tool_calls_are_pretty_json_with_copy_buttons_and_run_ids_link_to_their_node(viewer: Client) -> None:
    root = make_run("alpha")
    child = make_run("alpha", parent=root, kind=Run.Kind.SUBAGENT)
    stranger = make_run("beta")  # another tree: its id is not linked
    call = ToolCall.objects.create(
        run=root,
        turn=0,
        position=0,
        call_id="call_0_0",
        name="spawn_subagent",
        arguments={"prompt": "part: one", "background": True},
        status="done",
        result={
            "success": True,
            "output": f"task_id: {child.pk} (see also {stranger.pk})",
            "run_id": str(child.pk),
        },
    )
    Run.objects.filter(pk=child.pk).update(parent_call=call)
    body = viewer.get(f"/runs/{root.pk}/detail/").content.decode()
    block = body[body.index(f'id="tool-call-{call.pk}"') :]
    assert (
        '<pre class="json-text">{\n  &quot;prompt&quot;: &quot;part: one&quot;,\n  &quot;background&quot;: true\n}</pre>'
        in block
    )
    assert block.count("data-copy") >= 2
    link = f'<a href="/runs/{child.pk}/" class="run-link" data-run-link="{child.pk}">{child.pk}</a>'
    assert block.count(link) == 2  # in the output text and as run_id
    assert f'data-run-link="{stranger.pk}"' not in block
    assert str(stranger.pk) in block
    # and in the transcript's tool message
    Message.objects.create(
        run=root, seq=0, role="tool", content=f"started {child.pk}", tool_call_id="call_0_0"
    )
    again = viewer.get(f"/runs/{root.pk}/detail/").content.decode()
    assert f'<pre class="detail-text">started {link}</pre>' in again


def test_the_detail_panel_shows_the_effective_permissions(viewer: Client, runs: Runs) -> None:
    Run.objects.filter(pk=runs.gated.pk).update(tracker_key="gamma")
    body = text_of(viewer.get(f"/runs/{runs.gated.pk}/detail/"))
    perms = body[body.index('id="detail-permissions"') :]
    assert "independent · sync — an independent delegate: its own agent's risk profile and budget" in perms
    assert "asker · level supervised" in perms
    assert "<code>shell</code>" in perms[perms.index("Always ask") :]
    assert re.search(r"actions this hour: \d+ of 20 \(tracker ", perms)
    assert re.search(r'id="perm-sandbox">(on \(bubblewrap\)|unavailable: shell refuses to run)', perms)
    child = text_of(viewer.get(f"/runs/{runs.child.pk}/detail/"))
    assert "subagent · sync — spawned by its parent (spawn_subagent)" in child


def test_the_detail_opens_in_the_side_panel_not_inline(viewer: Client, runs: Runs) -> None:
    body = viewer.get(f"/runs/{runs.root.pk}/").content.decode()
    assert f'hx-get="/runs/{runs.child.pk}/detail/" hx-target="#trace-detail"' in body
    assert 'id="trace-detail"' in body
    assert "node-detail-wrap" not in body


def test_a_big_tree_with_events_still_renders_in_a_fixed_number_of_queries(viewer: Client) -> None:
    small, big = bulk_tree(10), bulk_tree(2000)
    for root in (small, big):
        for run in Run.objects.filter(root_id=root.pk)[:200]:
            record_turn(run, timezone.now(), answered_ms=5, model="m")
    counts = []
    for root in (small, big):
        viewer.get(f"/runs/{root.pk}/")
        with CaptureQueriesContext(connection) as ctx:
            assert viewer.get(f"/runs/{root.pk}/").status_code == 200
        counts.append(len(ctx.captured_queries))
    assert counts[0] == counts[1]


def controls(client: Client, run: Run) -> str:
    return client.get(f"/runs/{run.pk}/controls/").content.decode()


def test_the_controls_follow_the_run_status(admin: Client, runs: Runs) -> None:
    operator = admin  # may control every run
    going = controls(operator, runs.root)
    assert 'id="cancel-tree"' in going and 'id="steer-message"' in going and 'id="continue"' not in going
    Run.objects.filter(pk=runs.root.pk).update(status=Run.Status.COMPLETED, finished_at=timezone.now())
    done = controls(operator, runs.root)
    assert 'id="cancel-tree"' not in done and 'id="steer-message"' not in done and 'id="continue"' in done
    assert 'id="resume"' in controls(operator, runs.lost)
    assert "Read-only" in controls(client_as("viewer", "vic2"), runs.root)


def test_a_refused_steer_keeps_the_typed_text(admin: Client, runs: Runs) -> None:
    operator = admin
    Run.objects.filter(pk=runs.root.pk).update(status=Run.Status.COMPLETED, finished_at=timezone.now())
    answer = operator.post(
        f"/runs/{runs.root.pk}/steer/", {"message": "please <b>hurry</b>"}, headers={"HX-Request": "true"}
    )
    assert answer.status_code == 200
    body = text_of(answer)
    assert '<p class="error" id="steer-error">Run is already completed</p>' in body
    assert (
        '<textarea name="message" rows="3" maxlength="4000" id="steer-message">please <b>hurry</b></textarea>'
        in body
    )
    assert 'id="continue"' in body


def test_an_accepted_steer_answers_the_panel_with_a_notice(admin: Client, runs: Runs) -> None:
    operator = admin
    answer = operator.post(
        f"/runs/{runs.root.pk}/steer/", {"message": "faster"}, headers={"HX-Request": "true"}
    )
    body = text_of(answer)
    assert '<p class="muted" id="steer-notice">Message queued for the next model turn.</p>' in body
    assert '<textarea name="message" rows="3" maxlength="4000" id="steer-message"></textarea>' in body
