"""`anthropic` family: the Anthropic Messages API through the official client (SPEC §8.2).

Same contract as the OpenAI-compatible provider: one attempt per call (`max_retries=0`), the key
read from the environment at call time, failures reduced to short reasons without endpoint,
key or body; `complete` blocks, `acomplete` awaits; clients built once (clients.py).
"""

from __future__ import annotations

from typing import Any

import anthropic
from anthropic.types import Message

from agents_app.secrets import provider_api_key
from agents_app.snapshot import ProviderSpec

from .base import (
    ChatMessage,
    ChatRequest,
    InvalidCompletion,
    ModelReply,
    ProviderError,
    ToolCallRequest,
    Usage,
    check_semantic,
)
from .clients import ClientCache, ClientKey

DEFAULT_BASE_URL = "https://api.anthropic.com"
# The Messages API requires max_tokens; used when neither the request nor the spec sets one.
DEFAULT_MAX_TOKENS = 4096
_RETRYABLE_STATUS = {408, 409, 425, 429}


def base_url_for(spec: ProviderSpec) -> str:
    uri = spec.uri.strip().rstrip("/") or DEFAULT_BASE_URL
    # The client appends /v1/messages itself; accept a uri written with /v1 too.
    return uri[: -len("/v1")] if uri.endswith("/v1") else uri


def _blocks(message: ChatMessage) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [{"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.content}]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
    blocks += [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        for call in message.tool_calls
    ]
    return blocks


def wire_messages(messages: list[ChatMessage]) -> tuple[str, list[dict[str, Any]]]:
    """System text, and turns that alternate user/assistant as the API requires.

    Tool results travel as user turns, so consecutive tool and user messages merge into one.
    """
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += blocks
        else:
            turns.append({"role": role, "content": blocks})
    return system, turns


def _reason(exc: Exception) -> ProviderError:
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderError("timeout")
    if isinstance(exc, anthropic.APIConnectionError):
        return ProviderError("connection error")
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        return ProviderError(f"HTTP {status}", retryable=status >= 500 or status in _RETRYABLE_STATUS)
    return ProviderError("invalid response")


def _build_sync(key: ClientKey) -> anthropic.Anthropic:
    base_url, api_key, timeout = key
    return anthropic.Anthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)


def _build_async(key: ClientKey) -> anthropic.AsyncAnthropic:
    base_url, api_key, timeout = key
    return anthropic.AsyncAnthropic(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)


# One client per (base URL, key, timeout) and process (and event loop, for the async ones).
CLIENTS: ClientCache[anthropic.Anthropic, anthropic.AsyncAnthropic] = ClientCache(_build_sync, _build_async)


class AnthropicProvider:
    instant = False  # every call is a network round trip

    def __init__(self, spec: ProviderSpec) -> None:
        if not spec.model:
            raise ProviderError(f"provider '{spec.ref}' has no model", retryable=False)
        self.spec = spec
        self.base_url = base_url_for(spec)

    def _client_key(self) -> ClientKey:
        return (self.base_url, provider_api_key(self.spec) or "none", float(self.spec.timeout_secs))

    def complete(self, request: ChatRequest) -> ModelReply:
        params = self._params(request)
        try:
            response = CLIENTS.sync_client(self._client_key()).messages.create(**params)
        except (anthropic.AnthropicError, ValueError) as exc:
            # `from None`: the cause's text may hold the URL or the response body.
            raise _reason(exc) from None
        return self._reply(response)

    async def acomplete(self, request: ChatRequest) -> ModelReply:
        params = self._params(request)
        try:
            response = await CLIENTS.async_client(self._client_key()).messages.create(**params)
        except (anthropic.AnthropicError, ValueError) as exc:
            raise _reason(exc) from None
        return self._reply(response)

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        spec = self.spec
        system, turns = wire_messages(request.messages)
        max_tokens = request.max_tokens if request.max_tokens is not None else spec.max_tokens
        params: dict[str, Any] = {
            "model": spec.model,
            "messages": turns,
            "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
        }
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": t.parameters}
                for t in request.tools
            ]
        temperature = request.temperature if request.temperature is not None else spec.temperature
        if temperature is not None:
            # Recent clients no longer take `temperature` as an argument; the wire field remains.
            params["extra_body"] = {"temperature": temperature}
        return params

    def _reply(self, response: Message) -> ModelReply:
        texts: list[str] = []
        calls: list[ToolCallRequest] = []
        for block in response.content or []:
            if block.type == "text":
                texts.append(block.text)
            elif block.type == "tool_use":
                if not isinstance(block.input, dict):
                    raise InvalidCompletion("invalid tool call arguments")
                calls.append(ToolCallRequest(id=block.id, name=block.name, arguments=dict(block.input)))
        text = check_semantic("".join(texts), calls)
        usage = response.usage
        return ModelReply(
            text=text,
            tool_calls=calls,
            usage=Usage(
                input_tokens=(usage.input_tokens or 0) if usage else 0,
                output_tokens=(usage.output_tokens or 0) if usage else 0,
            ),
            provider_ref=self.spec.ref,
            model=self.spec.model,
        )
