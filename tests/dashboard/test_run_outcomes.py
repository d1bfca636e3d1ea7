"""Statuses that say what happened: a run that ran into a denial, a refusal or a tool error is
marked in the lists (a badge and a filter) while its status stays the contract's; ending a run
closes its open tool calls and approvals, and no waterfall bar outlives its run."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from agents_app.users import user_create_or_update
from runs_app import selectors, trace
from runs_app.engine.cancel import end_with_descendants
from runs_app.models import Approval, Run, ToolCall
from runs_app.services import run_cancel
from tests.dashboard.support import make_pending_approval, make_run, text_of


def rows(response: Any) -> list[str]:
    return re.findall(r'<tr id="row-([0-9a-f-]{36})"', response.content.decode())


def row_badges(response: Any, run: Run) -> list[str]:
    body = response.content.decode()
    row = re.search(rf'<tr id="row-{run.pk}">(.*?)</tr>', body, flags=re.S)
    assert row is not None
    return re.findall(r'<span class="badge outcome">([^<]*)</span>', row.group(1))


def failed_call(run: Run, name: str, *, error: str = "boom", position: int = 0) -> ToolCall:
    return ToolCall.objects.create(
        run=run,
        turn=1,
        position=position,
        call_id=f"call_1_{position}",
        name=name,
        status=ToolCall.Status.DONE,
        result={"success": False, "output": "", "error": error},
    )


def denied_run() -> Run:
    run = make_run("gamma", Run.Status.COMPLETED, output="I could not run it.")
    call = failed_call(run, "shell", error="Tool call denied by operator: not today")
    Approval.objects.create(tool_call=call, run=run, status=Approval.Status.DENIED, reason="not today")
    return run


def refused_run() -> Run:
    run = make_run("loner", Run.Status.COMPLETED, output="nobody to ask")
    failed_call(run, "delegate", error="Delegation is not allowed by the risk profile")
    return run


def tool_error_run() -> Run:
    run = make_run("alpha", Run.Status.COMPLETED, output="the file was missing")
    failed_call(run, "file_read", error="No such file: notes.txt")
    return run


@pytest.fixture
def marked(config: None) -> dict[str, Run]:
    return {
        "denied": denied_run(),
        "refused": refused_run(),
        "tool_error": tool_error_run(),
        "clean": make_run("beta", Run.Status.COMPLETED),
    }


def test_a_run_that_ran_into_trouble_keeps_its_status_and_wears_a_badge(
    viewer: Client, marked: dict[str, Run]
) -> None:
    response = viewer.get("/runs/")
    assert response.status_code == 200
    assert row_badges(response, marked["denied"]) == ["denied"]
    assert row_badges(response, marked["refused"]) == ["refused"]
    assert row_badges(response, marked["tool_error"]) == ["tool error"]
    assert row_badges(response, marked["clean"]) == []
    for run in marked.values():
        assert Run.objects.get(pk=run.pk).status == "completed"


def test_a_spawn_whose_child_failed_is_not_a_refusal(config: None) -> None:
    parent = make_run("alpha", Run.Status.COMPLETED)
    call = failed_call(parent, "spawn_subagent", error="Subagent failed: boom")
    make_run("alpha", Run.Status.FAILED, parent=parent, parent_call=call, kind=Run.Kind.SUBAGENT)
    assert selectors.run_outcomes([parent.pk]) == {}


@pytest.mark.parametrize("outcome", ["denied", "refused", "tool_error"])
def test_the_outcome_filter_lists_only_the_runs_with_that_mark(
    viewer: Client, marked: dict[str, Run], outcome: str
) -> None:
    response = viewer.get(f"/runs/?outcome={outcome}")
    assert response.status_code == 200
    assert rows(response) == [str(marked[outcome].pk)]


def test_an_unknown_outcome_is_refused_with_the_values_it_takes(
    viewer: Client, marked: dict[str, Run]
) -> None:
    response = viewer.get("/runs/?outcome=oops")
    assert response.status_code == 400
    assert "Unknown outcome 'oops'. Use one of: denied, refused, tool_error" in text_of(response)
    assert rows(response) == []


def test_the_run_tree_marks_its_nodes_too(viewer: Client, config: None) -> None:
    root = make_run("alpha", Run.Status.COMPLETED)
    child = make_run("gamma", Run.Status.COMPLETED, parent=root, kind=Run.Kind.DELEGATE, mode="independent")
    call = failed_call(child, "shell", error="Tool call denied by operator: no")
    Approval.objects.create(tool_call=call, run=child, status=Approval.Status.DENIED, reason="no")
    body = viewer.get(f"/runs/{root.pk}/").content.decode()
    head = re.search(rf'<div class="node-head" id="run-{child.pk}-head".*?</div>', body, flags=re.S)
    assert head is not None
    assert '<span class="badge outcome" data-outcome="denied">denied</span>' in head.group(0)
    root_head = re.search(
        rf'<div class="node-head" id="run-{root.pk}-head".*?<span class="lane">', body, flags=re.S
    )
    assert root_head is not None and "badge outcome" not in root_head.group(0)


def test_the_kind_and_status_filters_offer_only_real_values(viewer: Client, marked: dict[str, Run]) -> None:
    body = viewer.get("/runs/?kind=weird").content.decode()
    kind = re.search(r'<select name="kind".*?</select>', body, flags=re.S)
    assert kind is not None and "weird" not in kind.group(0)
    status = re.search(
        r'<select name="status".*?</select>', viewer.get("/runs/?status=bogus").content.decode(), flags=re.S
    )
    assert status is not None and "bogus" not in status.group(0)
    assert "<option selected>failed</option>" in viewer.get("/runs/?status=failed").content.decode()


# -- ending a run closes what it waited for ---------------------------------------------------


def test_cancelling_a_run_awaiting_an_approval_closes_its_call_and_its_approval(config: None) -> None:
    admin, _, _ = user_create_or_update(username="ada", role="admin")
    run = make_run("gamma", Run.Status.AWAITING_APPROVAL, finished_at=None)
    approval = make_pending_approval(run)
    assert run_cancel(run=run, user=admin) == 1
    run.refresh_from_db()
    call = ToolCall.objects.get(pk=approval.tool_call_id)
    assert call.status == "cancelled"
    assert call.finished_at == run.finished_at
    approval.refresh_from_db()
    assert approval.status == "cancelled"


def test_a_timed_out_parent_closes_the_call_that_waited_on_its_child(config: None) -> None:
    parent = make_run("alpha", Run.Status.WAITING, finished_at=None)
    call = ToolCall.objects.create(
        run=parent, turn=1, position=0, call_id="call_1_0", name="spawn_subagent", wait_kind="children"
    )
    child = make_run("alpha", Run.Status.RUNNING, parent=parent, parent_call=call, kind=Run.Kind.SUBAGENT)
    assert end_with_descendants(parent, status=Run.Status.TIMED_OUT, error="timed out")
    call.refresh_from_db()
    assert (call.status, call.finished_at is not None) == ("cancelled", True)
    assert Run.objects.get(pk=child.pk).status == "cancelled"


def test_the_transcript_api_gives_the_cancelled_call_and_its_finish_time(config: None) -> None:
    admin, _, _ = user_create_or_update(username="ada", role="admin")
    run = make_run("gamma", Run.Status.AWAITING_APPROVAL, finished_at=None)
    make_pending_approval(run)
    run_cancel(run=run, user=admin)
    client = Client()
    client.force_login(admin)  # type: ignore[arg-type]
    calls = client.get(f"/api/v1/runs/{run.pk}/transcript/").json()["tool_calls"]
    assert [(c["name"], c["status"]) for c in calls] == [("shell", "cancelled")]
    assert calls[0]["finished_at"] is not None


def test_no_bar_outlives_its_run() -> None:
    start = timezone.now() - timedelta(seconds=10)
    end = start + timedelta(seconds=2)
    node: dict[str, Any] = {
        "id": "r",
        "parent_id": None,
        "status": "cancelled",
        "created_at": start.isoformat(),
        "started_at": start.isoformat(),
        "finished_at": end.isoformat(),
        "children": [],
    }
    open_call = {
        "kind": "tool",
        "name": "shell",
        "start": (start + timedelta(seconds=1)).isoformat(),
        "end": None,
        "ok": True,
    }
    trace.layout(node, {"r": [open_call]}, timezone.now())
    (span,) = node["spans"]
    assert span["e_ms"] == node["e_ms"] == 2000
    assert span["closed"] is True


def test_the_rest_list_filters_on_the_outcome_too(marked: dict[str, Run]) -> None:
    admin, _, _ = user_create_or_update(username="ada", role="admin")
    client = Client()
    client.force_login(admin)  # type: ignore[arg-type]
    found = client.get("/api/v1/runs/?outcome=refused").json()
    assert [r["id"] for r in found["results"]] == [str(marked["refused"].pk)]
    refused = client.get("/api/v1/runs/?outcome=nope")
    assert refused.status_code == 400
    assert refused.json() == {
        "errors": [
            {"field": "outcome", "message": "Unknown outcome 'nope'. Use one of: denied, refused, tool_error"}
        ]
    }
