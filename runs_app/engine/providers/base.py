"""Provider-neutral shapes of one model call.

Pure Python on purpose: the engine calls providers outside any database transaction,
so nothing here touches the ORM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from agents_app.snapshot import ProviderSpec

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]  # JSON schema of the arguments object


@dataclass(frozen=True)
class ToolCallRequest:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class ChatMessage:
    role: Role
    content: str
    tool_calls: list[ToolCallRequest] = field(default_factory=list)  # assistant turns only
    tool_call_id: str = ""  # tool turns only


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class ModelReply:
    text: str
    tool_calls: list[ToolCallRequest]
    usage: Usage
    provider_ref: str  # "<type>.<alias>" that actually served the reply
    model: str  # model that actually served the reply


@dataclass
class ChatRequest:
    messages: list[ChatMessage]
    tools: list[ToolSpec] = field(default_factory=list)
    agent: str = ""
    prompt: str = ""  # the run's task text
    turn_index: int = 0  # 0-based index of this model turn within the run
    tool_results: list[str] = field(default_factory=list)  # previous turn's outputs, "Error: <e>" on failure
    temperature: float | None = None  # None: the provider spec's value
    max_tokens: int | None = None  # None: the provider spec's value


class ModelProvider(Protocol):
    """One model call: `complete` blocks the calling thread; `acomplete` is the same call
    (same request, reply, errors and reasons) awaited on the running event loop.

    `instant` is True when a call does no I/O (the scripted provider): the caller may then run
    it inline instead of handing it to an event loop.
    """

    @property
    def instant(self) -> bool: ...

    def complete(self, request: ChatRequest) -> ModelReply: ...

    async def acomplete(self, request: ChatRequest) -> ModelReply: ...


class ProviderError(Exception):
    """A failed model call.

    `reason` is short and safe to show: never an endpoint, a key or a response body.
    `retryable=False` tells the reliable wrapper that repeating the same call on the same
    model is pointless (bad request, unknown model, broken script), so it moves on.
    """

    def __init__(self, reason: str, *, retryable: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


class InvalidCompletion(ProviderError):
    """The model answered, but with nothing usable (empty or think-only, no tool calls)."""

    def __init__(self, reason: str = "invalid semantic completion") -> None:
        super().__init__(reason, retryable=True)


def model_label(spec: ProviderSpec) -> str:
    """The model name shown in attributions; `scripted` may leave `model` empty."""
    return spec.model or spec.type


def cost_cents(spec: ProviderSpec, usage: Usage) -> float:
    return (
        usage.input_tokens * float(spec.input_per_mtok_cents)
        + usage.output_tokens * float(spec.output_per_mtok_cents)
    ) / 1_000_000


_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<think>.*\Z", re.DOTALL | re.IGNORECASE)


def strip_think(text: str) -> str:
    """Remove reasoning blocks; an unclosed `<think>` (cut-off output) hides the rest."""
    return _THINK_OPEN.sub("", _THINK_BLOCK.sub("", text)).strip()


def check_semantic(text: str, tool_calls: list[ToolCallRequest]) -> str:
    """Return the visible text, or raise InvalidCompletion when the reply carries nothing."""
    visible = strip_think(text)
    if not visible and not tool_calls:
        raise InvalidCompletion()
    return visible
