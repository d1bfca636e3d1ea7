"""The effective tool-result size read from a frozen policy's JSON is the spec's own."""

from __future__ import annotations

import pytest

from policies_app.specs import RuntimeProfileSpec, effective_tool_result_chars
from runs_app.engine.frozen import to_json


@pytest.mark.parametrize("chars", [0, 1, 500, 6000, 20000])
def test_the_json_reading_matches_the_spec(chars: int) -> None:
    spec = RuntimeProfileSpec(alias="rt", max_tool_result_chars=chars)
    assert effective_tool_result_chars(to_json(spec)) == spec.effective_max_tool_result_chars


@pytest.mark.parametrize("runtime", [None, {}, {"max_tool_result_chars": None}, "not a dict"])
def test_a_missing_value_is_the_default(runtime: object) -> None:
    assert (
        effective_tool_result_chars(runtime) == RuntimeProfileSpec(alias="").effective_max_tool_result_chars
    )
