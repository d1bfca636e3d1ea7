"""A run's conversation as the model sees it: its stored messages, in order.

Messages are only ever appended, so a worker keeps the ones it has read (a small cache of the
process, by run) and, when the run comes back, reads only those written since: a step costs
the same however long the conversation is."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction

from runs_app.engine.providers import ChatMessage, ToolCallRequest
from runs_app.models import Message

MAX_CACHED = 512


@dataclass
class Transcript:
    messages: list[ChatMessage] = field(default_factory=list)
    next_seq: int = 0

    def copy(self) -> Transcript:
        return Transcript(list(self.messages), self.next_seq)


_cache: OrderedDict[str, Transcript] = OrderedDict()
_lock = threading.Lock()


def to_chat(row: Message) -> ChatMessage:
    return ChatMessage(
        role=row.role,  # type: ignore[arg-type]
        content=row.content,
        tool_calls=[
            ToolCallRequest(id=c["id"], name=c["name"], arguments=c["arguments"]) for c in row.tool_calls
        ],
        tool_call_id=row.tool_call_id,
    )


def load(run_id: Any, last_seq: int | None = None) -> Transcript:
    """The run's messages: those this process read before, and the ones stored since.
    `last_seq`: the seq of the run's last stored message, as its row's read found it (`rows`);
    when this process holds every message up to it, nothing is read."""
    with _lock:
        cached = _cache.get(str(run_id))
    if cached is not None and last_seq is not None and cached.next_seq == last_seq + 1:
        return cached.copy()
    transcript = cached.copy() if cached is not None else Transcript()
    for row in Message.objects.filter(run_id=run_id, seq__gte=transcript.next_seq).order_by("seq"):
        transcript.messages.append(to_chat(row))
        transcript.next_seq = row.seq + 1
    _remember(run_id, transcript)
    return transcript


def created(run_id: Any, rows: list[Message]) -> None:
    """A new run's first messages, written in the caller's transaction: remembered once it
    commits, so that the run's first step in this process reads none of them back."""
    kept = Transcript([to_chat(row) for row in rows], len(rows))
    transaction.on_commit(lambda: _remember(run_id, kept))


def append(run_id: Any, transcript: Transcript, messages: list[ChatMessage]) -> None:
    """Store messages at the end of the run's conversation, in the caller's transaction."""
    if not messages:
        return
    rows = [
        Message(
            run_id=run_id,
            seq=transcript.next_seq + i,
            role=m.role,
            content=m.content,
            tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls],
            tool_call_id=m.tool_call_id,
        )
        for i, m in enumerate(messages)
    ]
    Message.objects.bulk_create(rows)
    transcript.messages.extend(messages)
    transcript.next_seq += len(rows)
    kept = transcript.copy()
    # Only what committed is remembered: a rolled-back append is read again from the table.
    transaction.on_commit(lambda: _remember(run_id, kept))


def _remember(run_id: Any, transcript: Transcript) -> None:
    key = str(run_id)
    with _lock:
        known = _cache.get(key)
        if known is None or known.next_seq <= transcript.next_seq:
            _cache[key] = transcript.copy()
        _cache.move_to_end(key)
        while len(_cache) > MAX_CACHED:
            _cache.popitem(last=False)
