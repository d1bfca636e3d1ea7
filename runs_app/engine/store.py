"""The transcript of a run, kept in memory by the worker that holds the run.

A worker appends to its in-memory copy and to the table; when the run comes back to the same
process after a wait it loads only the messages written since (one small query), so the cost
of a step does not grow with the length of the conversation or the number of earlier children."""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from runs_app.engine import sql
from runs_app.engine.providers import ChatMessage, ToolCallRequest
from runs_app.models import Message

MAX_CACHED = 512


@dataclass
class Transcript:
    messages: list[ChatMessage] = field(default_factory=list)
    next_seq: int = 0
    provider: Any = None  # the built provider, reused while the run stays in this process
    provider_ref: str = ""
    unsaved: list[Message] = field(default_factory=list)  # staged rows, written with the next write
    # Embedded mode only (this process is the only worker): the run as it went to wait, and its
    # parsed policy, for the hop that resumes it here (`claims.take_claimed`, the Stepper).
    run: Any = None
    policy: Any = None
    # Embedded mode only: the messages are every message stored for the run as of `turns`
    # model turns (only the run's owner writes them, and this process is the only worker), so
    # resuming with the run at that same turn count needs no read (`load`).
    current: bool = False
    turns: int = 0


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


def load(run_id: Any, turns: int | None = None) -> Transcript:
    """The run's transcript: the kept one, brought up to date, else read whole. `turns`: the
    run's model turns as its claim found them; a kept transcript that is `current` at that
    same count is returned without a read (a run advanced elsewhere meanwhile has more)."""
    key = str(run_id)
    with _lock:
        cached = _cache.pop(key, None)
    if cached is not None and cached.current and cached.turns == turns:
        return cached
    transcript = cached or Transcript()
    transcript.current = False
    for row in sql.MESSAGES_FROM.models(sql.uid(run_id), transcript.next_seq):
        transcript.messages.append(to_chat(row))
        transcript.next_seq = row.seq + 1
    return transcript


def keep(run_id: Any, transcript: Transcript) -> None:
    with _lock:
        _cache[str(run_id)] = transcript
        while len(_cache) > MAX_CACHED:
            _cache.popitem(last=False)


def seed(run_id: Any, rows: list[Message], turns: int = 0) -> None:
    """Embedded mode: keep the first messages of a run just created (inside its creating
    transaction), so that its first step needs no read. If that transaction rolls back, the
    run never exists, and the entry only waits to be pushed out of the cache."""
    keep(
        run_id, Transcript(messages=[to_chat(r) for r in rows], next_seq=len(rows), current=True, turns=turns)
    )


def kept_run(run_id: Any) -> Any:
    """The run kept with its transcript when it went to wait, if any (`Transcript.run`)."""
    with _lock:
        cached = _cache.get(str(run_id))
    return cached.run if cached is not None else None


def forget(run_id: Any) -> None:
    with _lock:
        _cache.pop(str(run_id), None)


def _row(run_id: Any, transcript: Transcript, message: ChatMessage) -> Message:
    row = Message(
        run_id=run_id,
        seq=transcript.next_seq,
        role=message.role,
        content=message.content,
        tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls],
        tool_call_id=message.tool_call_id,
    )
    transcript.messages.append(message)
    transcript.next_seq += 1
    return row


def stage(run_id: Any, transcript: Transcript, message: ChatMessage) -> None:
    """Add a message now and write it with the run's next write (`flush`). For messages that
    can be derived again from stored facts (tool results from their ToolCall rows), so losing
    the staged copy in a crash loses nothing."""
    transcript.unsaved.append(_row(run_id, transcript, message))


def flush(transcript: Transcript) -> None:
    """Write the staged messages (inside the caller's transaction)."""
    if transcript.unsaved:
        sql.insert(transcript.unsaved)
        transcript.unsaved = []


def append(run_id: Any, transcript: Transcript, message: ChatMessage) -> Message:
    """Persist one message (inside the caller's transaction), after any staged ones, and add
    it to the in-memory copy."""
    row = _row(run_id, transcript, message)
    transcript.unsaved.append(row)
    flush(transcript)
    return row
