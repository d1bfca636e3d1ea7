from __future__ import annotations

import pytest

from policies_app.policy import WRITING_TOOLS, is_tool_allowed
from policies_app.presets import PRESETS, preset_spec
from policies_app.specs import DEFAULT_ALLOWED_COMMANDS, RiskProfileSpec


def test_the_three_presets_are_offered() -> None:
    assert set(PRESETS) == {"locked_down", "balanced", "read_only_role"}


def test_locked_down_is_supervised_with_approvals_and_no_delegation() -> None:
    spec = preset_spec("locked_down", "safe")
    assert spec.alias == "safe"
    assert spec.level == "supervised"
    assert spec.require_approval_for_medium_risk is True
    assert spec.block_high_risk_commands is True
    assert spec.delegation_mode == "forbidden"
    assert spec.allowed_commands == DEFAULT_ALLOWED_COMMANDS


def test_balanced_allows_any_command_and_delegation_but_blocks_high_risk() -> None:
    spec = preset_spec("balanced", "team")
    assert spec.level == "supervised"
    assert spec.allowed_commands == ("*",)
    assert spec.require_approval_for_medium_risk is False
    assert spec.block_high_risk_commands is True
    assert spec.delegation_mode == "allow"


def test_read_only_role_excludes_every_writing_tool() -> None:
    spec = preset_spec("read_only_role", "reviewer")
    assert spec.level == "readonly"
    assert set(spec.excluded_tools) == {"file_write", "shell", "memory_store", "spawn_subagent", "delegate"}
    assert not any(is_tool_allowed(spec, t) for t in WRITING_TOOLS)
    assert is_tool_allowed(spec, "file_read")
    assert is_tool_allowed(spec, "memory_recall")


def test_presets_are_values_for_every_field_but_alias() -> None:
    for values in PRESETS.values():
        assert "alias" not in values
        assert isinstance(RiskProfileSpec(alias="x", **values), RiskProfileSpec)


def test_an_unknown_preset_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown preset 'nope'"):
        preset_spec("nope", "x")
