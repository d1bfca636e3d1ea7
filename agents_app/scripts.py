"""Save-time compilation of a `scripted` provider's script (SPEC §8.1).

What runs is what was validated: every rule's regex compiles, every turn has one known
shape, sleeps are bounded and every `{{placeholder}}` is one the provider fills in. Errors
name the configuration path of the offending value; the provider itself keeps its own checks
for scripts that reach it some other way."""

from __future__ import annotations

import math
import re
from typing import Any

Error = tuple[str, str]

MAX_SLEEP_MS = 600_000
PLACEHOLDERS: tuple[str, ...] = ("agent", "prompt", "tool_results")
_ACTIONS: tuple[str, ...] = ("say", "tool_calls", "error", "sleep_ms")
_PLACEHOLDER_RE = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_KNOWN_PLACEHOLDERS = ", ".join("{{" + name + "}}" for name in PLACEHOLDERS)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _placeholder_errors(path: str, value: Any) -> list[Error]:
    """Every unknown `{{name}}` in the strings of `value` (nested lists and tables too)."""
    errors: list[Error] = []
    stack: list[tuple[str, Any]] = [(path, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            for found in _PLACEHOLDER_RE.finditer(item):
                if found.group(1) not in PLACEHOLDERS:
                    errors.append(
                        (
                            where,
                            f"{where} uses unknown placeholder {found.group(0)}; "
                            f"known placeholders: {_KNOWN_PLACEHOLDERS}",
                        )
                    )
        elif isinstance(item, dict):
            stack.extend((f"{where}.{key}", sub) for key, sub in reversed(list(item.items())))
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", sub) for i, sub in reversed(list(enumerate(item))))
    return errors


def _usage_errors(path: str, usage: Any) -> list[Error]:
    if not isinstance(usage, dict) or set(usage) - {"input", "output"}:
        return [(path, f"{path} must be a table {{ input = n, output = n }}")]
    errors: list[Error] = []
    for name in ("input", "output"):
        value = usage.get(name, 0)
        if not _is_int(value) or not 0 <= value <= 2_147_483_647:
            errors.append((f"{path}.{name}", f"{path}.{name} must be an integer of 0 or more"))
    return errors


def _call_errors(path: str, call: Any) -> list[Error]:
    if not isinstance(call, dict) or set(call) - {"name", "arguments"}:
        return [(path, f"{path} must be a table {{ name = ..., arguments = {{ ... }} }}")]
    errors: list[Error] = []
    name = call.get("name")
    if not isinstance(name, str) or not name.strip():
        errors.append((f"{path}.name", f"{path}.name must be a non-empty string"))
    arguments = call.get("arguments", {})
    if not isinstance(arguments, dict):
        errors.append((f"{path}.arguments", f"{path}.arguments must be a table"))
    else:
        errors.extend(_placeholder_errors(f"{path}.arguments", arguments))
    return errors


def _turn_errors(path: str, turn: Any) -> list[Error]:
    if not isinstance(turn, dict):
        return [(path, f"{path} must be a table with one of say, tool_calls, error, sleep_ms")]
    unknown = sorted(set(turn) - set(_ACTIONS) - {"usage"})
    if unknown:
        return [
            (
                path,
                f"{path} has unknown key(s) {', '.join(unknown)}; expected one of say, tool_calls, error, sleep_ms, and usage",
            )
        ]
    actions = [key for key in _ACTIONS if key in turn]
    if len(actions) != 1:
        return [(path, f"{path} must have exactly one of say, tool_calls, error, sleep_ms")]
    errors: list[Error] = []
    if "usage" in turn:
        errors.extend(_usage_errors(f"{path}.usage", turn["usage"]))
    action = actions[0]
    value = turn[action]
    where = f"{path}.{action}"
    if action == "sleep_ms":
        if not _is_int(value) or not 0 <= value <= MAX_SLEEP_MS:
            shown = repr(value) if not isinstance(value, float) or math.isfinite(value) else str(value)
            errors.append((where, f"{where} must be an integer from 0 to {MAX_SLEEP_MS} (got {shown})"))
    elif action == "say":
        if not isinstance(value, str):
            errors.append((where, f"{where} must be a string"))
        else:
            errors.extend(_placeholder_errors(where, value))
    elif action == "error":
        if not isinstance(value, str) or not value.strip():
            errors.append((where, f"{where} must be a non-empty string"))
        else:
            errors.extend(_placeholder_errors(where, value))
    elif not isinstance(value, list) or not value:
        errors.append((where, f"{where} must be a non-empty list of tool calls"))
    else:
        for i, call in enumerate(value):
            errors.extend(_call_errors(f"{where}[{i}]", call))
    return errors


def script_errors(path: str, script: Any) -> list[Error]:
    """Every problem of `script` (the value at `path`), as (path, message) pairs."""
    if not isinstance(script, list | tuple):
        return [(path, f"{path} must be a list of rules (tables)")]
    errors: list[Error] = []
    for i, rule in enumerate(script):
        where = f"{path}[{i}]"
        if not isinstance(rule, dict):
            errors.append((where, f"{where} must be a table"))
            continue
        unknown = sorted(set(rule) - {"match", "turns"})
        if unknown:
            errors.append(
                (where, f"{where} has unknown key(s) {', '.join(unknown)}; expected match and turns")
            )
        if "match" in rule:
            match = rule["match"]
            if not isinstance(match, str):
                errors.append((f"{where}.match", f"{where}.match must be a string"))
            else:
                try:
                    re.compile(match)
                except re.error as exc:
                    errors.append(
                        (f"{where}.match", f"{where}.match is not a valid regular expression ({exc})")
                    )
                except (RecursionError, OverflowError):
                    errors.append((f"{where}.match", f"{where}.match is too complex a regular expression"))
        turns = rule.get("turns")
        if not isinstance(turns, list) or not turns:
            errors.append((f"{where}.turns", f"{where}.turns must be a non-empty list of turns"))
            continue
        for j, turn in enumerate(turns):
            errors.extend(_turn_errors(f"{where}.turns[{j}]", turn))
    return errors
