"""The approvals inbox tells two look-alike approvals apart (prompt, run id, start time, the
delegation chain with each hop's mode, pretty arguments) and decides several at once with one
reason (issue 17 item 4)."""

from __future__ import annotations

import html
import re

from django.test import Client

from runs_app.models import Approval, Run
from tests.agents_app.support import api_client
from tests.dashboard.support import Runs, make_pending_approval, make_run, state


def row(body: str, approval: Approval) -> str:
    found = re.search(rf'<tr id="approval-{approval.pk}".*?</tr>', body, re.S)
    assert found, body
    return html.unescape(found.group(0))


def flash(response: object) -> list[str]:
    body = response.content.decode()  # type: ignore[attr-defined]
    return [html.unescape(m) for m in re.findall(r'<li class="flash-[a-z]+">(.*?)</li>', body, re.S)]


def test_a_pending_approval_shows_its_runs_prompt_id_start_and_chain_with_modes(
    viewer: Client, runs: Runs
) -> None:
    Run.objects.filter(pk=runs.gated.pk).update(prompt="rotate the logs of host 7")
    body = viewer.get("/approvals/").content.decode()
    shown = row(body, runs.approval)
    assert "rotate the logs of host 7" in shown
    assert str(runs.gated.pk) in shown
    assert runs.gated.created_at.strftime("%Y-%m-%d %H:%M:%S") in shown
    chain = re.search(r'<td class="chain">(.*?)</td>', shown, re.S)
    assert chain is not None
    hops = re.sub(r"<[^>]+>", "", chain.group(1)).split()
    assert " ".join(hops) == "alpha (top_level) → gamma (delegate · independent)"
    assert '{\n  "command": "echo hi"\n}' in shown  # indented JSON, not one line


def test_two_approvals_of_one_agent_with_the_same_call_look_different(viewer: Client, runs: Runs) -> None:
    first = make_run("gamma", Run.Status.AWAITING_APPROVAL, prompt="clean /srv/a")
    second = make_run("gamma", Run.Status.AWAITING_APPROVAL, prompt="clean /srv/b")
    a, b = make_pending_approval(first), make_pending_approval(second)
    body = viewer.get("/approvals/").content.decode()
    assert "clean /srv/a" in row(body, a) and "clean /srv/a" not in row(body, b)
    assert str(second.pk) in row(body, b) and str(second.pk) not in row(body, a)


def test_the_rest_list_carries_the_same_context(runs: Runs) -> None:
    [pending] = api_client("viewer", "reader").get("/api/v1/approvals/?status=pending").json()
    assert pending["prompt"] == runs.gated.prompt
    assert pending["run_created_at"] == runs.gated.created_at.isoformat()
    assert [(h["agent"], h["kind"], h["mode"]) for h in pending["chain"]] == [
        ("alpha", "top_level", ""),
        ("gamma", "delegate", "independent"),
    ]


def test_an_operator_approves_several_at_once_with_one_reason(operator: Client, runs: Runs) -> None:
    other = make_pending_approval(make_run("gamma", Run.Status.AWAITING_APPROVAL))
    left = make_pending_approval(make_run("gamma", Run.Status.AWAITING_APPROVAL))
    response = operator.post(
        "/approvals/bulk/",
        {"ids": [runs.approval.pk, other.pk], "decision": "approve", "reason": "maintenance window"},
        follow=True,
    )
    gated, asked = str(runs.gated.pk)[:8], str(other.run_id)[:8]
    assert flash(response) == [
        f"Approved 2 approvals: shell of gamma in run {gated} (“prompt for gamma”), "
        f"shell of gamma in run {asked} (“prompt for gamma”)."
    ]
    decided = {a.pk: (a.status, a.reason) for a in Approval.objects.all()}
    assert decided[runs.approval.pk] == ("approved", "maintenance window")
    assert decided[other.pk] == ("approved", "maintenance window")
    assert decided[left.pk] == ("pending", "")


def test_an_operator_denies_several_at_once(operator: Client, runs: Runs) -> None:
    other = make_pending_approval(make_run("gamma", Run.Status.AWAITING_APPROVAL))
    operator.post(
        "/approvals/bulk/", {"ids": [runs.approval.pk, other.pk], "decision": "deny", "reason": "not now"}
    )
    assert set(Approval.objects.values_list("status", "reason")) == {("denied", "not now")}


def test_a_bulk_decision_reports_what_it_could_not_decide(operator: Client, runs: Runs) -> None:
    finished = make_run("gamma", Run.Status.COMPLETED)
    late = make_pending_approval(finished)
    response = operator.post(
        "/approvals/bulk/", {"ids": [runs.approval.pk, late.pk], "decision": "approve"}, follow=True
    )
    assert flash(response) == [
        f"Approved 1 approval: shell of gamma in run {str(runs.gated.pk)[:8]} (“prompt for gamma”).",
        f"shell of gamma in run {str(finished.pk)[:8]} (“prompt for gamma”): "
        "Run is already completed; its approvals can no longer be decided",
    ]


def test_a_bulk_decision_without_a_selection_or_with_bad_values_changes_nothing(
    operator: Client, runs: Runs
) -> None:
    before = state()
    for data, message in [
        ({"decision": "approve"}, "Select at least one approval."),
        ({"ids": [runs.approval.pk], "decision": "maybe"}, "decision must be approve or deny"),
        ({"ids": [runs.approval.pk, "x"], "decision": "approve"}, "No approval 'x'."),
        ({"ids": [runs.approval.pk, 99999], "decision": "approve"}, "No approval '99999'."),
    ]:
        response = operator.post("/approvals/bulk/", data)
        assert response.status_code == 400, data
        assert message in html.unescape(response.content.decode()), data
    assert state() == before


def test_viewers_cannot_decide_in_bulk(viewer: Client, runs: Runs) -> None:
    before = state()
    assert (
        viewer.post("/approvals/bulk/", {"ids": [runs.approval.pk], "decision": "approve"}).status_code == 403
    )
    assert 'id="bulk-approvals"' not in viewer.get("/approvals/").content.decode()
    assert state() == before
