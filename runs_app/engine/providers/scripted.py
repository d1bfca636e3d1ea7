"""`scripted` provider (SPEC §8.1): deterministic, offline replies for tests, demos and benchmarks.

Choices where the SPEC is silent:
- `sleep_ms` turns are not model turns: they are folded into the turn that follows them, so
  `[{"say": "a"}, {"sleep_ms": 50}, {"say": "b"}]` has two model turns, the second one sleeping
  50 ms before saying "b". Sleeps at the end of a rule delay the "past the last turn" reply once.
- Past the last turn the rule replays its last `say` turn (with that turn's `usage`, if any); a
  rule without any `say` turn fails there with a non-retryable ProviderError.
- Without `usage`, tokens are estimated as whitespace-separated words: input = words of every
  message of the request, output = words of the text plus words of each call's name and JSON
  arguments. Deterministic, and roughly proportional to real token counts.
- The visible text goes through the same check as real providers: empty or think-only text with
  no tool calls raises InvalidCompletion, so that path can be exercised offline.
- A prompt that no rule matches is a non-retryable ProviderError.
- The reply's model is the spec's `model`, or "scripted" when that is empty (`model_label`).
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents_app.snapshot import ProviderSpec

from .base import (
    ChatMessage,
    ChatRequest,
    ModelReply,
    ProviderError,
    ToolCallRequest,
    Usage,
    check_semantic,
    model_label,
)

_ACTIONS = ("say", "tool_calls", "error", "sleep_ms")
_PLACEHOLDER = re.compile(r"\{\{(prompt|agent|tool_results)\}\}")


@dataclass(frozen=True)
class _Turn:
    kind: str  # "say" | "tool_calls" | "error"
    say: str = ""
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    error: str = ""
    usage: Usage | None = None


@dataclass(frozen=True)
class _Step:
    """One model turn: the sleeps written before it, then the turn (None = replay last say)."""

    sleep_ms: int
    turn: _Turn | None


@dataclass(frozen=True)
class _Rule:
    index: int
    pattern: re.Pattern[str] | None
    steps: tuple[_Step, ...]
    last_say: _Turn | None


def _bad(where: str, problem: str) -> ProviderError:
    return ProviderError(f"invalid script: {where}: {problem}", retryable=False)


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _bad(where, "must be a non-negative integer")
    return value


def _parse_usage(raw: Any, where: str) -> Usage:
    if not isinstance(raw, dict) or set(raw) - {"input", "output"}:
        raise _bad(where, 'must be an object {"input": n, "output": n}')
    return Usage(_int(raw.get("input", 0), f"{where}.input"), _int(raw.get("output", 0), f"{where}.output"))


def _parse_call(raw: Any, where: str) -> tuple[str, dict[str, Any]]:
    if not isinstance(raw, dict) or set(raw) - {"name", "arguments"}:
        raise _bad(where, 'must be an object {"name": ..., "arguments": {...}}')
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise _bad(f"{where}.name", "must be a non-empty string")
    arguments = raw.get("arguments", {})
    if not isinstance(arguments, dict):
        raise _bad(f"{where}.arguments", "must be an object")
    return name, arguments


def _parse_turn(raw: Any, where: str) -> _Turn | int:
    """A turn, or the milliseconds of a sleep turn."""
    if not isinstance(raw, dict):
        raise _bad(where, "must be an object")
    actions = [key for key in _ACTIONS if key in raw]
    unknown = sorted(set(raw) - set(_ACTIONS) - {"usage"})
    if unknown:
        raise _bad(where, f"unknown key(s) {', '.join(unknown)}")
    if len(actions) != 1:
        raise _bad(where, "must have exactly one of say, tool_calls, error, sleep_ms")
    usage = _parse_usage(raw["usage"], f"{where}.usage") if "usage" in raw else None
    action = actions[0]
    value = raw[action]
    if action == "sleep_ms":
        return _int(value, f"{where}.sleep_ms")
    if action == "say":
        if not isinstance(value, str):
            raise _bad(f"{where}.say", "must be a string")
        return _Turn("say", say=value, usage=usage)
    if action == "error":
        if not isinstance(value, str) or not value.strip():
            raise _bad(f"{where}.error", "must be a non-empty string")
        return _Turn("error", error=value, usage=usage)
    if not isinstance(value, list) or not value:
        raise _bad(f"{where}.tool_calls", "must be a non-empty list")
    calls = tuple(_parse_call(call, f"{where}.tool_calls[{i}]") for i, call in enumerate(value))
    return _Turn("tool_calls", calls=calls, usage=usage)


def _parse_rule(raw: Any, index: int) -> _Rule:
    where = f"script[{index}]"
    if not isinstance(raw, dict) or set(raw) - {"match", "turns"}:
        raise _bad(where, 'must be an object {"match": "<regex>", "turns": [...]}')
    match = raw.get("match")
    pattern = None
    if match is not None:
        if not isinstance(match, str):
            raise _bad(f"{where}.match", "must be a string")
        try:
            pattern = re.compile(match)
        except re.error as exc:
            raise _bad(f"{where}.match", f"invalid regular expression ({exc})") from None
    turns = raw.get("turns")
    if not isinstance(turns, list) or not turns:
        raise _bad(f"{where}.turns", "must be a non-empty list")
    steps: list[_Step] = []
    pending_sleep = 0
    last_say: _Turn | None = None
    for j, raw_turn in enumerate(turns):
        parsed = _parse_turn(raw_turn, f"{where}.turns[{j}]")
        if isinstance(parsed, int):
            pending_sleep += parsed
            continue
        steps.append(_Step(pending_sleep, parsed))
        pending_sleep = 0
        if parsed.kind == "say":
            last_say = parsed
    if pending_sleep:
        steps.append(_Step(pending_sleep, None))
    return _Rule(index, pattern, tuple(steps), last_say)


def parse_script(script: Any) -> list[_Rule]:
    """Validate a script; raises a non-retryable ProviderError naming the first problem."""
    if isinstance(script, str):
        try:
            script = json.loads(script) if script.strip() else []
        except ValueError:
            raise _bad("script", "is not valid JSON") from None
    if not isinstance(script, list):
        raise _bad("script", "must be a list of rules")
    return [_parse_rule(raw, i) for i, raw in enumerate(script)]


def _substitute(value: Any, fill: Callable[[re.Match[str]], str]) -> Any:
    if isinstance(value, str):
        return _PLACEHOLDER.sub(fill, value)
    if isinstance(value, dict):
        return {key: _substitute(item, fill) for key, item in value.items()}
    if isinstance(value, list):
        return [_substitute(item, fill) for item in value]
    return value


@functools.lru_cache(maxsize=65_536)
def _words(text: str) -> int:
    # Cached: every turn counts the whole conversation again, which would make a run's cost
    # grow with the square of its length.
    return len(text.split())


# id(last message counted) -> (that message, its index, words up to and including it). A
# conversation only grows at its end, so each turn counts only the messages added since the
# turn before, and a run's cost does not grow with its length. The message is kept in the
# entry so that its id cannot be reused by another while the entry lives.
_counted: dict[int, tuple[ChatMessage, int, int]] = {}


def _conversation_words(messages: list[ChatMessage]) -> int:
    """sum(_words(m.content) for m in messages), from the last count of this conversation."""
    total, start = 0, 0
    for i in range(len(messages) - 1, -1, -1):
        entry = _counted.get(id(messages[i]))
        if entry is not None and entry[0] is messages[i] and entry[1] == i:
            total, start = entry[2], i + 1
            break
    for message in messages[start:]:
        total += _words(message.content)
    if messages:
        if len(_counted) > 100_000:
            _counted.clear()
        _counted[id(messages[-1])] = (messages[-1], len(messages) - 1, total)
    return total


class ScriptedProvider:
    # No I/O: the engine may call it inline, without going through an event loop. (A rule's
    # `sleep_ms` still sleeps in the calling thread, as `complete` always did.)
    instant = True

    def __init__(self, spec: ProviderSpec, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.spec = spec
        self.rules = parse_script(spec.script)
        self._sleep = sleep

    def _rule_for(self, prompt: str) -> _Rule:
        for rule in self.rules:
            if rule.pattern is None or rule.pattern.search(prompt):
                return rule
        raise ProviderError("scripted provider has no rule matching the prompt", retryable=False)

    async def acomplete(self, request: ChatRequest) -> ModelReply:
        return self.complete(request)

    def complete(self, request: ChatRequest) -> ModelReply:
        rule = self._rule_for(request.prompt)
        n = request.turn_index
        step = rule.steps[n] if 0 <= n < len(rule.steps) else _Step(0, None)
        if step.sleep_ms:
            self._sleep(step.sleep_ms / 1000)
        turn = step.turn or rule.last_say
        if turn is None:
            raise ProviderError(
                f"scripted rule script[{rule.index}] has no 'say' turn to repeat after its last turn",
                retryable=False,
            )
        if turn.kind == "error":
            raise ProviderError(turn.error)

        values = {
            "prompt": request.prompt,
            "agent": request.agent,
            "tool_results": "\n\n".join(request.tool_results),
        }

        def fill(match: re.Match[str]) -> str:
            return values[match.group(1)]

        text = _substitute(turn.say, fill)
        calls = [
            ToolCallRequest(id=f"call_{n}_{i}", name=name, arguments=_substitute(arguments, fill))
            for i, (name, arguments) in enumerate(turn.calls)
        ]
        visible = check_semantic(text, calls)
        usage = turn.usage or Usage(
            input_tokens=_conversation_words(request.messages),
            output_tokens=_words(visible)
            + sum(_words(call.name) + _words(json.dumps(call.arguments)) for call in calls),
        )
        return ModelReply(
            text=visible,
            tool_calls=calls,
            usage=usage,
            provider_ref=self.spec.ref,
            model=model_label(self.spec),
        )
