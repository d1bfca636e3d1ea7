"""How a run that became runnable reaches a worker: the one way every hop goes (a run queued,
a child settled, an approval decided, a steer, a wake-up after a deadline).

`runnable(run_id)` asks, once the current transaction commits, for a task `runs.advance_run`
that claims the run and steps it. The task is sent by name, so the engine never imports the
tasks module that imports it. The deployment chooses the implementation:

- `CeleryDispatcher` (scale-out): a message on the shared broker (Redis); any worker process
  takes it.
- `EmbeddedDispatcher` (the default): the same task message on the `memory://` broker of the
  serving process, consumed by the Celery worker that runs in a thread of that process
  (`zeroclaw_site/embedded.py`). The broker lives only as long as the process; the reaper
  sends queued runs again after a restart.

A duplicate message is harmless: a step starts by claiming its run with a conditional UPDATE
from `queued`, which only one claimer wins."""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from celery import current_app
from django.conf import settings
from django.db import transaction

ADVANCE_TASK = "runs.advance_run"
CONTINUE_TASK = "runs.continue_run"  # the answer of a model call that was in flight (inflight.py)
EXPIRE_RUN_TASK = "runs.expire_run"
EXPIRE_CALL_TASK = "runs.expire_call"


class Dispatcher(Protocol):
    def send(self, task: str, args: list[Any], countdown: float | None = None) -> None: ...


class CeleryDispatcher:
    """A task message on the broker every worker process shares."""

    def send(self, task: str, args: list[Any], countdown: float | None = None) -> None:
        current_app.send_task(task, args=args, countdown=countdown)


class EmbeddedDispatcher(CeleryDispatcher):
    """A task message on the in-process `memory://` broker, for the worker thread of this
    process. Nothing else differs: the embedded worker is a real Celery worker."""


class QueuedDispatcher:
    """Messages kept in a queue of this process until `run_until_idle` runs them, one after
    the other, in the calling thread (tests: every step of a tree in the test's own thread,
    in a known order, with nothing to wait for). A message sent with a countdown (a deadline)
    waits in `delayed` until a test runs it."""

    def __init__(self) -> None:
        self.queue: deque[tuple[str, list[Any]]] = deque()
        self.delayed: list[tuple[str, list[Any], float]] = []

    def send(self, task: str, args: list[Any], countdown: float | None = None) -> None:
        if countdown:
            self.delayed.append((task, args, countdown))
        else:
            self.queue.append((task, args))

    def run_until_idle(self, limit: int = 100_000) -> int:
        """Run queued messages (and those they send) until none is left; how many ran. The
        tasks are Celery's own, called in this thread."""
        ran = 0
        while self.queue:
            if ran >= limit:
                raise RuntimeError(f"still {len(self.queue)} messages queued after {limit}")
            task, args = self.queue.popleft()
            current_app.tasks[task](*args)
            ran += 1
        return ran


_queued = QueuedDispatcher()


def queued() -> QueuedDispatcher:
    """The queue of `CLAWBOARD_DISPATCH = "queued"`."""
    return _queued


def dispatcher() -> Dispatcher:
    if getattr(settings, "CLAWBOARD_DISPATCH", "") == "queued":
        return _queued
    if str(settings.CELERY_BROKER_URL).startswith("memory://"):
        return EmbeddedDispatcher()
    return CeleryDispatcher()


def runnable(run_id: Any) -> None:
    """Once the current transaction commits, ask a worker to advance this run."""
    later(ADVANCE_TASK, [str(run_id)])


def later(task: str, args: list[Any], countdown: float | None = None) -> None:
    """Send `task` once the current transaction commits (at once outside a transaction)."""
    transaction.on_commit(lambda: dispatcher().send(task, args, countdown), robust=True)
