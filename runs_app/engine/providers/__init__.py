"""Model providers: one call in, one reply out. Pure Python, no ORM."""

from .base import (
    ChatMessage,
    ChatRequest,
    InvalidCompletion,
    ModelProvider,
    ModelReply,
    ProviderError,
    ToolCallRequest,
    ToolSpec,
    Usage,
    cost_cents,
    model_label,
    strip_think,
)
from .openai_compat import OpenAICompatProvider
from .reliable import (
    AllProvidersFailed,
    FailureEvent,
    ReliableProvider,
    build_provider,
    build_single,
    format_failure,
    resolve_chain,
)
from .scripted import ScriptedProvider, parse_script

__all__ = [
    "AllProvidersFailed",
    "ChatMessage",
    "ChatRequest",
    "FailureEvent",
    "InvalidCompletion",
    "ModelProvider",
    "ModelReply",
    "OpenAICompatProvider",
    "ProviderError",
    "ReliableProvider",
    "ScriptedProvider",
    "ToolCallRequest",
    "ToolSpec",
    "Usage",
    "build_provider",
    "build_single",
    "cost_cents",
    "format_failure",
    "model_label",
    "parse_script",
    "resolve_chain",
    "strip_think",
]
