"""The smaller items of the first week: the simulator keeps a bad caller from the URL and says
why, delegation-map names fit their circles, one path parameter name for entries."""

from __future__ import annotations

import re
from collections.abc import Sequence

from django.test import Client
from django.urls import get_resolver

from tests.dashboard.support import text_of


def test_the_simulator_keeps_a_bad_caller_from_the_url_and_refuses_it(viewer: Client) -> None:
    page = text_of(viewer.get("/delegation-map/?caller=ghost&target=beta"))
    caller = re.search(r'<select name="caller" id="sim-caller">(.*?)</select>', page, flags=re.S)
    assert caller is not None
    assert '<option value="ghost" selected>ghost (not an agent)</option>' in caller.group(1)
    errors = re.search(r'<ul class="errorlist" id="sim-errors">(.*?)</ul>', page, flags=re.S)
    assert errors is not None and "ghost" in errors.group(1)


def test_long_agent_names_fit_their_circle(viewer: Client, admin: Client) -> None:
    from tests.dashboard.test_config_forms import agent_form

    assert admin.post("/agents/new/", agent_form("release-coordinator")).status_code == 302
    page = text_of(viewer.get("/delegation-map/"))
    node = re.search(r'<g class="agent-node" id="map-release-coordinator".*?</g>', page, flags=re.S)
    assert node is not None
    assert "<title>release-coordinator</title>" in node.group(0)
    name = re.search(r'<text class="agent-name"[^>]*>([^<]*)</text>', node.group(0))
    assert name is not None and name.group(1) == "release-co…"
    assert 'textLength="50"' in node.group(0)


def test_entries_name_their_path_parameter_key_everywhere() -> None:
    routes: list[str] = []

    def walk(patterns: Sequence[object], prefix: str) -> None:
        for p in patterns:
            sub = getattr(p, "url_patterns", None)
            if sub is not None:
                walk(sub, prefix + str(p.pattern))  # type: ignore[attr-defined]
            else:
                routes.append(prefix + str(p.pattern))  # type: ignore[attr-defined]

    walk(get_resolver().url_patterns, "")
    agents = [r for r in routes if r.startswith("api/v1/agents/<")]
    assert agents and all(r.startswith("api/v1/agents/<str:key>/") for r in agents), agents
