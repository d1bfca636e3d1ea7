"""What every tool returns, and the context a local tool runs in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec


@dataclass(frozen=True)
class ToolResult:
    success: bool
    output: str = ""
    error: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"success": self.success, "output": self.output, "error": self.error}

    @classmethod
    def ok(cls, output: str) -> ToolResult:
        return cls(True, output, None)

    @classmethod
    def fail(cls, error: str, output: str = "") -> ToolResult:
        return cls(False, output, error)


@dataclass(frozen=True)
class LocalToolContext:
    """Everything a file or shell tool needs: the effective policy and where it acts."""

    risk: RiskProfileSpec
    runtime: RuntimeProfileSpec
    workspace: Path
    env: dict[str, str] = field(default_factory=dict)  # the process environment to pass through from
