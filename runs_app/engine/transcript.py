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


def load(run_id: Any) -> Transcript:
    """The run's messages: those this process read before, and the ones stored since."""
    with _lock:
        cached = _cache.get(str(run_id))
    transcript = cached.copy() if cached is not None else Transcript()
    for row in Message.objects.filter(run_id=run_id, seq__gte=transcript.next_seq).order_by("seq"):
        transcript.messages.append(to_chat(row))
        transcript.next_seq = row.seq + 1
    _remember(run_id, transcript)
    return transcript


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
