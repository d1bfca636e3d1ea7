"""OpenAI chat-completions over real HTTP (SPEC §8.2), for every family but scripted/anthropic.

One attempt per call: the client never retries (`max_retries=0`); ReliableProvider owns retries,
back-off and fallbacks. Failures become ProviderError with a fixed, short reason so that no
endpoint, key or response body can leak into run errors or logs.

`complete` blocks its thread for the call; `acomplete` awaits it on the running event loop. Both
take their client from `CLIENTS` (clients.py): built once per settings, pooled, kept alive.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import openai

from agents_app.secrets import provider_api_key
from agents_app.snapshot import ProviderSpec

from .base import (
    ChatMessage,
    ChatRequest,
    InvalidCompletion,
    ModelReply,
    ProviderError,
    ToolCallRequest,
    ToolSpec,
    Usage,
    check_semantic,
)
from .clients import ClientCache, ClientKey

# Used only when a provider's uri is empty.
DEFAULT_BASE_URLS: dict[str, str] = {
    "openai": "https://api.openai.com/v1",
    "openrouter": "https://openrouter.ai/api/v1",
    "groq": "https://api.groq.com/openai/v1",
    "deepseek": "https://api.deepseek.com/v1",
    "mistral": "https://api.mistral.ai/v1",
    "together": "https://api.together.xyz/v1",
    "ollama": "http://localhost:11434/v1",
    "lmstudio": "http://localhost:1234/v1",
    "llamacpp": "http://localhost:8080/v1",
    "vllm": "http://localhost:8000/v1",
}

# Sent with the client's generic `post` (the SDK's documented way to send a body as it is):
# the body is already in wire form (`_params`), and the typed `chat.completions.create` walks
# every parameter, the tools' JSON schemas included, through its TypedDict transform, which
# cost more CPU than the rest of the call (docs/performance.md). Timeouts, connection reuse
# and error types are the client's, the same either way. The answer comes back as bytes and
# is checked here (`_reply`): servers other than OpenAI's answer shapes the SDK's models would
# let through half-read (docs/configuration.md, "OpenAI-compatible servers").
CHAT_COMPLETIONS = "/chat/completions"

# Statuses worth repeating on the same model; any other 4xx moves straight to the next candidate.
_RETRYABLE_STATUS = {408, 409, 425, 429}


def base_url_for(spec: ProviderSpec) -> str:
    uri = spec.uri.strip().rstrip("/")
    if not uri:
        if spec.type not in DEFAULT_BASE_URLS:
            raise ProviderError(f"provider '{spec.ref}' has no uri", retryable=False)
        return DEFAULT_BASE_URLS[spec.type]
    if spec.type == "ollama":
        # Ollama's native API lives at the root; its OpenAI-compatible one under /v1.
        parts = urlsplit(uri)
        if parts.path in ("", "/"):
            return urlunsplit(parts._replace(path="/v1"))
    return uri


def api_key_for(spec: ProviderSpec) -> str:
    # Local servers accept any key, but the client insists on a non-empty one.
    return provider_api_key(spec) or "none"


def _wire_message(message: ChatMessage) -> dict[str, Any]:
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    # Always a string, "" when the model only called tools: OpenAI also takes `null` there, but
    # llama-cpp-python's server refuses the whole request for it (HTTP 500).
    wire: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.role == "assistant" and message.tool_calls:
        wire["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in message.tool_calls
        ]
    return wire


def _wire_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def _reason(exc: Exception) -> ProviderError:
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError("timeout")
    if isinstance(exc, openai.APIConnectionError):
        return ProviderError("connection error")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        return ProviderError(f"HTTP {status}", retryable=status >= 500 or status in _RETRYABLE_STATUS)
    return ProviderError("invalid response")


NOT_JSON = "invalid response: the body is not JSON"
# llama-cpp-python builds a call's id from the tool's name and the completion's id (over 100
# characters for a long MCP tool name); a longer id than this is replaced by one of ours, which
# is unique within the run and sent back with the call's result the same way.
MAX_CALL_ID = 64
NOT_A_COMPLETION = "invalid response: not a chat completion"


def _malformed(what: str) -> ProviderError:
    # Retryable: a model that sampled a broken call may well sample a good one next time.
    return ProviderError(f"malformed tool call: {what}")


def _tool_call(raw: Any, offered: set[str], fallback_id: str) -> ToolCallRequest:
    """One entry of `tool_calls`, checked: a name among the offered tools, and arguments that
    are a JSON object (a string, as OpenAI sends them, or already parsed, as some servers do)."""
    if not isinstance(raw, dict):
        raise _malformed("a tool call that is not an object")
    function = raw.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(name, str) or not name:
        raise _malformed("a tool call without a name")
    if name not in offered:
        raise _malformed("a tool that was not offered")
    assert isinstance(function, dict)
    arguments = function.get("arguments")
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        arguments = {}
    elif isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            arguments = None
    if not isinstance(arguments, dict):
        raise _malformed(f"the arguments of '{name}' are not a JSON object")
    call_id = raw.get("id")
    if not isinstance(call_id, str) or not 0 < len(call_id) <= MAX_CALL_ID:
        call_id = fallback_id
    return ToolCallRequest(id=call_id, name=name, arguments=arguments)


def _text(content: Any) -> str:
    """`content` as text: a string, nothing, or a list of text parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text") or "")
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def _tokens(usage: Any, key: str) -> int:
    value = usage.get(key) if isinstance(usage, dict) else None
    return value if isinstance(value, int) and value >= 0 else 0


def _build_sync(key: ClientKey) -> openai.OpenAI:
    base_url, api_key, timeout = key
    return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)


def _build_async(key: ClientKey) -> openai.AsyncOpenAI:
    base_url, api_key, timeout = key
    return openai.AsyncOpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)


# One client per (base URL, key, timeout) and process (and event loop, for the async ones).
CLIENTS: ClientCache[openai.OpenAI, openai.AsyncOpenAI] = ClientCache(_build_sync, _build_async)


class OpenAICompatProvider:
    instant = False  # every call is a network round trip

    def __init__(self, spec: ProviderSpec) -> None:
        if not spec.model:
            raise ProviderError(f"provider '{spec.ref}' has no model", retryable=False)
        self.spec = spec
        self.base_url = base_url_for(spec)

    def _client_key(self) -> ClientKey:
        return (self.base_url, api_key_for(self.spec), float(self.spec.timeout_secs))

    def complete(self, request: ChatRequest) -> ModelReply:
        params = self._params(request)
        try:
            client = CLIENTS.sync_client(self._client_key())
            raw = client.post(CHAT_COMPLETIONS, body=params, cast_to=bytes)
        except (openai.OpenAIError, ValueError) as exc:
            # `from None`: the cause's text may hold the URL or the response body.
            raise _reason(exc) from None
        return self._reply(raw, request)

    async def acomplete(self, request: ChatRequest) -> ModelReply:
        params = self._params(request)
        try:
            aclient = CLIENTS.async_client(self._client_key())
            raw = await aclient.post(CHAT_COMPLETIONS, body=params, cast_to=bytes)
        except (openai.OpenAIError, ValueError) as exc:
            raise _reason(exc) from None
        return self._reply(raw, request)

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        spec = self.spec
        params: dict[str, Any] = {
            "model": spec.model,
            "messages": [_wire_message(message) for message in request.messages],
        }
        if request.tools:
            params["tools"] = [_wire_tool(tool) for tool in request.tools]
            # OpenAI's default once tools are sent, but llama-cpp-python's function-calling
            # chat formats leave the tools out of the prompt unless it is said.
            params["tool_choice"] = "auto"
        temperature = request.temperature if request.temperature is not None else spec.temperature
        if temperature is not None:
            params["temperature"] = temperature
        max_tokens = request.max_tokens if request.max_tokens is not None else spec.max_tokens
        if max_tokens is not None:
            params["max_tokens"] = max_tokens
        return params

    def _reply(self, raw: bytes, request: ChatRequest) -> ModelReply:
        try:
            body = json.loads(raw)
        except ValueError:
            raise ProviderError(NOT_JSON) from None
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list):
            raise ProviderError(NOT_A_COMPLETION)
        if not choices:
            raise InvalidCompletion()
        message = choices[0].get("message") if isinstance(choices[0], dict) else None
        if not isinstance(message, dict):
            raise ProviderError(NOT_A_COMPLETION)
        raw_calls = message.get("tool_calls") or []
        if not isinstance(raw_calls, list):
            raise _malformed("a tool call that is not an object")
        offered = {tool.name for tool in request.tools}
        calls = [
            _tool_call(call, offered, f"call_{request.turn_index}_{i}")
            for i, call in enumerate(raw_calls)
            if not (isinstance(call, dict) and call.get("type", "function") != "function")
        ]
        text = check_semantic(_text(message.get("content")), calls)
        usage = body.get("usage")
        return ModelReply(
            text=text,
            tool_calls=calls,
            usage=Usage(
                input_tokens=_tokens(usage, "prompt_tokens"),
                output_tokens=_tokens(usage, "completion_tokens"),
            ),
            provider_ref=self.spec.ref,
            model=self.spec.model,
        )
