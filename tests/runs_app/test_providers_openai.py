"""OpenAI-compatible provider against a real HTTP server running in the test process."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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
    ToolCallRequest,
    ToolSpec,
    Usage,
    build_provider,
)
from runs_app.engine.providers.openai_compat import base_url_for

SECRET = "sk-test-SECRET-4f1d9c"
BODY_MARKER = "upstream-body-detail-7731"


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | str = field(default_factory=dict)
    delay: float = 0.0


def completion(
    content: str | None = "", tool_calls: list[dict[str, Any]] | None = None, **usage: int
) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "served-by-server",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": usage.get("prompt", 0),
            "completion_tokens": usage.get("completion", 0),
            "total_tokens": usage.get("prompt", 0) + usage.get("completion", 0),
        },
    }
    return Reply(200, body)


def failure(status: int) -> Reply:
    return Reply(status, {"error": {"message": f"{BODY_MARKER} {SECRET}", "type": "server_error"}})


class FakeServer:
    """Answers any POST (/v1/chat/completions, /v1/messages) with queued replies in order, then HTTP 500."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                fake.requests.append(
                    {
                        "path": self.path,
                        "authorization": self.headers.get("Authorization", ""),
                        "x-api-key": self.headers.get("x-api-key", ""),
                        "body": json.loads(self.rfile.read(length) or b"{}"),
                    }
                )
                reply = fake.replies.pop(0) if fake.replies else failure(500)
                if reply.delay:
                    time.sleep(reply.delay)
                payload = (reply.body if isinstance(reply.body, str) else json.dumps(reply.body)).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except OSError:
                    pass  # the client gave up (timeout test)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers() -> Iterator[list[FakeServer]]:
    started: list[FakeServer] = []
    yield started
    for server in started:
        server.close()


@pytest.fixture
def server(servers: list[FakeServer]) -> FakeServer:
    servers.append(FakeServer())
    return servers[0]


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("CLAWBOARD_TEST_KEY", SECRET)
    return SECRET


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def spec(uri: str, alias: str = "main", type: str = "openai", **fields: Any) -> ProviderSpec:
    fields.setdefault("model", "gpt-test")
    return ProviderSpec(type=type, alias=alias, uri=uri + "/v1", api_key_env="CLAWBOARD_TEST_KEY", **fields)


def request(prompt: str = "hello", **fields: Any) -> ChatRequest:
    return ChatRequest(
        messages=[ChatMessage("system", "be brief"), ChatMessage("user", prompt)],
        agent="alice",
        prompt=prompt,
        **fields,
    )


def reliable(*chain: ProviderSpec, retries: int = 2) -> ReliableProvider:
    return ReliableProvider(list(chain), retries=retries, backoff_secs=0.01)


def test_plain_answer(server: FakeServer) -> None:
    server.replies.append(completion("<think>let me see</think>The answer is 4.", prompt=12, completion=5))
    provider = OpenAICompatProvider(spec(server.url, temperature=0.2, max_tokens=256))
    reply = provider.complete(request("2+2?"))

    assert reply.text == "The answer is 4."
    assert reply.tool_calls == []
    assert reply.usage == Usage(12, 5)
    assert (reply.provider_ref, reply.model) == ("openai.main", "gpt-test")
    [sent] = server.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["authorization"] == f"Bearer {SECRET}"
    assert sent["body"]["model"] == "gpt-test"
    assert sent["body"]["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "2+2?"},
    ]
    assert sent["body"]["temperature"] == 0.2
    assert sent["body"]["max_tokens"] == 256
    assert "tools" not in sent["body"]


def test_request_overrides_and_key_placeholder(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAWBOARD_TEST_KEY", "")
    server.replies.append(completion("ok"))
    provider = OpenAICompatProvider(spec(server.url, temperature=0.2))
    provider.complete(request(temperature=0.9, max_tokens=10))
    body = server.requests[0]["body"]
    assert (body["temperature"], body["max_tokens"]) == (0.9, 10)
    assert server.requests[0]["authorization"] == "Bearer none"


def test_key_is_read_at_call_time(server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> None:
    provider = OpenAICompatProvider(spec(server.url))
    monkeypatch.setenv("CLAWBOARD_TEST_KEY", "rotated-key")
    server.replies.append(completion("ok"))
    provider.complete(request())
    assert server.requests[0]["authorization"] == "Bearer rotated-key"


def test_tool_call_answer_then_tool_results(server: FakeServer) -> None:
    tool = ToolSpec(
        "file_read",
        "Read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )
    server.replies.append(
        completion(
            None,
            [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "file_read", "arguments": '{"path": "a.txt"}'},
                },
                {"id": "call_def", "type": "function", "function": {"name": "file_read", "arguments": ""}},
            ],
            prompt=20,
            completion=9,
        )
    )
    provider = OpenAICompatProvider(spec(server.url))
    first = provider.complete(request("read a.txt", tools=[tool]))
    assert first.text == ""
    assert first.tool_calls == [
        ToolCallRequest("call_abc", "file_read", {"path": "a.txt"}),
        ToolCallRequest("call_def", "file_read", {}),
    ]
    assert server.requests[0]["body"]["tools"] == [
        {
            "type": "function",
            "function": {"name": "file_read", "description": "Read a file", "parameters": tool.parameters},
        }
    ]

    server.replies.append(completion("a.txt says hi"))
    follow_up = request(
        "read a.txt",
        tools=[tool],
        turn_index=1,
        tool_results=["hi", "Error: Missing 'path' parameter"],
    )
    follow_up.messages += [
        ChatMessage("assistant", "", tool_calls=first.tool_calls),
        ChatMessage("tool", "hi", tool_call_id="call_abc"),
        ChatMessage("tool", "Error: Missing 'path' parameter", tool_call_id="call_def"),
    ]
    second = provider.complete(follow_up)
    assert second.text == "a.txt says hi"
    assert server.requests[1]["body"]["messages"][2:] == [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_abc",
                    "type": "function",
                    "function": {"name": "file_read", "arguments": '{"path": "a.txt"}'},
                },
                {"id": "call_def", "type": "function", "function": {"name": "file_read", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": "hi"},
        {"role": "tool", "tool_call_id": "call_def", "content": "Error: Missing 'path' parameter"},
    ]


@pytest.mark.parametrize("content", ["", "   ", "<think>only thinking</think>", None])
def test_empty_or_think_only_is_invalid_semantic_completion(server: FakeServer, content: str | None) -> None:
    server.replies.append(completion(content))
    with pytest.raises(InvalidCompletion) as info:
        OpenAICompatProvider(spec(server.url)).complete(request())
    assert info.value.reason == "invalid semantic completion"


SHELL = ToolSpec("shell", "Run a command", {"type": "object", "properties": {"command": {"type": "string"}}})


def call(name: Any, arguments: Any, **extra: Any) -> dict[str, Any]:
    return {"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}} | extra


def test_tools_are_offered_with_tool_choice_auto(server: FakeServer) -> None:
    # OpenAI's default when tools are sent; llama-cpp-python's function-calling chat formats
    # ignore the tools without it (tests/realmodel/test_provider_quirks.py).
    server.replies += [completion("with tools"), completion("without")]
    provider = OpenAICompatProvider(spec(server.url))
    provider.complete(request(tools=[SHELL]))
    provider.complete(request())
    assert server.requests[0]["body"]["tool_choice"] == "auto"
    assert "tool_choice" not in server.requests[1]["body"]
    assert "tools" not in server.requests[1]["body"]


@pytest.mark.parametrize(
    ("tool_call", "reason"),
    [
        (call("shell", "{oops"), "malformed tool call: the arguments of 'shell' are not a JSON object"),
        (call("shell", "[1, 2]"), "malformed tool call: the arguments of 'shell' are not a JSON object"),
        (call("shell", 7), "malformed tool call: the arguments of 'shell' are not a JSON object"),
        (call("rm_rf", "{}"), "malformed tool call: a tool that was not offered"),
        (call("", "{}"), "malformed tool call: a tool call without a name"),
        (call(3, "{}"), "malformed tool call: a tool call without a name"),
        ({"id": "c1", "type": "function"}, "malformed tool call: a tool call without a name"),
        ("shell", "malformed tool call: a tool call that is not an object"),
    ],
)
def test_malformed_tool_call_is_a_provider_failure_not_an_empty_answer(
    server: FakeServer, tool_call: Any, reason: str
) -> None:
    server.replies.append(completion(None, [tool_call]))
    with pytest.raises(ProviderError) as info:
        OpenAICompatProvider(spec(server.url)).complete(request(tools=[SHELL]))
    assert info.value.reason == reason
    assert info.value.retryable
    assert not isinstance(info.value, InvalidCompletion)


def test_tool_call_arguments_as_an_object_or_without_type_are_accepted(server: FakeServer) -> None:
    # Some OpenAI-compatible servers send the arguments parsed, or leave `type` out.
    server.replies.append(
        completion(
            None, [call("shell", {"command": "ls"}), {"function": {"name": "shell", "arguments": None}}]
        )
    )
    reply = OpenAICompatProvider(spec(server.url)).complete(request(tools=[SHELL], turn_index=4))
    assert reply.tool_calls == [
        ToolCallRequest("c1", "shell", {"command": "ls"}),
        ToolCallRequest("call_4_1", "shell", {}),
    ]


def test_a_call_id_too_long_to_keep_or_missing_is_replaced_by_one_unique_in_the_run(
    server: FakeServer,
) -> None:
    long_id = "call__0_" + "x" * 60 + "_cmpl-0d6c4f3e-8a53-4c0b-9a47-1f1b5b8c2f10"
    server.replies.append(
        completion(
            None,
            [call("shell", "{}", id=long_id), call("shell", "{}", id=""), call("shell", "{}", id="c" * 64)],
        )
    )
    reply = OpenAICompatProvider(spec(server.url)).complete(request(tools=[SHELL], turn_index=2))
    assert [c.id for c in reply.tool_calls] == ["call_2_0", "call_2_1", "c" * 64]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ("not json", "invalid response: the body is not JSON"),
        ("<html>502 Bad Gateway</html>", "invalid response: the body is not JSON"),
        ({}, "invalid response: not a chat completion"),
        ([], "invalid response: not a chat completion"),
        ({"choices": "x"}, "invalid response: not a chat completion"),
        ({"choices": [{"message": "hi"}]}, "invalid response: not a chat completion"),
        ({"error": {"message": "overloaded"}}, "invalid response: not a chat completion"),
    ],
)
def test_body_that_is_not_a_chat_completion_is_an_invalid_response(
    server: FakeServer, body: Any, reason: str
) -> None:
    # Only a server of the test's own sends these: the real one always answers JSON.
    server.replies.append(Reply(200, body if isinstance(body, str) else json.dumps(body)))
    with pytest.raises(ProviderError) as info:
        OpenAICompatProvider(spec(server.url)).complete(request())
    assert info.value.reason == reason
    assert info.value.retryable


async def test_async_call_gives_the_same_reasons(server: FakeServer) -> None:
    server.replies += [Reply(200, "not json"), completion(None, [call("rm_rf", "{}")])]
    provider = OpenAICompatProvider(spec(server.url))
    with pytest.raises(ProviderError, match="^invalid response: the body is not JSON$"):
        await provider.acomplete(request())
    with pytest.raises(ProviderError, match="^malformed tool call: a tool that was not offered$"):
        await provider.acomplete(request(tools=[SHELL]))


def test_malformed_answers_move_on_to_the_fallback_named_in_the_error(servers: list[FakeServer]) -> None:
    primary_server, backup_server = FakeServer(), FakeServer()
    servers += [primary_server, backup_server]
    primary_server.replies += [Reply(200, "not json"), completion(None, [call("shell", "{oops")])]
    backup_server.replies += [completion(None, [call("rm_rf", "{}")])] * 2
    primary = spec(primary_server.url, alias="primary", fallback=("vllm.backup",))
    backup = spec(backup_server.url, alias="backup", type="vllm", model="qwen")
    provider = build_provider(primary, {primary.ref: primary, backup.ref: backup}, backoff_secs=0)
    with pytest.raises(AllProvidersFailed) as info:
        provider.complete(request(tools=[SHELL]))
    assert str(info.value) == (
        "All model providers/models failed after 4 failure event(s). Events:\n"
        "event 1 (retry 1/2): openai.primary/gpt-test: invalid response: the body is not JSON\n"
        "event 2 (retry 2/2): openai.primary/gpt-test: malformed tool call: the arguments of 'shell' "
        "are not a JSON object\n"
        "event 3 (retry 1/2): vllm.backup/qwen: malformed tool call: a tool that was not offered\n"
        "event 4 (retry 2/2): vllm.backup/qwen: malformed tool call: a tool that was not offered"
    )
    assert not info.value.invalid_completion


def test_http_500_then_recovery_by_retry(server: FakeServer) -> None:
    server.replies += [failure(500), completion("recovered")]
    provider = reliable(spec(server.url))
    reply = provider.complete(request())
    assert reply.text == "recovered"
    assert len(server.requests) == 2
    assert (reply.provider_ref, reply.model) == ("openai.main", "gpt-test")
    assert not provider.is_fallback(reply)


def test_client_error_is_not_retried_on_the_same_model(server: FakeServer) -> None:
    server.replies += [failure(401), completion("never asked")]
    with pytest.raises(AllProvidersFailed) as info:
        reliable(spec(server.url)).complete(request())
    assert len(server.requests) == 1
    assert str(info.value).endswith("event 1 (retry 1/2): openai.main/gpt-test: HTTP 401")


def test_timeout(server: FakeServer) -> None:
    server.replies.append(Reply(delay=2.5, body=completion("too late").body))
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        OpenAICompatProvider(spec(server.url, timeout_secs=1)).complete(request())
    assert info.value.reason == "timeout"
    assert time.monotonic() - started < 2.4

    server.replies += [Reply(delay=2.5, body=completion("late").body), completion("in time")]
    reply = reliable(spec(server.url, timeout_secs=1)).complete(request())
    assert reply.text == "in time"


def test_connection_error() -> None:
    with pytest.raises(ProviderError) as info:
        OpenAICompatProvider(spec(closed_port_url())).complete(request())
    assert info.value.reason == "connection error"


def test_fallback_provider_recovers_with_attribution(servers: list[FakeServer]) -> None:
    primary_server, backup_server = FakeServer(), FakeServer()
    servers += [primary_server, backup_server]
    backup_server.replies.append(completion("served by backup", prompt=3, completion=4))
    primary = spec(primary_server.url, alias="primary", fallback=("ollama.backup",))
    backup = spec(backup_server.url, alias="backup", type="ollama", model="llama3")
    provider = build_provider(primary, {primary.ref: primary, backup.ref: backup}, backoff_secs=0.01)

    reply = provider.complete(request())
    assert reply.text == "served by backup"
    assert reply.usage == Usage(3, 4)
    assert (provider.requested_ref, provider.requested_model) == ("openai.primary", "gpt-test")
    assert (reply.provider_ref, reply.model) == ("ollama.backup", "llama3")
    assert provider.is_fallback(reply)
    assert len(primary_server.requests) == 2
    assert backup_server.requests[0]["body"]["model"] == "llama3"


def test_fallback_model_on_the_same_endpoint(server: FakeServer) -> None:
    server.replies += [failure(404), completion("small model here")]
    provider = reliable(spec(server.url, fallback_models=("gpt-small",)))
    reply = provider.complete(request())
    assert [r["body"]["model"] for r in server.requests] == ["gpt-test", "gpt-small"]
    assert (reply.provider_ref, reply.model) == ("openai.main", "gpt-small")
    assert provider.is_fallback(reply)


def test_aggregate_error_text_whole(servers: list[FakeServer], caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    server = FakeServer()
    servers.append(server)
    server.replies += [failure(500), completion("<think>nothing to say</think>"), failure(404)]
    dead = closed_port_url()
    primary = spec(server.url, alias="primary", fallback_models=("gpt-small",), fallback=("vllm.local",))
    local = spec(dead, alias="local", type="vllm", model="qwen")
    provider = build_provider(primary, {primary.ref: primary, local.ref: local}, backoff_secs=0.01)

    with pytest.raises(AllProvidersFailed) as info:
        provider.complete(request())

    assert str(info.value) == (
        "All model providers/models failed after 5 failure event(s). Events:\n"
        "event 1 (retry 1/2): openai.primary/gpt-test: HTTP 500\n"
        "event 2 (retry 2/2): openai.primary/gpt-test: invalid semantic completion\n"
        "event 3 (retry 1/2): openai.primary/gpt-small: HTTP 404\n"
        "event 4 (retry 1/2): vllm.local/qwen: connection error\n"
        "event 5 (retry 2/2): vllm.local/qwen: connection error"
    )
    assert not info.value.invalid_completion
    assert [(e.provider_ref, e.model) for e in info.value.events] == [
        ("openai.primary", "gpt-test"),
        ("openai.primary", "gpt-test"),
        ("openai.primary", "gpt-small"),
        ("vllm.local", "qwen"),
        ("vllm.local", "qwen"),
    ]
    shown = "".join(traceback.format_exception(info.value)) + repr(info.value)
    # Third-party HTTP loggers may name the endpoint; ours never do.
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("runs_app"))
    assert "model call failed: provider=openai.primary model=gpt-test attempt=1/2 reason=HTTP 500" in ours
    for leak in (SECRET, BODY_MARKER, server.url, dead, "127.0.0.1"):
        assert leak not in shown
        assert leak not in ours
    for leak in (SECRET, BODY_MARKER):
        assert leak not in caplog.text


def test_api_key_never_in_exception_text_or_logs(
    servers: list[FakeServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = FakeServer()
    servers.append(server)
    texts: list[str] = []

    server.replies.append(completion("fine"))
    reliable(spec(server.url)).complete(request())
    for reply in (failure(500), failure(401), failure(429), Reply(200, "not json"), Reply(delay=2, body={})):
        server.replies.append(reply)
        try:
            OpenAICompatProvider(spec(server.url, timeout_secs=1)).complete(request())
        except ProviderError as exc:
            texts.append("".join(traceback.format_exception(exc)) + repr(exc))
    server.replies += [failure(503)] * 4
    with pytest.raises(AllProvidersFailed) as info:
        reliable(spec(server.url), spec(closed_port_url(), alias="b")).complete(request())
    texts.append("".join(traceback.format_exception(info.value)))

    assert len(texts) == 6
    assert all(r["authorization"] == f"Bearer {SECRET}" for r in server.requests)  # the key was really used
    assert caplog.records  # and logging was really captured
    for text in [*texts, caplog.text]:
        assert SECRET not in text
        assert BODY_MARKER not in text


@pytest.mark.parametrize(
    ("type", "uri", "expected"),
    [
        ("ollama", "http://localhost:11434", "http://localhost:11434/v1"),
        ("ollama", "http://localhost:11434/", "http://localhost:11434/v1"),
        ("ollama", "http://gpu-box:11434/v1", "http://gpu-box:11434/v1"),
        ("ollama", "", "http://localhost:11434/v1"),
        ("openai", "", "https://api.openai.com/v1"),
        ("vllm", "http://localhost:8000/v1/", "http://localhost:8000/v1"),
        ("openrouter", "https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1"),
    ],
)
def test_base_url(type: str, uri: str, expected: str) -> None:
    assert base_url_for(ProviderSpec(type=type, alias="x", uri=uri, model="m")) == expected


def test_unknown_family_without_uri_or_model_fails_at_build() -> None:
    with pytest.raises(ProviderError, match="provider 'custom.x' has no uri"):
        OpenAICompatProvider(ProviderSpec(type="custom", alias="x", model="m"))
    with pytest.raises(ProviderError, match="provider 'openai.x' has no model"):
        OpenAICompatProvider(ProviderSpec(type="openai", alias="x"))
