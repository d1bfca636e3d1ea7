"""Risk-profile presets offered when creating a profile (SPEC §2.2): values, not links."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from policies_app.policy import WRITING_TOOLS
from policies_app.specs import RiskProfileSpec


def _values(**overrides: Any) -> dict[str, Any]:
    values = {f.name: f.default for f in fields(RiskProfileSpec) if f.name != "alias"}
    unknown = set(overrides) - set(values)
    if unknown:
        raise TypeError(f"unknown risk profile fields: {sorted(unknown)}")
    values.update(overrides)
    return values


PRESETS: dict[str, dict[str, Any]] = {
    "locked_down": _values(
        level="supervised",
        require_approval_for_medium_risk=True,
        block_high_risk_commands=True,
        delegation_mode="forbidden",
    ),
    "balanced": _values(
        level="supervised",
        allowed_commands=("*",),
        require_approval_for_medium_risk=False,
        block_high_risk_commands=True,
        delegation_mode="allow",
    ),
    "read_only_role": _values(
        level="readonly",
        excluded_tools=WRITING_TOOLS,
    ),
}


def preset_spec(name: str, alias: str) -> RiskProfileSpec:
    try:
        values = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown preset {name!r}; expected one of {', '.join(PRESETS)}") from None
    return RiskProfileSpec(alias=alias, **values)
