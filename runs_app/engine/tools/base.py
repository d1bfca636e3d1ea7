"""What every tool returns, and the context a local tool runs in."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policies_app.specs import RiskProfileSpec, RuntimeProfileSpec


@dataclass(frozen=True)
class ToolResult:
    success: bool
    output: str = ""
    error: str | None = None
    # What kind of refusal a failure is, for REST's status code: "invalid" (bad input),
    # "not_found", "policy", "budget", "error"; "" for a success or a plain tool failure.
    code: str = ""

    def as_dict(self) -> dict[str, object]:
        return {"success": self.success, "output": self.output, "error": self.error}

    @classmethod
    def ok(cls, output: str) -> ToolResult:
        return cls(True, output, None)

    @classmethod
    def fail(cls, error: str, output: str = "", code: str = "") -> ToolResult:
        return cls(False, output, error, code)

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> ToolResult:
        error = data.get("error")
        return cls(
            bool(data.get("success")), str(data.get("output") or ""), None if error is None else str(error)
        )


@dataclass(frozen=True)
class LocalToolContext:
    """Everything a file or shell tool needs: the effective policy and where it acts."""

    risk: RiskProfileSpec
    runtime: RuntimeProfileSpec
    workspace: Path
    env: dict[str, str] = field(default_factory=dict)  # the process environment to pass through from
    # The run the tool acts for, and whose memory it reads and writes (a delegate's target's).
    run_id: Any = None
    memory_agent: str = ""
