"""Errors are the product's: 400, 403, 404 and 500 are Clawboard pages with the navigation,
a path under /api/ answers JSON, and no debug page is reachable with the default settings."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from tests.dashboard.support import text_of


def nav_links(response: object) -> list[str]:
    nav = re.search(r'<nav class="nav".*?</nav>', response.content.decode(), flags=re.S)  # type: ignore[attr-defined]
    return re.findall(r'href="([^"]+)"', nav.group(0)) if nav else []


@pytest.mark.parametrize(
    "path", ["/runs/not-a-uuid/", "/runs/00000000-0000-0000-0000-000000000000/", "/nowhere/"]
)
def test_an_unknown_page_is_clawboards_404_with_the_navigation(viewer: Client, path: str) -> None:
    response = viewer.get(path)
    assert response.status_code == 404
    page = text_of(response)
    assert "<title>Page not found · Clawboard</title>" in page
    assert "There is nothing at this address. The run or entry may have been deleted." in page
    assert "/runs/" in nav_links(response) and "/api/docs/" in nav_links(response)
    assert "URLconf" not in page and "Traceback" not in page  # never Django's debug page


def test_a_forbidden_action_is_clawboards_403_and_says_why(viewer: Client) -> None:
    response = viewer.post("/agents/new/", {"alias": "x"})
    assert response.status_code == 403
    page = text_of(response)
    assert "<title>Forbidden · Clawboard</title>" in page
    assert re.search(r'<p id="error-detail">You need the \w+ role[^<]*</p>', page)
    assert "/runs/" in nav_links(response)


def test_a_request_for_a_host_not_served_is_clawboards_400(viewer: Client) -> None:
    response = viewer.get("/", HTTP_HOST="evil.example")
    assert response.status_code == 400
    assert "<title>Bad request · Clawboard</title>" in text_of(response)


def test_a_bug_is_clawboards_500_with_the_navigation(viewer: Client, settings: object) -> None:
    settings.ROOT_URLCONF = "tests.dashboard.error_urls"  # type: ignore[attr-defined]
    viewer.raise_request_exception = False
    response = viewer.get("/boom/")
    assert response.status_code == 500
    page = text_of(response)
    assert "<title>Server error · Clawboard</title>" in page
    assert "Something went wrong on our side. The error was logged; try again in a moment." in page
    assert "a bug" not in page
    assert "/runs/" in nav_links(response)


def test_an_unknown_api_path_answers_json(viewer: Client) -> None:
    response = viewer.get("/api/nothing-here/")
    assert response.status_code == 404
    assert response.json() == {
        "detail": "There is nothing at this address. The run or entry may have been deleted.",
        "code": "not_found",
    }


def test_a_stale_form_is_clawboards_403(config: None) -> None:
    from tests.dashboard.support import client_as

    client = client_as("operator", "otto")
    client.handler.enforce_csrf_checks = True  # type: ignore[attr-defined]
    response = client.post("/runs/start/", {"agent": "alpha", "prompt": "hi"})
    assert response.status_code == 403
    page = text_of(response)
    assert "The form had expired or came from another site. Reload the page and send it again." in page


def test_the_dashboard_links_to_the_api_docs(viewer: Client) -> None:
    assert "/api/docs/" in nav_links(viewer.get("/"))
