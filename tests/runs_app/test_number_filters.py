"""The dashboard's one format for money, durations and token counts (templatetags/clawboard.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.template import Context, Template

from runs_app.templatetags.clawboard import duration, money, tokens


@pytest.mark.parametrize(
    ("cents", "shown"),
    [
        (0, "$0.00"),
        (0.0, "$0.00"),
        (None, "$0.00"),
        (125, "$1.25"),
        (100, "$1.00"),
        (1, "$0.01"),
        (0.42, "$0.0042"),
        (0.00001, "$0.0000"),
        (99.5, "$1.00"),
        (123456.0, "$1,234.56"),
        (-250, "-$2.50"),
        ("12.5", "$0.13"),
        ("junk", "$0.00"),
    ],
)
def test_money_shows_dollars_with_cents_and_four_decimals_only_under_a_cent(
    cents: object, shown: str
) -> None:
    assert money(cents) == shown


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, "—"),
        (0, "0 ms"),
        (0.0004, "0 ms"),
        (0.042, "42 ms"),
        (0.9994, "999 ms"),
        (1, "1.00 s"),
        (1.2345, "1.23 s"),
        (59.994, "59.99 s"),
        (61, "1m 01s"),
        (3725, "1h 02m"),
        (timedelta(milliseconds=12), "12 ms"),
        ("abc", "—"),
        (-1, "—"),
    ],
)
def test_duration_is_in_milliseconds_under_a_second(seconds: object, shown: str) -> None:
    assert duration(seconds) == shown


@pytest.mark.parametrize(
    ("count", "shown"),
    [(0, "0"), (None, "0"), (999, "999"), (1000, "1,000"), (1234567, "1,234,567"), ("12", "12"), ("x", "0")],
)
def test_tokens_have_thousands_separators(count: object, shown: str) -> None:
    assert tokens(count) == shown


def test_the_filters_are_registered_for_templates() -> None:
    out = Template("{% load clawboard %}{{ c|money }} {{ d|duration }} {{ t|tokens }}").render(
        Context({"c": 0.5, "d": 0.25, "t": 12000})
    )
    assert out == "$0.0050 250 ms 12,000"


def test_when_shows_a_moment_in_utc_to_the_second() -> None:
    from datetime import UTC, datetime

    from runs_app.templatetags.clawboard import when

    assert when("2026-12-02T05:17:51.376706+01:00") == "2026-12-02 04:17:51"
    assert when(datetime(2026, 12, 2, 4, 17, 51, tzinfo=UTC)) == "2026-12-02 04:17:51"
    assert when(None) == "" and when("soon") == ""
