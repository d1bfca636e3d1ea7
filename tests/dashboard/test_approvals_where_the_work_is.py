"""Approvals where the work is: the Controls panel of a run lists the approvals pending
anywhere in its tree, decidable there; decided rows keep the prompt, the run link and the
chain; the steer notice lasts only while the message waits."""

from __future__ import annotations

import re

from django.test import Client

from agents_app.users import user_create_or_update
from runs_app.models import Approval, Run, Steer
from tests.dashboard.support import Runs, make_pending_approval, make_run, text_of


def controls(response: object) -> str:
    found = re.search(r'<section class="card" id="run-controls".*?</section>', text_of(response), flags=re.S)
    assert found is not None
    return found.group(0)


def test_the_root_controls_list_an_approval_pending_deep_in_the_tree(operator: Client, runs: Runs) -> None:
    panel = controls(operator.get(f"/runs/{runs.root.pk}/"))
    assert f'id="controls-approval-{runs.approval.pk}"' in panel
    assert f'<a href="/runs/{runs.gated.pk}/">gamma</a>' in panel
    assert f'id="controls-approve-{runs.approval.pk}"' in panel


def test_an_approval_decided_from_the_controls_panel_returns_to_the_run(operator: Client, runs: Runs) -> None:
    response = operator.post(
        f"/approvals/{runs.approval.pk}/deny/", {"reason": "not here", "next": f"/runs/{runs.root.pk}/"}
    )
    assert response.status_code == 302 and response["Location"] == f"/runs/{runs.root.pk}/"
    assert Approval.objects.get(pk=runs.approval.pk).status == "denied"
    assert "controls-approval-" not in controls(operator.get(f"/runs/{runs.root.pk}/"))


def test_a_viewer_sees_the_pending_approval_but_no_button(viewer: Client, runs: Runs) -> None:
    panel = controls(viewer.get(f"/runs/{runs.root.pk}/"))
    assert f'id="controls-approval-{runs.approval.pk}"' in panel
    assert "controls-approve-" not in panel


def test_another_trees_approvals_stay_out_of_the_panel(operator: Client, runs: Runs) -> None:
    other = make_pending_approval(make_run("gamma", Run.Status.AWAITING_APPROVAL))
    panel = controls(operator.get(f"/runs/{runs.root.pk}/"))
    assert f"controls-approval-{other.pk}" not in panel


def test_a_decided_row_keeps_prompt_run_link_and_chain(operator: Client, runs: Runs) -> None:
    operator.post(f"/approvals/{runs.approval.pk}/deny/", {"reason": "no"})
    page = text_of(operator.get("/approvals/"))
    row = re.search(rf'<tr id="decided-{runs.approval.pk}">.*?</tr>', page, flags=re.S)
    assert row is not None
    text = row.group(0)
    assert "prompt for gamma" in text
    assert f'<a href="/runs/{runs.gated.pk}/">' in text
    assert f'<a href="/runs/{runs.root.pk}/">alpha</a>' in text and "gamma</a>" in text
    assert "denied" in text and "otto" in text


def test_the_steer_notice_is_kept_only_while_the_steer_waits(config: None) -> None:
    admin, _, _ = user_create_or_update(username="ada", role="admin")
    run = make_run("alpha", Run.Status.RUNNING, finished_at=None, created_by=admin)
    client = Client()
    client.force_login(admin)  # type: ignore[arg-type]
    answer = client.post(f"/runs/{run.pk}/steer/", {"message": "shorter please"}, HTTP_HX_REQUEST="true")
    assert "Message queued for the next model turn." in text_of(answer)
    assert 'data-steer-pending="1"' in controls(client.get(f"/runs/{run.pk}/controls/"))
    Steer.objects.filter(run=run).update(delivered=True)
    assert 'data-steer-pending=""' in controls(client.get(f"/runs/{run.pk}/controls/"))
