from __future__ import annotations

from typing import Any

import pytest

from agents_app.snapshot import ProviderSpec
from runs_app.engine.providers import (
    ChatMessage,
    ChatRequest,
    InvalidCompletion,
    ProviderError,
    ScriptedProvider,
    ToolCallRequest,
    Usage,
    cost_cents,
)


def provider(script: Any, sleeps: list[float] | None = None, **spec: Any) -> ScriptedProvider:
    recorded = sleeps if sleeps is not None else []
    return ScriptedProvider(
        ProviderSpec(type="scripted", alias="demo", script=script, **spec), sleep=recorded.append
    )


def ask(
    p: ScriptedProvider, prompt: str = "hello", turn: int = 0, tool_results: list[str] | None = None
) -> Any:
    return p.complete(
        ChatRequest(
            messages=[ChatMessage("user", prompt)],
            agent="alice",
            prompt=prompt,
            turn_index=turn,
            tool_results=tool_results or [],
        )
    )


def test_say_turn_with_substitutions_and_attribution() -> None:
    p = provider([{"turns": [{"say": "{{agent}} got {{prompt}}"}]}])
    reply = ask(p, "sum 2 2")
    assert reply.text == "alice got sum 2 2"
    assert reply.tool_calls == []
    assert (reply.provider_ref, reply.model) == ("scripted.demo", "scripted")


def test_model_name_from_spec() -> None:
    assert ask(provider([{"turns": [{"say": "x"}]}], model="m1")).model == "m1"


def test_tool_calls_turn_substitutes_recursively_with_deterministic_ids() -> None:
    script = [
        {
            "turns": [
                {
                    "tool_calls": [
                        {"name": "file_write", "arguments": {"path": "a.txt", "content": "{{prompt}}"}},
                        {
                            "name": "delegate",
                            "arguments": {
                                "agent": "bob",
                                "prompt": "from {{agent}}",
                                "nested": {"list": ["{{agent}}", 3, {"deep": "{{prompt}}!"}]},
                                "{{agent}}": True,
                            },
                        },
                    ]
                },
                {"say": "results:\n{{tool_results}}"},
            ]
        }
    ]
    p = provider(script)
    first = ask(p, "write it", turn=0)
    assert first.text == ""
    assert first.tool_calls == [
        ToolCallRequest("call_0_0", "file_write", {"path": "a.txt", "content": "write it"}),
        ToolCallRequest(
            "call_0_1",
            "delegate",
            {
                "agent": "bob",
                "prompt": "from alice",
                "nested": {"list": ["alice", 3, {"deep": "write it!"}]},
                "{{agent}}": True,  # keys are not substituted
            },
        ),
    ]
    second = ask(p, "write it", turn=1, tool_results=["ok", "Error: boom"])
    assert second.text == "results:\nok\n\nError: boom"


def test_substituted_text_is_not_substituted_again() -> None:
    reply = ask(provider([{"turns": [{"say": "[{{prompt}}]"}]}]), "{{agent}}")
    assert reply.text == "[{{agent}}]"


def test_error_turn_raises_provider_error() -> None:
    p = provider([{"turns": [{"error": "model exploded"}]}])
    with pytest.raises(ProviderError) as info:
        ask(p)
    assert str(info.value) == info.value.reason == "model exploded"
    assert not isinstance(info.value, InvalidCompletion)


def test_sleep_is_folded_into_the_next_turn() -> None:
    sleeps: list[float] = []
    p = provider(
        [{"turns": [{"say": "a"}, {"sleep_ms": 150}, {"sleep_ms": 50}, {"say": "b"}, {"sleep_ms": 20}]}],
        sleeps,
    )
    assert ask(p, turn=0).text == "a"
    assert sleeps == []
    assert ask(p, turn=1).text == "b"
    assert sleeps == [0.2]
    # trailing sleeps delay the first reply past the last turn, which replays the last say
    assert ask(p, turn=2).text == "b"
    assert sleeps == [0.2, 0.02]
    assert ask(p, turn=3).text == "b"
    assert sleeps == [0.2, 0.02]


def test_past_the_last_turn_says_the_last_say() -> None:
    p = provider([{"turns": [{"say": "first"}, {"say": "last {{prompt}}"}, {"tool_calls": [{"name": "t"}]}]}])
    assert ask(p, "x", turn=1).text == "last x"
    assert ask(p, "x", turn=2).tool_calls == [ToolCallRequest("call_2_0", "t", {})]
    assert ask(p, "x", turn=3).text == "last x"
    assert ask(p, "x", turn=50).text == "last x"


def test_past_the_last_turn_without_any_say_is_a_clear_error() -> None:
    p = provider([{"turns": [{"tool_calls": [{"name": "t"}]}]}])
    with pytest.raises(ProviderError, match=r"script\[0\] has no 'say' turn") as info:
        ask(p, turn=1)
    assert info.value.retryable is False


def test_first_matching_rule_wins_and_no_match_means_always() -> None:
    p = provider(
        [
            {"match": "^deploy", "turns": [{"say": "deploying"}]},
            {"match": "report", "turns": [{"say": "report one"}]},
            {"match": "rep", "turns": [{"say": "report two"}]},
            {"turns": [{"say": "fallback"}]},
        ]
    )
    assert ask(p, "deploy now").text == "deploying"
    assert ask(p, "now deploy").text == "fallback"
    assert ask(p, "the report").text == "report one"
    assert ask(p, "rules").text == "fallback"
    assert ask(p, "reptile").text == "report two"


def test_rules_match_the_task_text_not_later_messages() -> None:
    p = provider([{"match": "task", "turns": [{"say": "matched"}]}])
    request = ChatRequest(
        messages=[ChatMessage("user", "the task"), ChatMessage("tool", "nothing here", tool_call_id="c")],
        prompt="the task",
        turn_index=0,
    )
    assert p.complete(request).text == "matched"


def test_no_matching_rule() -> None:
    p = provider([{"match": "x", "turns": [{"say": "y"}]}])
    with pytest.raises(ProviderError, match="no rule matching the prompt"):
        ask(p, "abc")
    with pytest.raises(ProviderError, match="no rule matching"):
        ask(provider([]))


def test_usage_explicit_and_estimated() -> None:
    p = provider(
        [{"turns": [{"say": "one two three", "usage": {"input": 100, "output": 7}}, {"say": "four five"}]}]
    )
    assert ask(p, turn=0).usage == Usage(100, 7)
    request = ChatRequest(
        messages=[ChatMessage("system", "be brief"), ChatMessage("user", "a b c")],
        prompt="a b c",
        turn_index=1,
    )
    assert p.complete(request).usage == Usage(input_tokens=5, output_tokens=2)


def test_empty_or_think_only_say_is_an_invalid_completion() -> None:
    for say in ("", "   ", "<think>hmm</think>", "<think>cut off"):
        with pytest.raises(InvalidCompletion) as info:
            ask(provider([{"turns": [{"say": say}]}]))
        assert info.value.reason == "invalid semantic completion"
    assert ask(provider([{"turns": [{"say": "<think>x</think> answer"}]}])).text == "answer"


def test_script_as_json_text() -> None:
    assert ask(provider('[{"turns": [{"say": "from json"}]}]')).text == "from json"


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ({"turns": []}, "invalid script: script: must be a list of rules"),
        ("{not json", "invalid script: script: is not valid JSON"),
        (["rule"], 'invalid script: script[0]: must be an object {"match": "<regex>", "turns": [...]}'),
        ([{"turns": []}], "invalid script: script[0].turns: must be a non-empty list"),
        (
            [{"match": "(", "turns": [{"say": "x"}]}],
            "invalid script: script[0].match: invalid regular expression",
        ),
        ([{"match": 3, "turns": [{"say": "x"}]}], "invalid script: script[0].match: must be a string"),
        (
            [{"turns": [{"say": "x", "error": "y"}]}],
            "invalid script: script[0].turns[0]: must have exactly one of say, tool_calls, error, sleep_ms",
        ),
        ([{"turns": [{"shout": "x"}]}], "invalid script: script[0].turns[0]: unknown key(s) shout"),
        (
            [{"turns": [{"sleep_ms": -1}]}],
            "invalid script: script[0].turns[0].sleep_ms: must be a non-negative integer",
        ),
        ([{"turns": [{"say": 3}]}], "invalid script: script[0].turns[0].say: must be a string"),
        (
            [{"turns": [{"tool_calls": []}]}],
            "invalid script: script[0].turns[0].tool_calls: must be a non-empty list",
        ),
        (
            [{"turns": [{"tool_calls": [{"name": ""}]}]}],
            "invalid script: script[0].turns[0].tool_calls[0].name: must be a non-empty string",
        ),
        (
            [{"turns": [{"tool_calls": [{"name": "t", "arguments": [1]}]}]}],
            "invalid script: script[0].turns[0].tool_calls[0].arguments: must be an object",
        ),
        (
            [{"turns": [{"say": "x", "usage": {"input": "many"}}]}],
            "invalid script: script[0].turns[0].usage.input: must be a non-negative integer",
        ),
    ],
)
def test_bad_script_shape_fails_at_construction(script: Any, message: str) -> None:
    with pytest.raises(ProviderError) as info:
        provider(script)
    assert str(info.value).startswith(message)
    assert info.value.retryable is False


def test_cost_cents_from_pricing_per_million_tokens() -> None:
    spec = ProviderSpec(type="openai", alias="x", input_per_mtok_cents=300, output_per_mtok_cents=1500)
    assert cost_cents(spec, Usage(1_000_000, 0)) == 300
    assert cost_cents(spec, Usage(2000, 1000)) == pytest.approx(0.6 + 1.5)
    assert cost_cents(ProviderSpec(type="scripted", alias="d"), Usage(5, 5)) == 0


def test_estimated_input_counts_the_whole_conversation_as_it_grows() -> None:
    # Each turn counts only what was added since the last one, with the same result as
    # counting every message again; a conversation that shares no message starts from zero.
    p = provider([{"turns": [{"say": "ok"}]}])
    conversation = [ChatMessage("system", "be brief"), ChatMessage("user", "a b c")]
    other = [ChatMessage("user", "x y")]
    for turn in range(6):
        expected = sum(len(m.content.split()) for m in conversation)
        request = ChatRequest(messages=list(conversation), prompt="a b c", turn_index=0)
        assert p.complete(request).usage.input_tokens == expected, turn
        alone = ChatRequest(messages=list(other), prompt="x y", turn_index=0)
        assert p.complete(alone).usage.input_tokens == 2
        conversation += [ChatMessage("assistant", "w " * turn), ChatMessage("tool", f"r{turn} s t")]
    # a new list of fresh messages with the same text counts the same
    copy = [ChatMessage(m.role, m.content) for m in conversation[:3]]
    request = ChatRequest(messages=copy, prompt="a b c", turn_index=0)
    assert p.complete(request).usage.input_tokens == sum(len(m.content.split()) for m in copy)
