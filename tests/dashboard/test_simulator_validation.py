"""The dashboard's policy simulator validates its input exactly like `POST /api/v1/policy/check/`
and shows the same messages (issue 17 item 6): nothing is silently clamped or defaulted."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from django.test import Client

from tests.agents_app.support import api_client


def dashboard_errors(client: Client, data: dict[str, str]) -> list[str]:
    response = client.post("/delegation-map/simulate/", data)
    assert response.status_code == 200
    body = response.content.decode()
    assert 'id="sim-verdict"' not in body, "an invalid input is never simulated"
    block = re.search(r'<ul class="errorlist" id="sim-errors">(.*?)</ul>', body, re.S)
    assert block, body
    return [html.unescape(li) for li in re.findall(r"<li>(.*?)</li>", block.group(1), re.S)]


def rest_errors(data: dict[str, Any]) -> list[str]:
    response = api_client("viewer", "rest-reader").post("/api/v1/policy/check/", data, format="json")
    assert response.status_code in (400, 404), response.content
    body = response.json()
    if "errors" in body:
        return [f"{e['field']}: {e['message']}" for e in body["errors"]]
    return [body["detail"]]


@pytest.mark.parametrize(
    ("form", "expected"),
    [
        ({"depth": "-1"}, ["depth: Ensure this value is greater than or equal to 0."]),
        ({"depth": "abc"}, ["depth: A valid integer is required."]),
        ({"depth": "101"}, ["depth: Ensure this value is less than or equal to 100."]),
        ({"mode": "weird"}, ['mode: "weird" is not a valid choice.']),
        ({"caller": "ghost"}, ["No agent 'ghost'."]),
        ({"target": "  "}, ["target: This field may not be blank."]),
        ({"background": "maybe"}, ["background: Must be a valid boolean."]),
        ({"depth": "-1", "mode": "weird"}, ['mode: "weird" is not a valid choice.', "depth: Ensure this value is greater than or equal to 0."]),
    ],
)  # fmt: skip
def test_the_simulator_refuses_what_the_rest_check_refuses_with_the_same_messages(
    viewer: Client, form: dict[str, str], expected: list[str]
) -> None:
    data = {"caller": "alpha", "target": "beta", **form}
    shown = dashboard_errors(viewer, data)
    assert shown == expected
    rest: dict[str, Any] = dict(data)
    assert sorted(rest_errors(rest)) == sorted(shown)


def test_empty_optional_fields_mean_absent_as_in_rest(viewer: Client) -> None:
    response = viewer.post(
        "/delegation-map/simulate/", {"caller": "alpha", "target": "beta", "mode": "", "depth": ""}
    )
    assert (
        '<span class="badge status-completed">allowed</span> as <b>bounded</b>' in response.content.decode()
    )


def test_the_map_page_validates_its_query_string_too(viewer: Client) -> None:
    body = html.unescape(viewer.get("/delegation-map/?caller=alpha&target=beta&depth=-1").content.decode())
    assert "depth: Ensure this value is greater than or equal to 0." in body
    assert 'id="sim-verdict"' not in body
    ghost = html.unescape(viewer.get("/delegation-map/?caller=ghost&target=beta").content.decode())
    assert "No agent 'ghost'." in ghost
