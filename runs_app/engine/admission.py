"""What admitting a spawn_subagent or delegate call gives: a result now (a refusal, a
background acceptance, a task action's answer), or children to wait on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from runs_app.engine.tools.base import ToolResult
from runs_app.models import Run


@dataclass
class Admission:
    """Either a result now (a refusal, or a background acceptance), or a child to wait on."""

    result: ToolResult | None = None
    child: Run | None = None
    code: str = "ok"  # ok | pending | accepted | invalid | policy | budget | not_found | error
    children: list[Run] | None = None
    wait_kind: str = ""  # for waits on something other than children (await_sessions)
    deadline: datetime | None = None


def refuse(error: str, code: str) -> Admission:
    return Admission(result=ToolResult.fail(error), code=code)


def flag(args: dict[str, Any], name: str) -> bool:
    value = args.get(name, False)
    return value is True or (isinstance(value, str) and value.lower() == "true")


def answer(result: ToolResult) -> Admission:
    """A tool action's answer, its refusal kind as the result says (`ToolResult.code`)."""
    return Admission(result=result, code=result.code or "ok")
