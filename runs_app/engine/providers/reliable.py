"""Retries, back-off and fallbacks around single-endpoint providers (SPEC §2.1).

Order of candidates: the agent's provider, then its `fallback` providers depth-first (each one's
own fallbacks right after it, every provider at most once); within a provider, its `model`
then its `fallback_models`. Each (provider, model) gets up to `retries` attempts with
exponential back-off between them; a non-retryable error moves straight to the next candidate.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

from agents_app.snapshot import ProviderSpec

from .anthropic_messages import AnthropicProvider
from .base import ChatRequest, InvalidCompletion, ModelProvider, ModelReply, ProviderError, model_label
from .openai_compat import OpenAICompatProvider
from .scripted import ScriptedProvider

logger = logging.getLogger(__name__)

MAX_LISTED_EVENTS = 8
MAX_ERROR_BYTES = 2048
_MAX_REASON_BYTES = 200  # keeps 8 listed events well inside MAX_ERROR_BYTES


def _clip(text: str, limit: int) -> str:
    raw = text.encode("utf-8")
    return text if len(raw) <= limit else raw[:limit].decode("utf-8", "ignore")


@dataclass(frozen=True)
class FailureEvent:
    provider_ref: str
    model: str
    attempt: int
    attempts: int
    reason: str
    invalid_completion: bool = False


def format_failure(events: list[FailureEvent]) -> str:
    lines = [f"All model providers/models failed after {len(events)} failure event(s). Events:"]
    for i, event in enumerate(events[:MAX_LISTED_EVENTS], start=1):
        # The candidate's "<type>.<alias>/<model>" says which provider failed: what an
        # operator needs to fix a quirk. Never its endpoint, key or response body.
        lines.append(
            f"event {i} (retry {event.attempt}/{event.attempts}): "
            f"{event.provider_ref}/{event.model}: {event.reason}"
        )
    if len(events) > MAX_LISTED_EVENTS:
        lines.append(f"[{len(events) - MAX_LISTED_EVENTS} additional failure event(s) omitted]")
    return _clip("\n".join(lines), MAX_ERROR_BYTES)


class AllProvidersFailed(ProviderError):
    def __init__(self, events: list[FailureEvent]) -> None:
        super().__init__(format_failure(events), retryable=False)
        self.events = events

    @property
    def invalid_completion(self) -> bool:
        """Every candidate answered, but never with anything usable (SPEC §6.1's special message)."""
        return bool(self.events) and all(event.invalid_completion for event in self.events)


def resolve_chain(spec: ProviderSpec, lookup: Mapping[str, ProviderSpec]) -> list[ProviderSpec]:
    chain: list[ProviderSpec] = []
    seen: set[str] = set()

    def visit(current: ProviderSpec) -> None:
        if current.ref in seen:
            return
        seen.add(current.ref)
        chain.append(current)
        for ref in current.fallback:
            target = lookup.get(ref)
            if target is None:
                # Skipped rather than fatal: a dangling fallback must not break a working primary.
                logger.warning(
                    "provider %s: fallback provider %s is not configured; skipped", current.ref, ref
                )
                continue
            visit(target)

    visit(spec)
    return chain


def build_single(spec: ProviderSpec) -> ModelProvider:
    if spec.type == "scripted":
        return ScriptedProvider(spec)
    if spec.type == "anthropic":
        return AnthropicProvider(spec)
    return OpenAICompatProvider(spec)


class _Attempts:
    """The bookkeeping of one call through the chain, shared by `complete` and `acomplete`.

    Iterating yields (candidate, attempt number) in the order they are tried; `failed` records
    a failure as an event (and logs it) and says how long to back off before the next attempt;
    `served` logs a recovery and attributes the reply; `exhausted` is the final error.
    """

    def __init__(self, owner: ReliableProvider) -> None:
        self.owner = owner
        self.events: list[FailureEvent] = []
        self._skip_rest = False

    def __iter__(self) -> Iterator[tuple[ProviderSpec, int]]:
        for spec in self.owner.candidates():
            self._skip_rest = False
            for attempt in range(1, self.owner.retries + 1):
                yield spec, attempt
                if self._skip_rest:
                    break

    def failed(self, spec: ProviderSpec, attempt: int, exc: Exception) -> float:
        """Record the failure; the seconds to sleep before the next attempt (0: none)."""
        retries = self.owner.retries
        if isinstance(exc, ProviderError):
            reason, retryable = exc.reason, exc.retryable
        else:
            # Unexpected errors may carry anything in their text; keep only the type.
            reason, retryable = f"unexpected error ({type(exc).__name__})", True
        event = FailureEvent(
            provider_ref=spec.ref,
            model=model_label(spec),
            attempt=attempt,
            attempts=retries,
            reason=_clip(" ".join(reason.split()), _MAX_REASON_BYTES),
            invalid_completion=isinstance(exc, InvalidCompletion),
        )
        self.events.append(event)
        logger.warning(
            "model call failed: provider=%s model=%s attempt=%d/%d reason=%s",
            event.provider_ref,
            event.model,
            attempt,
            retries,
            event.reason,
        )
        if not retryable:
            self._skip_rest = True
            return 0.0
        return self.owner.backoff_secs * 2 ** (attempt - 1) if attempt < retries else 0.0

    def served(self, spec: ProviderSpec, reply: ModelReply) -> ModelReply:
        if self.events:
            logger.warning(
                "model call recovered: provider=%s model=%s after %d failure event(s)",
                spec.ref,
                model_label(spec),
                len(self.events),
            )
        return dataclasses.replace(reply, provider_ref=spec.ref, model=model_label(spec))

    def exhausted(self) -> AllProvidersFailed:
        return AllProvidersFailed(self.events)


class ReliableProvider:
    def __init__(
        self,
        chain: list[ProviderSpec],
        build: Callable[[ProviderSpec], ModelProvider] = build_single,
        *,
        retries: int = 2,
        backoff_secs: float = 0.2,
        sleep: Callable[[float], None] = time.sleep,
        asleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if not chain:
            raise ProviderError("no model provider configured", retryable=False)
        self.chain = list(chain)
        self.retries = max(1, retries)
        self.backoff_secs = backoff_secs
        self._build = build
        self._sleep = sleep
        self._asleep = asleep
        self._built: dict[tuple[str, str], ModelProvider] = {}
        self.requested_ref = chain[0].ref
        self.requested_model = model_label(chain[0])
        # Build the primary now so a broken configuration fails at creation, not on first call.
        self._provider_for(chain[0])

    def candidates(self) -> list[ProviderSpec]:
        """One spec per (provider, model) pair, in the order they are tried."""
        out: list[ProviderSpec] = []
        for spec in self.chain:
            models = [spec.model] + [m for m in spec.fallback_models if m and m != spec.model]
            out.extend(
                spec if model == spec.model else dataclasses.replace(spec, model=model) for model in models
            )
        return out

    def _provider_for(self, spec: ProviderSpec) -> ModelProvider:
        key = (spec.ref, spec.model)
        if key not in self._built:
            self._built[key] = self._build(spec)
        return self._built[key]

    @property
    def instant(self) -> bool:
        """True when no candidate does I/O, so a call never waits on the network."""
        for spec in self.candidates():
            try:
                provider = self._provider_for(spec)
            except Exception:
                continue  # a candidate that cannot be built fails at once, without I/O
            if not provider.instant:
                return False
        return True

    def is_fallback(self, reply: ModelReply) -> bool:
        return (reply.provider_ref, reply.model) != (self.requested_ref, self.requested_model)

    def complete(self, request: ChatRequest) -> ModelReply:
        attempts = _Attempts(self)
        for spec, attempt in attempts:
            try:
                reply = self._provider_for(spec).complete(request)
            except Exception as exc:  # every failure is an event; none escapes the chain
                if delay := attempts.failed(spec, attempt, exc):
                    self._sleep(delay)
                continue
            return attempts.served(spec, reply)
        raise attempts.exhausted()

    async def acomplete(self, request: ChatRequest) -> ModelReply:
        """`complete` awaited: the same candidates, retries, back-off, events and errors."""
        attempts = _Attempts(self)
        for spec, attempt in attempts:
            try:
                reply = await self._provider_for(spec).acomplete(request)
            except Exception as exc:  # CancelledError is no Exception: cancelling is not a failure
                if delay := attempts.failed(spec, attempt, exc):
                    await self._asleep(delay)
                continue
            return attempts.served(spec, reply)
        raise attempts.exhausted()


def build_provider(
    spec: ProviderSpec,
    lookup: Mapping[str, ProviderSpec],
    *,
    retries: int = 2,
    backoff_secs: float = 0.2,
) -> ReliableProvider:
    """The provider an agent calls: `spec` plus its fallbacks, with retries and back-off."""
    return ReliableProvider(
        resolve_chain(spec, lookup), build_single, retries=retries, backoff_secs=backoff_secs
    )
