from __future__ import annotations

import pytest
from django.test import Client

from agents_app.users import user_create_or_update
from runs_app.models import Schedule


@pytest.mark.django_db
def test_every_run_model_has_an_admin_page() -> None:
    user, _, _ = user_create_or_update(username="root-admin", role="admin", password="pw-123456789")
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    for name in (
        "run",
        "runevent",
        "message",
        "toolcall",
        "approval",
        "announce",
        "steer",
        "memoryentry",
        "schedule",
    ):
        assert client.get(f"/admin/runs_app/{name}/").status_code == 200, name


@pytest.mark.django_db
def test_a_schedule_with_a_bad_cron_is_refused_in_the_admin() -> None:
    user, _, _ = user_create_or_update(username="root-admin", role="admin", password="pw-123456789")
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    body = {
        "name": "nightly",
        "agent": "coordinator",
        "prompt": "report",
        "cron": "every day",
        "enabled": "on",
    }
    response = client.post("/admin/runs_app/schedule/add/", body)
    assert response.status_code == 200
    assert (
        "cron expression &quot;every day&quot; must have five fields "
        "(minute hour day-of-month month day-of-week); got 2" in response.content.decode()
    )
    assert not Schedule.objects.exists()
    body["cron"] = "0 3 * * *"
    assert client.post("/admin/runs_app/schedule/add/", body).status_code == 302
    assert Schedule.objects.get().created_by == user
