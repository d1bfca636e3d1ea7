"""What a log record or a span says about the run it belongs to.

A worker binds the run it holds (`bound`), and every log record written meanwhile carries the
run's `run_id`, `root_id`, `agent_alias`, `spawn_site` and the trace and span ids its spans are
exported under (`fields`). The ids are derived from the runs' and calls' own ids, so a span
exported twice is the same span, and a log line names the span a trace viewer shows:

- a tree's trace id is its root run's UUID (128 bits, never zero for a UUID4);
- a span id is the first 8 bytes of the SHA-256 of what it stands for (`run:<uuid>`,
  `call:<ToolCall pk>`, `chat:<run uuid>:<turn>`), never zero.

No Django import here: the logging configuration loads this module before the apps."""

from __future__ import annotations

import contextvars
import hashlib
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_current: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "clawboard_run", default=None
)


def trace_id_of(root_id: Any) -> int:
    return uuid.UUID(str(root_id)).int


def _span_id(key: str) -> int:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") or 1


def run_span_id(run_id: Any) -> int:
    return _span_id(f"run:{uuid.UUID(str(run_id))}")


def call_span_id(call_pk: Any) -> int:
    return _span_id(f"call:{call_pk}")


def chat_span_id(run_id: Any, turn: int) -> int:
    return _span_id(f"chat:{uuid.UUID(str(run_id))}:{turn}")


def trace_hex(root_id: Any) -> str:
    return f"{trace_id_of(root_id):032x}"


def span_hex(span_id: int) -> str:
    return f"{span_id:016x}"


def run_fields(run: Any) -> dict[str, str]:
    """The fields a record of `run` carries (a Run, or anything with its attributes)."""
    root_id = run.root_id or run.pk
    return {
        "run_id": str(run.pk),
        "root_id": str(root_id),
        "agent_alias": run.agent,
        "spawn_site": run.spawn_site,
        "trace_id": trace_hex(root_id),
        "span_id": span_hex(run_span_id(run.pk)),
    }


@contextmanager
def bound(run: Any) -> Iterator[None]:
    """Log records written inside carry `run`'s fields (this thread or task only)."""
    token = _current.set(run_fields(run))
    try:
        yield
    finally:
        _current.reset(token)


def fields() -> dict[str, str] | None:
    """The fields of the run bound here, if any."""
    return _current.get()
