"""Two admins editing at the same moment: neither change overwrites the other."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from agents_app import entries
from agents_app.models import Agent
from agents_app.users import user_create_or_update
from tests.agents_app.support import load_base_config


@pytest.mark.django_db(transaction=True)
def test_concurrent_creates_both_survive(monkeypatch: pytest.MonkeyPatch) -> None:
    load_base_config()
    _, _, token = user_create_or_update(username="alice", role="admin")
    rebuild = entries.rebuild

    def slow_rebuild(doc: dict[str, Any]) -> Any:
        # Widen the window between reading the configuration and writing it.
        time.sleep(0.3)
        return rebuild(doc)

    monkeypatch.setattr(entries, "rebuild", slow_rebuild)
    statuses: dict[str, int] = {}

    def create(alias: str) -> None:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        body = {"alias": alias, "model_provider": "scripted.demo", "risk_profile": "team"}
        try:
            statuses[alias] = client.post("/api/v1/agents/", body, format="json").status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=create, args=(alias,)) for alias in ("one", "two")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert statuses == {"one": 201, "two": 201}
    assert set(Agent.objects.values_list("alias", flat=True)) >= {"one", "two"}
