"""The schedules page (issue 17 item 6): list, create with a preview of the next five times,
enable/disable and delete (after a confirmation), for operators and admins; viewers read."""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime

import pytest
from django.test import Client

from agents_app.cron import cron_next
from runs_app.models import Schedule
from tests.agents_app.support import api_client
from tests.dashboard.support import client_as


def errors(response: object) -> list[str]:
    body = response.content.decode()  # type: ignore[attr-defined]
    return [html.unescape(li) for li in re.findall(r'<li class="field-error">(.*?)</li>', body, re.S)]


def test_cron_next_gives_the_next_five_times_in_utc() -> None:
    start = datetime(2026, 12, 2, 3, 7, tzinfo=UTC)
    assert cron_next("*/15 9-17 * * 1-5", start=start) == [
        datetime(2026, 12, 2, 9, 0, tzinfo=UTC),
        datetime(2026, 12, 2, 9, 15, tzinfo=UTC),
        datetime(2026, 12, 2, 9, 30, tzinfo=UTC),
        datetime(2026, 12, 2, 9, 45, tzinfo=UTC),
        datetime(2026, 12, 2, 10, 0, tzinfo=UTC),
    ]
    assert cron_next("0 0 1 1 *", start=start, count=2) == [
        datetime(2027, 1, 1, tzinfo=UTC),
        datetime(2028, 1, 1, tzinfo=UTC),
    ]


def test_the_preview_shows_the_next_five_times_or_the_refusal(viewer: Client) -> None:
    ok = viewer.get("/schedules/preview/", {"cron": "30 6 * * *"}).content.decode()
    assert len(re.findall(r'<li class="next-run">', ok)) == 5
    assert "06:30 UTC" in ok
    bad = html.unescape(viewer.get("/schedules/preview/", {"cron": "0 0 31 2 *"}).content.decode())
    assert 'cron expression "0 0 31 2 *" never fires: day 31 does not occur in February' in bad
    six = html.unescape(viewer.get("/schedules/preview/", {"cron": "* * * * * *"}).content.decode())
    assert 'cron expression "* * * * * *" must have five fields' in six


def test_an_operator_creates_a_schedule(operator: Client) -> None:
    response = operator.post(
        "/schedules/",
        {"name": "nightly", "agent": "alpha", "prompt": "sum up", "cron": "0 2 * * *", "enabled": "on"},
    )
    assert response.status_code == 302
    schedule = Schedule.objects.get(name="nightly")
    assert (schedule.agent, schedule.prompt, schedule.cron, schedule.enabled) == (
        "alpha",
        "sum up",
        "0 2 * * *",
        True,
    )
    assert schedule.created_by is not None and schedule.created_by.get_username() == "otto"
    page = operator.get("/schedules/").content.decode()
    assert f'id="schedule-{schedule.pk}"' in page and "02:00 UTC" in page


def test_every_error_of_a_new_schedule_is_shown_at_once_with_the_rest_messages(operator: Client) -> None:
    response = operator.post(
        "/schedules/", {"name": "", "agent": "ghost", "prompt": "  ", "cron": "61 * * * *"}
    )
    assert response.status_code == 400
    assert errors(response) == [
        "name: This field may not be blank.",
        "agent: Unknown agent 'ghost'",
        "prompt: This field may not be blank.",
        'cron: cron expression "61 * * * *" is not valid',
    ]
    assert Schedule.objects.count() == 0
    rest = api_client("operator", "rest-op").post(
        "/api/v1/schedules/",
        {"name": "", "agent": "ghost", "prompt": "  ", "cron": "61 * * * *"},
        format="json",
    )
    assert [f"{e['field']}: {e['message']}" for e in rest.json()["errors"]] == errors(response)
    # what was typed stays in the form
    assert 'value="61 * * * *"' in response.content.decode()


def test_schedules_are_disabled_enabled_and_deleted_after_a_confirmation(operator: Client) -> None:
    schedule = Schedule.objects.create(name="hourly", agent="alpha", prompt="tick", cron="0 * * * *")
    assert operator.post(f"/schedules/{schedule.pk}/enabled/", {"enabled": "off"}).status_code == 302
    schedule.refresh_from_db()
    assert schedule.enabled is False
    operator.post(f"/schedules/{schedule.pk}/enabled/", {"enabled": "on"})
    schedule.refresh_from_db()
    assert schedule.enabled is True
    confirm = operator.get(f"/schedules/{schedule.pk}/delete/")
    assert confirm.status_code == 200 and "Delete schedule hourly?" in confirm.content.decode()
    # a POST without the confirmation field deletes nothing
    assert operator.post(f"/schedules/{schedule.pk}/delete/").status_code == 400
    assert Schedule.objects.filter(pk=schedule.pk).exists()
    assert operator.post(f"/schedules/{schedule.pk}/delete/", {"confirm": "yes"}).status_code == 302
    assert not Schedule.objects.filter(pk=schedule.pk).exists()


def test_unknown_schedules_are_404(operator: Client) -> None:
    assert operator.post("/schedules/999/enabled/", {"enabled": "off"}).status_code == 404
    assert operator.get("/schedules/999/delete/").status_code == 404


def test_a_bad_enabled_value_is_refused(operator: Client) -> None:
    schedule = Schedule.objects.create(name="x", agent="alpha", prompt="tick", cron="0 * * * *")
    assert operator.post(f"/schedules/{schedule.pk}/enabled/", {"enabled": "perhaps"}).status_code == 400
    schedule.refresh_from_db()
    assert schedule.enabled is True


@pytest.mark.parametrize("role", ["viewer"])
def test_viewers_read_the_list_but_change_nothing(role: str, config: None) -> None:
    schedule = Schedule.objects.create(name="hourly", agent="alpha", prompt="tick", cron="0 * * * *")
    client = client_as(role)
    page = client.get("/schedules/")
    assert page.status_code == 200 and "hourly" in page.content.decode()
    assert 'id="schedule-create"' not in page.content.decode()
    assert (
        client.post(
            "/schedules/", {"name": "n", "agent": "alpha", "prompt": "p", "cron": "0 * * * *"}
        ).status_code
        == 403
    )
    assert client.post(f"/schedules/{schedule.pk}/enabled/", {"enabled": "off"}).status_code == 403
    assert client.post(f"/schedules/{schedule.pk}/delete/", {"confirm": "yes"}).status_code == 403
    assert Schedule.objects.filter(pk=schedule.pk, enabled=True).exists()
