"""The OpenAI-compatible provider against a real server it did not write: llama-cpp-python's,
which rejects or ignores some of what OpenAI accepts. Each test shows the server's own
behaviour with a raw request first, then that the provider sends the form both accept, or
turns the server's failure into a short reason naming the candidate, and that the fallback
chain moves on.

What the real server cannot be made to send (a body that is not JSON, a tool call with broken
arguments or an unknown tool: its grammar keeps tool calls well formed) comes from a small
HTTP server of the test's own, here for the run as a whole and in
tests/runs_app/test_providers_openai.py for the provider."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from agents_app.snapshot import ProviderSpec
from runs_app.engine.providers import (
    ChatMessage,
    ChatRequest,
    OpenAICompatProvider,
    ToolSpec,
    build_provider,
)
from runs_app.engine.tools.registry import ALL_SPECS
from runs_app.models import RunEvent
from runs_app.services import run_start
from tests.realmodel import server as model
from tests.realmodel.conftest import configure_real, real_agent, real_provider
from tests.runs_app.helpers import wait_for
from tests.runs_app.model_http import KeepAliveServer
from tests.runs_app.test_providers_openai import Reply, completion

LOOKUP = ToolSpec(**ALL_SPECS["memory_recall"])
SYSTEM = "You look things up. Always call a function before you answer."
QUESTION = "What do you remember?"
# About 850 tokens: more than the small server's whole context of 512.
PADDING = "Waves and more waves. " * 160


@pytest.fixture(scope="session")
def small_server(model_server: model.ModelServer) -> Iterator[model.ModelServer]:
    """A second server of the same model with the smallest context llama.cpp allows (512),
    as an operator's undersized local server would be."""
    server = model.start(context=512)
    try:
        yield server
    finally:
        server.stop()


def spec(server: model.ModelServer, alias: str = "smol", **fields: Any) -> ProviderSpec:
    values: dict[str, Any] = {
        "type": "openai",
        "alias": alias,
        "model": model.MODEL_ALIAS,
        "uri": server.url,
        "temperature": 0.0,
        "timeout_secs": model.CALL_TIMEOUT_SECS,
        "max_tokens": 32,
    }
    values.update(fields)
    return ProviderSpec(**values)


def ask(prompt: str = QUESTION, **fields: Any) -> ChatRequest:
    return ChatRequest(
        messages=[ChatMessage("system", SYSTEM), ChatMessage("user", prompt)],
        agent="looker",
        prompt=prompt,
        **fields,
    )


def raw(messages: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {"model": model.MODEL_ALIAS, "messages": messages, "temperature": 0, **fields}


def wire_tool(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": SYSTEM},
    {"role": "user", "content": QUESTION},
]


def test_tools_reach_the_model_only_when_tool_choice_is_said(model_server: model.ModelServer) -> None:
    status, body = model_server.chat(raw(MESSAGES, tools=[wire_tool(LOOKUP)], max_tokens=8))
    assert status == 200
    assert isinstance(body, dict) and not body["choices"][0]["message"].get("tool_calls")

    reply = OpenAICompatProvider(spec(model_server)).complete(ask(tools=[LOOKUP]))
    assert [call.name for call in reply.tool_calls] == ["memory_recall"]
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0


def test_an_assistant_turn_that_only_called_tools_is_sent_with_empty_content(
    model_server: model.ModelServer,
) -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "memory_recall", "arguments": '{"query": "x"}'},
    }
    turn: list[dict[str, Any]] = [
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "nothing stored"},
    ]
    status, _ = model_server.chat(raw(MESSAGES + turn, max_tokens=4))
    assert status == 500  # what OpenAI accepts, this server refuses

    provider = OpenAICompatProvider(spec(model_server))
    first = provider.complete(ask(tools=[LOOKUP]))
    assert first.tool_calls and first.text == ""
    follow_up = ask(tools=[LOOKUP], turn_index=1)
    follow_up.messages += [
        ChatMessage("assistant", first.text, tool_calls=first.tool_calls),
        *(ChatMessage("tool", "nothing stored", tool_call_id=call.id) for call in first.tool_calls),
    ]
    second = provider.complete(follow_up)
    assert second.text or second.tool_calls


def test_max_tokens_is_sent_since_this_server_ignores_max_completion_tokens(
    model_server: model.ModelServer,
) -> None:
    status, body = model_server.chat(raw(MESSAGES, max_completion_tokens=2, max_tokens=6))
    assert status == 200 and isinstance(body, dict)
    assert body["usage"]["completion_tokens"] == 6

    reply = OpenAICompatProvider(spec(model_server, max_tokens=3)).complete(ask())
    assert 0 < reply.usage.output_tokens <= 3


def test_every_tool_schema_of_clawboard_is_taken(model_server: model.ModelServer) -> None:
    tools = [ToolSpec(**schema) for schema in ALL_SPECS.values()]
    reply = OpenAICompatProvider(spec(model_server)).complete(ask(tools=tools))
    assert reply.text or reply.tool_calls
    assert {call.name for call in reply.tool_calls} <= set(ALL_SPECS)


def test_a_prompt_over_the_context_is_not_retried_and_the_next_candidate_serves(
    model_server: model.ModelServer, small_server: model.ModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="runs_app")
    status, body = small_server.chat(raw([{"role": "user", "content": PADDING}], max_tokens=4))
    assert status == 400 and isinstance(body, dict)
    assert body["error"]["code"] == "context_length_exceeded"

    small = spec(small_server, alias="small", fallback=("openai.smol",))
    smol = spec(model_server)
    provider = build_provider(small, {small.ref: small, smol.ref: smol}, backoff_secs=0)
    reply = provider.complete(ask(PADDING))
    assert (reply.provider_ref, reply.model) == ("openai.smol", model.MODEL_ALIAS)
    failures = [r.getMessage() for r in caplog.records if r.getMessage().startswith("model call failed")]
    assert failures == [
        f"model call failed: provider=openai.small model={model.MODEL_ALIAS} attempt=1/2 reason=HTTP 400"
    ]


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_only_provider_cannot_take_its_prompt_fails_naming_the_provider(
    engine: object, small_server: model.ModelServer, model_server: model.ModelServer
) -> None:
    configure_real(
        model_server,
        real_provider("small", small_server.url),
        real_agent(
            "cramped",
            tools=["memory_recall"],
            system_prompt=SYSTEM + " " + PADDING,
            provider="openai.small",
        ),
    )
    run = wait_for(run_start(agent="cramped", prompt=QUESTION).pk, timeout=300)
    assert run.status == "failed"
    assert run.error == (
        "All model providers/models failed after 1 failure event(s). Events:\n"
        f"event 1 (retry 1/2): openai.small/{model.MODEL_ALIAS}: HTTP 400"
    )
    assert run.turns == 0


@pytest.fixture
def garbage() -> Iterator[KeepAliveServer]:
    server = KeepAliveServer()
    try:
        yield server
    finally:
        server.close()


@pytest.mark.django_db(transaction=True)
def test_a_run_whose_first_provider_answers_garbage_is_served_by_the_real_model(
    engine: object, garbage: KeepAliveServer, model_server: model.ModelServer
) -> None:
    broken_call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "memory_recall", "arguments": "{oops"},
    }
    unknown = {"id": "c2", "type": "function", "function": {"name": "format_disk", "arguments": "{}"}}
    garbage.queue(
        Reply(200, "<html>502 Bad Gateway</html>"),
        completion(None, [broken_call]),
        completion(None, [unknown]),
        Reply(200, "still not json"),
    )
    configure_real(
        model_server,
        real_provider("garbage", garbage.url + "/v1", fallback=["openai.smol"], timeout_secs=10),
        real_agent(
            "patched",
            tools=["memory_recall"],
            system_prompt=SYSTEM,
            provider="openai.garbage",
            runtime={"max_tool_iterations": 2},
        ),
    )
    run = wait_for(run_start(agent="patched", prompt=QUESTION).pk, timeout=600)
    assert not run.error.startswith("internal error"), run.error
    responses = list(RunEvent.objects.filter(run=run, type="model.response").order_by("id"))
    # Every turn: both attempts on the garbage server failed, then the real model answered.
    assert run.turns == len(responses) >= 1
    assert [e.data["provider"] for e in responses] == ["openai.smol"] * run.turns
    assert len(garbage.requests) == 2 * run.turns
    if run.status == "failed":  # it called a tool in both turns
        assert (run.error, run.turns) == ("Agent exceeded maximum tool iterations (2)", 2)
    else:
        assert run.status == "completed" and run.output


@pytest.mark.django_db(transaction=True)
def test_the_garbage_is_attributed_when_nothing_else_serves(
    engine: object, garbage: KeepAliveServer, model_server: model.ModelServer
) -> None:
    garbage.queue(
        Reply(200, "not json"),
        completion(None, [{"id": "c", "type": "function", "function": {"name": "x", "arguments": "{}"}}]),
    )
    configure_real(
        model_server,
        real_provider("garbage", garbage.url + "/v1", timeout_secs=10),
        real_agent("broken", tools=["memory_recall"], system_prompt=SYSTEM, provider="openai.garbage"),
    )
    run = wait_for(run_start(agent="broken", prompt=QUESTION).pk, timeout=120)
    assert (run.status, run.turns) == ("failed", 0)
    assert run.error == (
        "All model providers/models failed after 2 failure event(s). Events:\n"
        f"event 1 (retry 1/2): openai.garbage/{model.MODEL_ALIAS}: invalid response: the body is not JSON\n"
        f"event 2 (retry 2/2): openai.garbage/{model.MODEL_ALIAS}: malformed tool call: a tool that was not offered"
    )
