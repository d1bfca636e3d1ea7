from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest

from agents_app.snapshot import ProviderSpec
from runs_app.engine.providers import (
    AllProvidersFailed,
    ChatMessage,
    ChatRequest,
    FailureEvent,
    InvalidCompletion,
    ModelProvider,
    ModelReply,
    ProviderError,
    ReliableProvider,
    Usage,
    build_provider,
    format_failure,
    resolve_chain,
)

HEADER = "All model providers/models failed after {n} failure event(s). Events:"


def request() -> ChatRequest:
    return ChatRequest(messages=[ChatMessage("user", "go")], agent="alice", prompt="go")


class Fake:
    """Plays outcomes in order: an exception to raise, or text to answer."""

    instant = True

    def __init__(self, spec: ProviderSpec, outcomes: list[Exception | str], calls: list[str]) -> None:
        self.spec = spec
        self.outcomes = outcomes
        self.calls = calls

    def complete(self, request: ChatRequest) -> ModelReply:
        self.calls.append(f"{self.spec.ref}/{self.spec.model}")
        outcome = self.outcomes.pop(0) if self.outcomes else ProviderError("exhausted")
        if isinstance(outcome, Exception):
            raise outcome
        return ModelReply(outcome, [], Usage(1, 1), "ignored", "ignored")

    async def acomplete(self, request: ChatRequest) -> ModelReply:
        return self.complete(request)


def fakes(
    plan: dict[str, list[Exception | str]], calls: list[str]
) -> Callable[[ProviderSpec], ModelProvider]:
    def build(spec: ProviderSpec) -> ModelProvider:
        key = f"{spec.ref}/{spec.model}"
        if key not in plan:
            raise ProviderError(f"cannot build {key}", retryable=False)
        return Fake(spec, plan[key], calls)

    return build


def p(ref: str, model: str = "m", **fields: Any) -> ProviderSpec:
    type_, alias = ref.split(".")
    return ProviderSpec(type=type_, alias=alias, model=model, **fields)


def test_fallbacks_resolve_depth_first_once_each_skipping_unknown(caplog: pytest.LogCaptureFixture) -> None:
    a = p("openai.a", fallback=("openai.b", "openai.c"))
    b = p("openai.b", fallback=("openai.d", "openai.a", "openai.ghost"))
    c = p("openai.c", fallback=("openai.b",))
    d = p("openai.d")
    lookup = {s.ref: s for s in (a, b, c, d)}
    assert [s.ref for s in resolve_chain(a, lookup)] == ["openai.a", "openai.b", "openai.d", "openai.c"]
    assert "fallback provider openai.ghost is not configured" in caplog.text


def test_order_of_attempts_models_then_providers() -> None:
    calls: list[str] = []
    chain = [p("openai.a", "m1", fallback_models=("m2", "m1", "")), p("ollama.b", "llama")]
    plan: dict[str, list[Exception | str]] = {
        "openai.a/m1": [ProviderError("HTTP 500"), ProviderError("timeout")],
        "openai.a/m2": [ProviderError("HTTP 502"), ProviderError("HTTP 503")],
        "ollama.b/llama": [ProviderError("connection error"), "finally"],
    }
    provider = ReliableProvider(chain, fakes(plan, calls), backoff_secs=0)
    reply = provider.complete(request())
    assert calls == [
        "openai.a/m1",
        "openai.a/m1",
        "openai.a/m2",
        "openai.a/m2",
        "ollama.b/llama",
        "ollama.b/llama",
    ]
    assert (reply.text, reply.provider_ref, reply.model) == ("finally", "ollama.b", "llama")
    assert (provider.requested_ref, provider.requested_model) == ("openai.a", "m1")
    assert provider.is_fallback(reply)


def test_exponential_backoff_between_attempts_on_one_model() -> None:
    sleeps: list[float] = []
    calls: list[str] = []
    plan: dict[str, list[Exception | str]] = {"openai.a/m": [ProviderError("x")] * 3, "openai.b/m": ["ok"]}
    provider = ReliableProvider(
        [p("openai.a"), p("openai.b")], fakes(plan, calls), retries=3, backoff_secs=0.5, sleep=sleeps.append
    )
    assert provider.complete(request()).text == "ok"
    assert sleeps == [0.5, 1.0]  # none after the last attempt, none between candidates


def test_non_retryable_error_moves_to_next_candidate_at_once() -> None:
    calls: list[str] = []
    plan: dict[str, list[Exception | str]] = {
        "openai.a/m": [ProviderError("HTTP 401", retryable=False), "unused"],
        "openai.b/m": ["ok"],
    }
    provider = ReliableProvider([p("openai.a"), p("openai.b")], fakes(plan, calls), backoff_secs=0)
    reply = provider.complete(request())
    assert calls == ["openai.a/m", "openai.b/m"]
    assert reply.provider_ref == "openai.b"


def test_aggregate_text_lists_eight_events_then_the_rest_omitted() -> None:
    chain = [p(f"openai.p{i}") for i in range(5)]
    plan: dict[str, list[Exception | str]] = {
        f"openai.p{i}/m": [ProviderError(f"HTTP 50{i}"), ProviderError("timeout")] for i in range(5)
    }
    with pytest.raises(AllProvidersFailed) as info:
        ReliableProvider(chain, fakes(plan, []), backoff_secs=0).complete(request())
    assert str(info.value) == "\n".join(
        [
            HEADER.format(n=10),
            "event 1 (retry 1/2): openai.p0/m: HTTP 500",
            "event 2 (retry 2/2): openai.p0/m: timeout",
            "event 3 (retry 1/2): openai.p1/m: HTTP 501",
            "event 4 (retry 2/2): openai.p1/m: timeout",
            "event 5 (retry 1/2): openai.p2/m: HTTP 502",
            "event 6 (retry 2/2): openai.p2/m: timeout",
            "event 7 (retry 1/2): openai.p3/m: HTTP 503",
            "event 8 (retry 2/2): openai.p3/m: timeout",
            "[2 additional failure event(s) omitted]",
        ]
    )
    assert len(info.value.events) == 10


def test_exactly_eight_events_has_no_omitted_line() -> None:
    events = [FailureEvent("openai.a", "m", 1, 1, "timeout")] * 8
    text = format_failure(events)
    assert text.count("\n") == 8
    assert "omitted" not in text


def test_aggregate_stays_within_2048_bytes_and_one_line_per_event() -> None:
    long_reason = "é\n" * 2000
    plan: dict[str, list[Exception | str]] = {
        f"openai.p{i}/m": [ProviderError(long_reason)] * 2 for i in range(6)
    }
    with pytest.raises(AllProvidersFailed) as info:
        ReliableProvider([p(f"openai.p{i}") for i in range(6)], fakes(plan, []), backoff_secs=0).complete(
            request()
        )
    text = str(info.value)
    assert len(text.encode("utf-8")) <= 2048
    lines = text.split("\n")
    assert lines[0] == HEADER.format(n=12)
    assert len(lines) == 10 and lines[-1] == "[4 additional failure event(s) omitted]"
    assert all(line.startswith(f"event {i} (retry ") for i, line in enumerate(lines[1:9], start=1))
    assert len(format_failure([FailureEvent("a", "m", 1, 1, "x" * 5000)]).encode()) <= 2048


def test_unexpected_exception_is_an_event_without_its_text() -> None:
    plan: dict[str, list[Exception | str]] = {"openai.a/m": [KeyError("http://secret-host/"), "ok"]}
    reply = ReliableProvider([p("openai.a")], fakes(plan, []), backoff_secs=0).complete(request())
    assert reply.text == "ok"
    plan = {"openai.a/m": [RuntimeError("http://secret-host/")] * 2}
    with pytest.raises(AllProvidersFailed) as info:
        ReliableProvider([p("openai.a")], fakes(plan, []), backoff_secs=0).complete(request())
    assert str(info.value).endswith("event 2 (retry 2/2): openai.a/m: unexpected error (RuntimeError)")
    assert "secret-host" not in str(info.value)


def test_invalid_completion_flag_only_when_every_event_is_one() -> None:
    plan: dict[str, list[Exception | str]] = {"openai.a/m": [InvalidCompletion(), InvalidCompletion()]}
    with pytest.raises(AllProvidersFailed) as info:
        ReliableProvider([p("openai.a")], fakes(plan, []), backoff_secs=0).complete(request())
    assert info.value.invalid_completion
    assert str(info.value).endswith("event 2 (retry 2/2): openai.a/m: invalid semantic completion")

    plan = {"openai.a/m": [InvalidCompletion(), ProviderError("timeout")]}
    with pytest.raises(AllProvidersFailed) as info:
        ReliableProvider([p("openai.a")], fakes(plan, []), backoff_secs=0).complete(request())
    assert not info.value.invalid_completion


def test_primary_build_failure_raises_at_creation_fallback_build_failure_is_an_event() -> None:
    with pytest.raises(ProviderError, match="cannot build openai.a/m"):
        ReliableProvider([p("openai.a")], fakes({}, []))
    plan: dict[str, list[Exception | str]] = {"openai.a/m": [ProviderError("timeout")] * 2}
    with pytest.raises(AllProvidersFailed) as info:
        ReliableProvider([p("openai.a"), p("openai.b")], fakes(plan, []), backoff_secs=0).complete(request())
    assert str(info.value).endswith("event 3 (retry 1/2): openai.b/m: cannot build openai.b/m")


def test_failures_are_logged_without_leaking(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    plan: dict[str, list[Exception | str]] = {"openai.a/m": [ProviderError("HTTP 500"), "ok"]}
    ReliableProvider([p("openai.a")], fakes(plan, []), backoff_secs=0).complete(request())
    assert [r.getMessage() for r in caplog.records] == [
        "model call failed: provider=openai.a model=m attempt=1/2 reason=HTTP 500",
        "model call recovered: provider=openai.a model=m after 1 failure event(s)",
    ]


# --- build_provider with real (offline) providers ------------------------------------------


def scripted(alias: str, script: object, **fields: Any) -> ProviderSpec:
    return ProviderSpec(type="scripted", alias=alias, script=script, **fields)


def test_build_provider_scripted_with_scripted_fallback() -> None:
    primary = scripted("flaky", [{"turns": [{"error": "rate limited"}]}], fallback=("scripted.steady",))
    steady = scripted("steady", [{"turns": [{"say": "steady for {{agent}}"}]}], model="steady-1")
    provider = build_provider(primary, {primary.ref: primary, steady.ref: steady}, backoff_secs=0)
    reply = provider.complete(request())
    assert reply.text == "steady for alice"
    assert (provider.requested_ref, provider.requested_model) == ("scripted.flaky", "scripted")
    assert (reply.provider_ref, reply.model) == ("scripted.steady", "steady-1")
    assert provider.is_fallback(reply)


def test_build_provider_scripted_error_exhausts_retries() -> None:
    spec = scripted("demo", [{"turns": [{"error": "model exploded"}]}])
    with pytest.raises(AllProvidersFailed) as info:
        build_provider(spec, {spec.ref: spec}, backoff_secs=0).complete(request())
    assert str(info.value) == "\n".join(
        [
            HEADER.format(n=2),
            "event 1 (retry 1/2): scripted.demo/scripted: model exploded",
            "event 2 (retry 2/2): scripted.demo/scripted: model exploded",
        ]
    )


def test_build_provider_failures_at_creation() -> None:
    bad = scripted("bad", [{"turns": "nope"}])
    with pytest.raises(ProviderError, match=r"invalid script: script\[0\].turns: must be a non-empty list"):
        build_provider(bad, {})
    no_model = ProviderSpec(type="openai", alias="o")
    with pytest.raises(ProviderError, match="provider 'openai.o' has no model"):
        build_provider(no_model, {})


PLANS: list[dict[str, list[Exception | str]]] = [
    {"openai.a/m1": [ProviderError("HTTP 500"), "first retry"]},
    {
        "openai.a/m1": [ProviderError("HTTP 500"), ProviderError("timeout"), ProviderError("HTTP 502")],
        "openai.a/m2": [ProviderError("HTTP 401", retryable=False), "unused"],
        "ollama.b/llama": [InvalidCompletion(), "finally"],
    },
    {
        "openai.a/m1": [RuntimeError("boom"), InvalidCompletion(), InvalidCompletion()],
        "openai.a/m2": [ProviderError("HTTP 404", retryable=False)],
        "ollama.b/llama": [ProviderError("connection error")] * 3,
    },
]


async def walk(sync: bool, plan: dict[str, list[Exception | str]]) -> tuple[list[str], list[float], str]:
    """(calls made, back-off sleeps, outcome) of one call through a two-provider chain."""
    chain = [p("openai.a", "m1", fallback_models=("m2",)), p("ollama.b", "llama")]
    calls: list[str] = []
    sleeps: list[float] = []

    async def asleep(seconds: float) -> None:
        sleeps.append(seconds)

    copy = {key: list(values) for key, values in plan.items()}
    provider = ReliableProvider(
        chain, fakes(copy, calls), retries=3, backoff_secs=0.5, sleep=sleeps.append, asleep=asleep
    )
    try:
        reply = provider.complete(request()) if sync else await provider.acomplete(request())
        outcome = f"{reply.text} from {reply.provider_ref}/{reply.model}"
    except AllProvidersFailed as exc:
        outcome = str(exc)
    return calls, sleeps, outcome


@pytest.mark.parametrize("plan", PLANS)
async def test_acomplete_walks_the_chain_exactly_like_complete(
    plan: dict[str, list[Exception | str]],
) -> None:
    walked = await walk(True, plan)
    assert await walk(False, plan) == walked
    assert walked[0] and walked[1]  # calls were made, and backed off between attempts
