"""Cancel-tree, delete and restore take a confirmation step that holds without JavaScript: a
POST without `confirm=yes` changes nothing and shows what would happen (issue 17 item 4)."""

from __future__ import annotations

import html
import re

from django.test import Client

from agents_app.config_io import export_toml
from agents_app.models import ConfigRevision
from agents_app.selectors import config_snapshot_get
from runs_app.models import Run
from tests.dashboard.support import Runs, state, text_of


def latest() -> ConfigRevision:
    revision = ConfigRevision.objects.order_by("-pk").first()
    assert revision is not None
    return revision


# -- cancel tree ------------------------------------------------------------------------------------


def test_cancelling_a_tree_without_confirmation_shows_what_would_be_cancelled(
    admin: Client, runs: Runs
) -> None:
    before = state()
    response = admin.post(f"/runs/{runs.root.pk}/cancel/")
    assert response.status_code == 200
    body = text_of(response)
    assert "Cancel this run and its subtree?" in body
    listed = re.findall(r'<li class="to-cancel" data-run="([0-9a-f-]+)"', body)
    assert set(listed) == {str(runs.root.pk), str(runs.gated.pk), str(runs.task.pk)}  # active ones only
    assert 'name="confirm" value="yes"' in body
    assert state() == before
    assert admin.get(f"/runs/{runs.root.pk}/cancel/").status_code == 200


def test_a_confirmed_cancel_cancels_the_tree(admin: Client, runs: Runs) -> None:
    response = admin.post(f"/runs/{runs.root.pk}/cancel/", {"confirm": "yes"})
    assert response.status_code == 302
    assert Run.objects.get(pk=runs.root.pk).status == Run.Status.CANCELLED


def test_an_htmx_cancel_without_confirmation_is_sent_to_the_confirmation_page(
    admin: Client, runs: Runs
) -> None:
    before = state()
    response = admin.post(f"/runs/{runs.task.pk}/cancel/", {"next": "/tasks/"}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert response["HX-Redirect"] == f"/runs/{runs.task.pk}/cancel/?next=/tasks/"
    assert state() == before
    page = text_of(admin.get(response["HX-Redirect"]))
    assert '<input type="hidden" name="next" value="/tasks/">' in page


def test_the_confirmation_page_of_a_finished_run_says_there_is_nothing_to_cancel(
    admin: Client, runs: Runs
) -> None:
    body = text_of(admin.get(f"/runs/{runs.lost.pk}/cancel/"))
    assert "Nothing to cancel: this run and its subtree have finished." in body
    assert 'name="confirm"' not in body


# -- delete -----------------------------------------------------------------------------------------


def test_deleting_an_entry_needs_the_confirmation_of_its_dry_run_page(admin: Client) -> None:
    before = state()
    page = admin.get("/agents/beta/delete/").content.decode()
    assert re.search(r'<form method="post"[^>]*>.*?name="confirm" value="yes"', page, re.S)
    response = admin.post("/agents/beta/delete/")
    assert response.status_code == 400
    assert "Confirm the deletion on this page." in text_of(response)
    assert state() == before
    assert admin.post("/agents/beta/delete/", {"confirm": "yes"}).status_code == 302
    assert "beta" not in config_snapshot_get().agents


# -- restore ----------------------------------------------------------------------------------------


def test_a_revision_page_shows_what_restoring_it_would_change(admin: Client) -> None:
    first = latest()  # alpha, beta, gamma, loner, verifier, sleeper; two providers...
    assert admin.post("/agents/loner/delete/", {"confirm": "yes"}).status_code == 302
    admin.post(
        "/providers/new/",
        {
            "type": "scripted",
            "alias": "extra",
            "timeout_secs": 60,
            "input_per_mtok_cents": 0,
            "output_per_mtok_cents": 0,
        },
    )
    body = text_of(admin.get(f"/config/revisions/{first.pk}/"))
    section = re.search(r'<section class="card" id="restore-plan">(.*?)</section>', body, re.S)
    assert section, body
    plan = section.group(1)
    assert re.findall(r'<li class="agent-add">(.*?)</li>', plan) == ["loner"]
    assert re.findall(r'<li class="entry-remove">(.*?)</li>', plan) == ["providers.models.scripted.extra"]
    assert '<span class="diff-add">+[agents.loner]</span>' in plan
    assert '<span class="diff-del">-[providers.models.scripted.extra]</span>' in plan
    assert 'id="restore"' in plan


def test_restoring_needs_a_confirmation(admin: Client) -> None:
    first = latest()
    original = export_toml(config_snapshot_get())
    admin.post("/agents/loner/delete/", {"confirm": "yes"})
    before = state()
    refused = admin.post(f"/config/revisions/{first.pk}/restore/")
    assert refused.status_code == 400
    assert "Tick the confirmation to restore this revision." in html.unescape(refused.content.decode())
    assert state() == before
    assert admin.post(f"/config/revisions/{first.pk}/restore/", {"confirm": "yes"}).status_code == 302
    assert export_toml(config_snapshot_get()) == original


def test_the_newest_revision_offers_no_restore(admin: Client) -> None:
    admin.post("/agents/loner/delete/", {"confirm": "yes"})
    newest = latest()
    body = text_of(admin.get(f"/config/revisions/{newest.pk}/"))
    assert 'id="restore"' not in body
    assert "This is the current configuration." in body
    listing = admin.get("/config/").content.decode()
    assert f'href="/config/revisions/{newest.pk}/#restore-plan"' not in listing
    before = state()
    refused = admin.post(f"/config/revisions/{newest.pk}/restore/", {"confirm": "yes"})
    assert refused.status_code == 400
    assert state() == before
