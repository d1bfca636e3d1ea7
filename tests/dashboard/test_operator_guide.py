"""docs/operator-guide.md shows every page: each screenshot it links exists (the browser tests
take them), and each page of the dashboard's navigation has a section."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).resolve().parents[2] / "docs"
NAV_PAGES = (
    "/accounts/login/",
    "/",
    "/runs/",
    "/runs/<id>/",
    "/approvals/",
    "/tasks/",
    "/schedules/",
    "/agents/",
    "/risk-profiles/",
    "/runtime-profiles/",
    "/providers/",
    "/mcp/",
    "/delegation-map/",
    "/config/",
)


def test_every_screenshot_the_guide_shows_exists() -> None:
    guide = (DOCS / "operator-guide.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\((screenshots/[^)]+\.png)\)", guide)
    assert len(images) >= len(NAV_PAGES)
    missing = [image for image in images if not (DOCS / image).is_file()]
    assert missing == []


def test_every_page_has_a_section() -> None:
    headings = re.findall(r"^## .*$", (DOCS / "operator-guide.md").read_text(), re.M)
    for page in NAV_PAGES:
        assert any(f"`{page}`" in h for h in headings), page
