"""Where the engine's record meets the exporter: a receiver of `runs_app.events.written`.

It runs inside the engine's transaction and adds no statement to it: it only registers, for
after the commit, a task message asking for the tree's export. A root run's end asks at once;
a call or a model turn that ended in a tree still running asks a few seconds later, at most
once per tree and delay in this process, so a long run's spans leave as its calls end.
Nothing at all happens when export is off."""

from __future__ import annotations

import threading
import time
from typing import Any

from django.conf import settings

from traces_app import services

ENDS = frozenset({"run.completed", "run.failed", "run.cancelled", "run.timed_out", "run.lost"})
PARTS = frozenset({"tool.result", "model.response"})

_asked: dict[str, float] = {}
_asked_lock = threading.Lock()


def events_written(sender: Any = None, events: Any = (), **kwargs: Any) -> None:
    if not settings.CLAWBOARD_TRACES_EXPORT:
        return
    now_roots: set[str] = set()
    later_roots: set[str] = set()
    for event in events:
        root = str(event.root_id)
        if event.type in ENDS and str(event.run_id) == root:
            now_roots.add(root)
        elif event.type in PARTS or event.type in ENDS:
            later_roots.add(root)
    for root in now_roots:
        services.export_requested(root)
    for root in later_roots - now_roots:
        if _first_ask(root):
            services.export_requested(root, countdown=services.PARTIAL_DELAY_SECS)


def _first_ask(root: str) -> bool:
    """True when no partial export of this tree was asked for in the last delay."""
    now = time.monotonic()
    with _asked_lock:
        if _asked.get(root, 0.0) > now:
            return False
        if len(_asked) > 10_000:
            for key in [k for k, until in _asked.items() if until <= now]:
                del _asked[key]
        _asked[root] = now + services.PARTIAL_DELAY_SECS
        return True
