"""`acomplete` of every provider, and HTTP clients built once, against a real local HTTP server."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from agents_app.snapshot import ProviderSpec
from runs_app.engine.providers import (
    AllProvidersFailed,
    ChatMessage,
    ChatRequest,
    InvalidCompletion,
    OpenAICompatProvider,
    ProviderError,
    ReliableProvider,
    ScriptedProvider,
    ToolCallRequest,
    ToolSpec,
    Usage,
    build_provider,
)
from runs_app.engine.providers.anthropic_messages import AnthropicProvider

from .model_http import KeepAliveServer
from .test_providers_openai import SECRET, Reply, closed_port_url, completion, failure


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CLAWBOARD_TEST_KEY", SECRET)
    return SECRET


@pytest.fixture
def servers() -> Iterator[list[KeepAliveServer]]:
    started: list[KeepAliveServer] = []
    yield started
    for server in started:
        server.close()


@pytest.fixture
def server(servers: list[KeepAliveServer]) -> KeepAliveServer:
    servers.append(KeepAliveServer())
    return servers[0]


def openai_spec(uri: str, alias: str = "main", **fields: Any) -> ProviderSpec:
    fields.setdefault("model", "gpt-test")
    return ProviderSpec(
        type="openai", alias=alias, uri=uri + "/v1", api_key_env="CLAWBOARD_TEST_KEY", **fields
    )


def anthropic_spec(uri: str, **fields: Any) -> ProviderSpec:
    fields.setdefault("model", "claude-test")
    return ProviderSpec(type="anthropic", alias="claude", uri=uri, api_key_env="CLAWBOARD_TEST_KEY", **fields)


def request(prompt: str = "hello", **fields: Any) -> ChatRequest:
    return ChatRequest(
        messages=[ChatMessage("system", "be brief"), ChatMessage("user", prompt)],
        agent="alice",
        prompt=prompt,
        **fields,
    )


def anthropic_message(*content: dict[str, Any], input_tokens: int = 0, output_tokens: int = 0) -> Reply:
    return Reply(
        200,
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": list(content),
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
    )


FILE_READ = ToolSpec(
    "file_read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}}}
)


# -- OpenAI-compatible ------------------------------------------------------------------------


async def test_openai_acomplete_sends_and_parses_like_complete(server: KeepAliveServer) -> None:
    tool_call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "file_read", "arguments": '{"path": "a"}'},
    }
    server.queue(
        completion("<think>hm</think>Four.", prompt=12, completion=5),
        completion(None, [tool_call], prompt=3, completion=2),
        completion("<think>hm</think>Four.", prompt=12, completion=5),
        completion(None, [tool_call], prompt=3, completion=2),
    )
    provider = OpenAICompatProvider(openai_spec(server.url, temperature=0.2, max_tokens=64))
    replies = [
        await provider.acomplete(request("2+2?")),
        await provider.acomplete(request("read", tools=[FILE_READ])),
        provider.complete(request("2+2?")),
        provider.complete(request("read", tools=[FILE_READ])),
    ]
    assert replies[0] == replies[2]
    assert replies[1] == replies[3]
    assert (replies[0].text, replies[0].usage, replies[0].provider_ref) == (
        "Four.",
        Usage(12, 5),
        "openai.main",
    )
    assert replies[1].tool_calls == [ToolCallRequest("call_1", "file_read", {"path": "a"})]
    bodies = [r["body"] for r in server.requests]
    assert bodies[0] == bodies[2] and bodies[1] == bodies[3]
    assert (bodies[0]["temperature"], bodies[0]["max_tokens"]) == (0.2, 64)
    assert server.requests[0]["path"] == "/v1/chat/completions"


@pytest.mark.parametrize(
    ("reply", "reason", "retryable"),
    [
        (failure(500), "HTTP 500", True),
        (failure(429), "HTTP 429", True),
        (failure(401), "HTTP 401", False),
        (Reply(200, "not json"), "invalid response: the body is not JSON", True),
    ],
)
async def test_openai_acomplete_errors_are_the_same_reasons(
    server: KeepAliveServer, reply: Reply, reason: str, retryable: bool
) -> None:
    server.queue(reply, reply)
    provider = OpenAICompatProvider(openai_spec(server.url))
    with pytest.raises(ProviderError) as async_info:
        await provider.acomplete(request())
    with pytest.raises(ProviderError) as sync_info:
        provider.complete(request())
    assert (async_info.value.reason, async_info.value.retryable) == (reason, retryable)
    assert (sync_info.value.reason, sync_info.value.retryable) == (reason, retryable)


async def test_openai_acomplete_invalid_completion_timeout_and_connection_error(
    server: KeepAliveServer,
) -> None:
    server.queue(completion("<think>only</think>"), Reply(delay=2.5, body=completion("late").body))
    provider = OpenAICompatProvider(openai_spec(server.url, timeout_secs=1))
    with pytest.raises(InvalidCompletion):
        await provider.acomplete(request())
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await provider.acomplete(request())
    assert info.value.reason == "timeout"
    assert time.monotonic() - started < 2.4
    with pytest.raises(ProviderError) as info:
        await OpenAICompatProvider(openai_spec(closed_port_url())).acomplete(request())
    assert info.value.reason == "connection error"


async def test_openai_acomplete_reads_the_key_at_call_time(
    server: KeepAliveServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = OpenAICompatProvider(openai_spec(server.url))
    await provider.acomplete(request())
    monkeypatch.setenv("CLAWBOARD_TEST_KEY", "rotated-key")
    await provider.acomplete(request())
    provider.complete(request())
    seen = [r["authorization"] for r in server.requests]
    assert seen == [f"Bearer {SECRET}", "Bearer rotated-key", "Bearer rotated-key"]


# -- Anthropic ----------------------------------------------------------------------------------


async def test_anthropic_acomplete_sends_and_parses_like_complete(server: KeepAliveServer) -> None:
    answer = anthropic_message(
        {"type": "text", "text": "Reading."},
        {"type": "tool_use", "id": "toolu_1", "name": "file_read", "input": {"path": "a.txt"}},
        input_tokens=9,
        output_tokens=2,
    )
    server.queue(answer, answer)
    provider = AnthropicProvider(anthropic_spec(server.url, temperature=0.1))
    first = await provider.acomplete(request("read", tools=[FILE_READ]))
    second = provider.complete(request("read", tools=[FILE_READ]))
    assert first == second
    assert (first.text, first.usage, first.provider_ref) == ("Reading.", Usage(9, 2), "anthropic.claude")
    assert first.tool_calls == [ToolCallRequest("toolu_1", "file_read", {"path": "a.txt"})]
    assert [r["path"] for r in server.requests] == ["/v1/messages", "/v1/messages"]
    assert server.requests[0]["body"] == server.requests[1]["body"]
    assert server.requests[0]["body"]["temperature"] == 0.1


async def test_anthropic_acomplete_errors(server: KeepAliveServer) -> None:
    server.queue(failure(503), failure(400), anthropic_message({"type": "text", "text": "<think>x</think>"}))
    provider = AnthropicProvider(anthropic_spec(server.url))
    with pytest.raises(ProviderError) as info:
        await provider.acomplete(request())
    assert (info.value.reason, info.value.retryable) == ("HTTP 503", True)
    with pytest.raises(ProviderError) as info:
        await provider.acomplete(request())
    assert (info.value.reason, info.value.retryable) == ("HTTP 400", False)
    with pytest.raises(InvalidCompletion):
        await provider.acomplete(request())
    with pytest.raises(ProviderError) as info:
        await AnthropicProvider(anthropic_spec(closed_port_url())).acomplete(request())
    assert info.value.reason == "connection error"


# -- Scripted and instant -----------------------------------------------------------------------


async def test_scripted_acomplete_is_complete_and_instant() -> None:
    script = [
        {
            "turns": [
                {"tool_calls": [{"name": "file_read", "arguments": {"path": "{{prompt}}"}}]},
                {"say": "ok"},
            ]
        }
    ]
    provider = ScriptedProvider(ProviderSpec(type="scripted", alias="s", script=script))
    assert provider.instant is True
    first = await provider.acomplete(request("a.txt"))
    assert first == provider.complete(request("a.txt"))
    assert first.tool_calls == [ToolCallRequest("call_0_0", "file_read", {"path": "a.txt"})]
    assert (await provider.acomplete(request("a.txt", turn_index=1))).text == "ok"
    broken = ScriptedProvider(
        ProviderSpec(type="scripted", alias="s", script=[{"turns": [{"error": "boom"}]}])
    )
    with pytest.raises(ProviderError, match="boom"):
        await broken.acomplete(request())


def test_http_providers_are_not_instant_and_reliable_is_instant_only_if_every_candidate_is() -> None:
    scripted = ProviderSpec(type="scripted", alias="s", script=[{"turns": [{"say": "hi"}]}])
    backup = ProviderSpec(type="scripted", alias="t", script=[{"turns": [{"say": "hi"}]}])
    remote = openai_spec("http://127.0.0.1:9", alias="remote")
    assert OpenAICompatProvider(remote).instant is False
    assert AnthropicProvider(anthropic_spec("http://127.0.0.1:9")).instant is False
    assert ReliableProvider([scripted, backup]).instant is True
    assert ReliableProvider([scripted, remote]).instant is False
    assert ReliableProvider([remote]).instant is False


# -- ReliableProvider.acomplete -------------------------------------------------------------------


def reliable(*chain: ProviderSpec, retries: int = 2, sleeps: list[float] | None = None) -> ReliableProvider:
    recorded = sleeps if sleeps is not None else []

    async def asleep(seconds: float) -> None:
        recorded.append(seconds)

    def sleep(seconds: float) -> None:
        recorded.append(seconds)

    return ReliableProvider(list(chain), retries=retries, backoff_secs=0.5, sleep=sleep, asleep=asleep)


async def test_reliable_acomplete_retries_with_backoff_then_recovers(server: KeepAliveServer) -> None:
    sleeps: list[float] = []
    server.queue(failure(500), failure(502), completion("third time"))
    provider = reliable(openai_spec(server.url), retries=3, sleeps=sleeps)
    reply = await provider.acomplete(request())
    assert reply.text == "third time"
    assert sleeps == [0.5, 1.0]
    assert len(server.requests) == 3
    assert not provider.is_fallback(reply)


async def test_reliable_acomplete_non_retryable_moves_on_to_the_fallback_model(
    server: KeepAliveServer,
) -> None:
    sleeps: list[float] = []
    server.queue(failure(404), completion("small model here"))
    provider = reliable(openai_spec(server.url, fallback_models=("gpt-small",)), sleeps=sleeps)
    reply = await provider.acomplete(request())
    assert [r["body"]["model"] for r in server.requests] == ["gpt-test", "gpt-small"]
    assert (reply.provider_ref, reply.model) == ("openai.main", "gpt-small")
    assert sleeps == []
    assert provider.is_fallback(reply)


async def test_reliable_acomplete_falls_back_to_an_anthropic_provider(servers: list[KeepAliveServer]) -> None:
    primary_server, backup_server = KeepAliveServer(), KeepAliveServer()
    servers += [primary_server, backup_server]
    primary_server.queue(failure(503), failure(503))
    backup_server.queue(
        anthropic_message({"type": "text", "text": "served by claude"}, input_tokens=3, output_tokens=4)
    )
    primary = openai_spec(primary_server.url, alias="primary", fallback=("anthropic.claude",))
    backup = anthropic_spec(backup_server.url)
    provider = build_provider(primary, {primary.ref: primary, backup.ref: backup}, backoff_secs=0.01)
    reply = await provider.acomplete(request())
    assert (reply.text, reply.usage) == ("served by claude", Usage(3, 4))
    assert (reply.provider_ref, reply.model) == ("anthropic.claude", "claude-test")
    assert len(primary_server.requests) == 2
    assert provider.is_fallback(reply)


async def test_reliable_acomplete_all_failed_matches_complete(
    server: KeepAliveServer, caplog: pytest.LogCaptureFixture
) -> None:
    replies = [failure(500), completion("<think>nothing</think>"), failure(404)]
    primary = openai_spec(
        server.url, alias="primary", fallback_models=("gpt-small",), fallback=("vllm.local",)
    )
    local = ProviderSpec(type="vllm", alias="local", uri=closed_port_url() + "/v1", model="qwen")
    lookup = {primary.ref: primary, local.ref: local}

    server.queue(*replies)
    with pytest.raises(AllProvidersFailed) as async_info:
        await build_provider(primary, lookup, backoff_secs=0.01).acomplete(request())
    async_log = [r.getMessage() for r in caplog.records if r.name.startswith("runs_app")]
    caplog.clear()
    server.queue(*replies)
    with pytest.raises(AllProvidersFailed) as sync_info:
        build_provider(primary, lookup, backoff_secs=0.01).complete(request())
    sync_log = [r.getMessage() for r in caplog.records if r.name.startswith("runs_app")]

    assert str(async_info.value) == str(sync_info.value)
    assert async_info.value.events == sync_info.value.events
    assert str(async_info.value).startswith("All model providers/models failed after 5 failure event(s).")
    assert async_log == sync_log
    assert (
        "model call failed: provider=openai.primary model=gpt-test attempt=1/2 reason=HTTP 500" in async_log
    )


async def test_reliable_acomplete_unexpected_error_is_an_event_without_its_text() -> None:
    class Exploding:
        instant = False

        def complete(self, request: ChatRequest) -> Any:
            raise AssertionError("unused")

        async def acomplete(self, request: ChatRequest) -> Any:
            raise RuntimeError("secret detail")

    provider = ReliableProvider([openai_spec("http://127.0.0.1:9")], lambda spec: Exploding(), retries=1)
    with pytest.raises(AllProvidersFailed) as info:
        await provider.acomplete(request())
    assert info.value.events[0].reason == "unexpected error (RuntimeError)"
    assert "secret detail" not in str(info.value)


async def test_reliable_acomplete_lets_cancellation_through(server: KeepAliveServer) -> None:
    server.delay = 5
    provider = reliable(openai_spec(server.url))
    task = asyncio.ensure_future(provider.acomplete(request()))
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(server.requests) == 1  # cancelled, not retried


# -- Clients built once ---------------------------------------------------------------------------


def test_sequential_sync_calls_share_one_connection(server: KeepAliveServer) -> None:
    first = OpenAICompatProvider(openai_spec(server.url))
    second = OpenAICompatProvider(openai_spec(server.url))  # same settings: same client
    for i in range(20):
        assert (first if i % 2 else second).complete(request()).text == "ok"
    assert len(server.requests) == 20
    assert server.connections == 1


def test_sequential_sync_anthropic_calls_share_one_connection(server: KeepAliveServer) -> None:
    server.answer = lambda path, body: anthropic_message({"type": "text", "text": "ok"})
    provider = AnthropicProvider(anthropic_spec(server.url))
    for _ in range(20):
        assert provider.complete(request()).text == "ok"
    assert server.connections == 1


async def test_sequential_async_calls_share_one_connection(server: KeepAliveServer) -> None:
    provider = OpenAICompatProvider(openai_spec(server.url))
    for _ in range(20):
        assert (await provider.acomplete(request())).text == "ok"
    assert server.connections == 1

    server.answer = lambda path, body: anthropic_message({"type": "text", "text": "ok"})
    claude = AnthropicProvider(anthropic_spec(server.url))
    for _ in range(20):
        assert (await claude.acomplete(request())).text == "ok"
    assert server.connections == 2


def test_different_settings_get_different_clients(server: KeepAliveServer) -> None:
    OpenAICompatProvider(openai_spec(server.url)).complete(request())
    OpenAICompatProvider(openai_spec(server.url, timeout_secs=7)).complete(request())
    OpenAICompatProvider(openai_spec(server.url)).complete(request())
    assert server.connections == 2


def test_async_clients_are_not_shared_across_event_loops(server: KeepAliveServer) -> None:
    provider = OpenAICompatProvider(openai_spec(server.url))
    claude = AnthropicProvider(anthropic_spec(server.url))

    async def both() -> list[str]:
        server.answer = lambda path, body: (
            anthropic_message({"type": "text", "text": "ok"})
            if path.endswith("/messages")
            else completion("ok")
        )
        return [(await provider.acomplete(request())).text, (await claude.acomplete(request())).text]

    # A client whose connections belong to a closed loop fails ("Event loop is closed").
    assert asyncio.run(both()) == ["ok", "ok"]
    assert asyncio.run(both()) == ["ok", "ok"]
    assert server.connections == 4


async def test_concurrent_async_calls_are_all_in_flight_at_once(server: KeepAliveServer) -> None:
    server.delay = 0.2
    provider = OpenAICompatProvider(openai_spec(server.url))
    replies = await asyncio.gather(*(provider.acomplete(request(f"call {i}")) for i in range(50)))
    assert [r.text for r in replies] == ["ok"] * 50
    assert len(server.requests) == 50
    assert server.max_in_flight >= 40


async def test_concurrent_async_calls_through_reliable_provider(server: KeepAliveServer) -> None:
    server.delay = 0.2
    provider = reliable(openai_spec(server.url))
    replies = await asyncio.gather(*(provider.acomplete(request(f"call {i}")) for i in range(50)))
    assert all(r.text == "ok" for r in replies)
    assert server.max_in_flight >= 40
