"""Anthropic Messages provider against a real HTTP server running in the test process."""

from __future__ import annotations

import logging
import traceback
from typing import Any

import pytest

pytest.importorskip("anthropic")

from agents_app.snapshot import ProviderSpec  # noqa: E402
from runs_app.engine.providers import (  # noqa: E402
    AllProvidersFailed,
    ChatMessage,
    ChatRequest,
    InvalidCompletion,
    ProviderError,
    ToolCallRequest,
    ToolSpec,
    Usage,
    build_provider,
)
from runs_app.engine.providers.anthropic_messages import AnthropicProvider, base_url_for  # noqa: E402

from .test_providers_openai import BODY_MARKER, SECRET, FakeServer, Reply, failure, servers  # noqa: E402, F401


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CLAWBOARD_TEST_KEY", SECRET)
    return SECRET


@pytest.fixture
def server(servers: list[FakeServer]) -> FakeServer:  # noqa: F811
    servers.append(FakeServer())
    return servers[0]


def message(*content: dict[str, Any], input_tokens: int = 0, output_tokens: int = 0) -> Reply:
    return Reply(
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": list(content),
            "stop_reason": "tool_use" if any(c["type"] == "tool_use" for c in content) else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
    )


def spec(uri: str, **fields: Any) -> ProviderSpec:
    fields.setdefault("model", "claude-test")
    return ProviderSpec(type="anthropic", alias="claude", uri=uri, api_key_env="CLAWBOARD_TEST_KEY", **fields)


def request(prompt: str = "hello", **fields: Any) -> ChatRequest:
    return ChatRequest(
        messages=[ChatMessage("system", "be brief"), ChatMessage("user", prompt)],
        agent="alice",
        prompt=prompt,
        **fields,
    )


def test_plain_answer(server: FakeServer) -> None:
    server.replies.append(message({"type": "text", "text": "Four."}, input_tokens=9, output_tokens=2))
    reply = AnthropicProvider(spec(server.url, temperature=0.1)).complete(request("2+2?"))
    assert (reply.text, reply.usage) == ("Four.", Usage(9, 2))
    assert (reply.provider_ref, reply.model) == ("anthropic.claude", "claude-test")
    [sent] = server.requests
    assert sent["path"] == "/v1/messages"
    # the official client chooses the header (x-api-key or a bearer token); either carries the key
    assert SECRET in (sent["x-api-key"], sent["authorization"].removeprefix("Bearer "))
    assert sent["body"] == {
        "model": "claude-test",
        "max_tokens": 4096,
        "system": "be brief",
        "temperature": 0.1,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "2+2?"}]}],
    }


def test_tool_use_then_tool_results_merged_into_one_user_turn(server: FakeServer) -> None:
    tool = ToolSpec(
        "file_read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}
    )
    server.replies.append(
        message(
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "toolu_1", "name": "file_read", "input": {"path": "a.txt"}},
            {"type": "tool_use", "id": "toolu_2", "name": "file_read", "input": {"path": "b.txt"}},
        )
    )
    provider = AnthropicProvider(spec(server.url, max_tokens=100))
    first = provider.complete(request("read", tools=[tool]))
    assert first.text == "Reading."
    assert first.tool_calls == [
        ToolCallRequest("toolu_1", "file_read", {"path": "a.txt"}),
        ToolCallRequest("toolu_2", "file_read", {"path": "b.txt"}),
    ]
    assert server.requests[0]["body"]["tools"] == [
        {"name": "file_read", "description": "Read a file", "input_schema": tool.parameters}
    ]
    assert server.requests[0]["body"]["max_tokens"] == 100

    server.replies.append(message({"type": "text", "text": "done"}))
    follow_up = request("read", tools=[tool], turn_index=1)
    follow_up.messages += [
        ChatMessage("assistant", "Reading.", tool_calls=first.tool_calls),
        ChatMessage("tool", "A", tool_call_id="toolu_1"),
        ChatMessage("tool", "Error: not found", tool_call_id="toolu_2"),
    ]
    assert provider.complete(follow_up).text == "done"
    assert server.requests[1]["body"]["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {"type": "tool_use", "id": "toolu_1", "name": "file_read", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "toolu_2", "name": "file_read", "input": {"path": "b.txt"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "A"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "Error: not found"},
            ],
        },
    ]


def test_think_only_is_invalid_completion(server: FakeServer) -> None:
    server.replies.append(message({"type": "text", "text": "<think>hmm</think>"}))
    with pytest.raises(InvalidCompletion):
        AnthropicProvider(spec(server.url)).complete(request())


def test_errors_retry_timeout_and_no_leaks(server: FakeServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server.replies += [failure(529), message({"type": "text", "text": "back"})]
    provider = build_provider(spec(server.url), {}, backoff_secs=0.01)
    assert provider.complete(request()).text == "back"

    server.replies += [Reply(delay=2, body={}), failure(400)]
    with pytest.raises(AllProvidersFailed) as info:
        build_provider(spec(server.url, timeout_secs=1), {}, backoff_secs=0.01).complete(request())
    assert str(info.value) == (
        "All model providers/models failed after 2 failure event(s). Events:\n"
        "event 1 (retry 1/2): anthropic.claude/claude-test: timeout\n"
        "event 2 (retry 2/2): anthropic.claude/claude-test: HTTP 400"
    )
    shown = "".join(traceback.format_exception(info.value))
    for leak in (SECRET, BODY_MARKER, server.url):
        assert leak not in shown
    assert SECRET not in caplog.text and BODY_MARKER not in caplog.text


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("", "https://api.anthropic.com"),
        ("https://api.anthropic.com/v1/", "https://api.anthropic.com"),
        ("http://proxy:8080", "http://proxy:8080"),
    ],
)
def test_base_url(uri: str, expected: str) -> None:
    assert base_url_for(ProviderSpec(type="anthropic", alias="c", uri=uri, model="m")) == expected


def test_requires_model() -> None:
    with pytest.raises(ProviderError, match="provider 'anthropic.c' has no model"):
        AnthropicProvider(ProviderSpec(type="anthropic", alias="c"))
