"""Exporting run trees over OTLP/HTTP: the only writer of `TraceExport`.

The engine never waits for this. When events are written (`signals`), an export of the tree
is asked for once the engine's transaction has committed (a task message, no statement); the
task reads the tree (`spans.build`), sends the spans the receiver has not taken yet, in
batches, and records what it took. A tree whose receiver is down is tried again with a
growing pause by the periodic sweep (`sweep`), which also finds trees whose task message was
lost: what is to be exported is always derived from the runs, so a worker that dies loses
nothing. An exporter holds a tree by a lease, never by a database lock, and sends at most
`CLAWBOARD_TRACES_SPANS_PER_TASK` spans per task before handing the rest to another task."""

from __future__ import annotations

import logging
import threading
import time
from datetime import timedelta
from functools import lru_cache
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.sampling import Sampler, _get_from_env_or_default

from runs_app import runlog
from runs_app.engine import dispatch
from runs_app.models import TERMINAL_STATUSES, Run
from traces_app import spans
from traces_app.models import TraceExport

log = logging.getLogger(__name__)

EXPORT_TASK = "traces.export_tree"
BATCH_SPANS = 512  # per request, the SDK's own OTEL_BSP_MAX_EXPORT_BATCH_SIZE default
LEASE = timedelta(seconds=120)
MAX_PAUSE_SECS = 300
SWEEP_TREES = 200
# A tree's calls end while it runs: their spans are sent a little later, together.
PARTIAL_DELAY_SECS = 5.0


class Exporter(Protocol):
    def export(self, spans: Any) -> SpanExportResult: ...


@lru_cache(maxsize=1)
def resource() -> Resource:
    """`OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` as the SDK reads them; `clawboard`
    when no service name is given."""
    import os

    given = os.environ.get("OTEL_SERVICE_NAME") or "service.name=" in os.environ.get(
        "OTEL_RESOURCE_ATTRIBUTES", ""
    )
    return Resource.create({} if given else {"service.name": "clawboard"})


@lru_cache(maxsize=1)
def sampler() -> Sampler:
    """`OTEL_TRACES_SAMPLER` (and its argument) as the SDK reads them, asked once per tree."""
    return _get_from_env_or_default()


_exporter: Exporter | None = None
_exporter_lock = threading.Lock()


def exporter() -> Exporter:
    """The process's OTLP/HTTP exporter: endpoint, headers, timeout, compression and
    certificates from the standard `OTEL_EXPORTER_OTLP_*` variables."""
    global _exporter
    with _exporter_lock:
        if _exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            _exporter = OTLPSpanExporter()
        return _exporter


def use_exporter(found: Exporter | None) -> None:
    """Replace the process's exporter (tests: the SDK's in-memory exporter)."""
    global _exporter
    with _exporter_lock:
        _exporter = found


def export_requested(root_id: Any, *, countdown: float | None = None) -> None:
    """Ask a worker to export the tree once the current transaction commits."""
    dispatch.later(EXPORT_TASK, [str(root_id)], countdown=countdown)


def export_tree(*, root_id: Any, now: Any = None) -> int | None:
    """Send the ended spans of one tree the receiver has not taken yet. Returns how many were
    taken, -1 when the receiver refused them, None when another exporter holds the tree."""
    if not settings.CLAWBOARD_TRACES_EXPORT:
        return 0
    now = now or timezone.now()
    row, _ = TraceExport.objects.get_or_create(root_id=root_id)
    if row.complete:
        return 0
    leased = TraceExport.objects.filter(pk=row.pk, complete=False).exclude(lease_until__gt=now)
    if not leased.update(lease_until=now + LEASE):
        return None
    try:
        # Read again under the lease: another exporter may have sent spans since.
        return _export_leased(TraceExport.objects.get(pk=row.pk), now)
    finally:
        TraceExport.objects.filter(pk=row.pk).update(lease_until=None)


def _export_leased(row: TraceExport, now: Any) -> int:
    tree = spans.build(row.root_id)
    if not tree.runs:  # the tree was deleted
        TraceExport.objects.filter(pk=row.pk).update(complete=True, next_try_at=None)
        return 0
    if not _sampled(tree):
        TraceExport.objects.filter(pk=row.pk).update(complete=True, sampled=False, next_try_at=None)
        return 0
    sent = set(row.sent)
    todo = [s for s in tree.spans if s.hex_id not in sent]
    limit = int(getattr(settings, "CLAWBOARD_TRACES_SPANS_PER_TASK", 5000))
    more = len(todo) > limit
    todo = todo[:limit]
    taken: list[str] = []
    error = ""
    for start in range(0, len(todo), BATCH_SPANS):
        batch = todo[start : start + BATCH_SPANS]
        try:
            result = exporter().export(spans.readable(row.root_id, batch, resource()))
        except Exception as exc:  # an exporter must never end the task without a record
            result, error = SpanExportResult.FAILURE, f"{exc.__class__.__name__}: {exc}"
        if result != SpanExportResult.SUCCESS:
            error = error or "the receiver did not take the spans"
            break
        taken.extend(s.hex_id for s in batch)
    fields: dict[str, Any] = {"sent": row.sent + taken, "spans_sent": F("spans_sent") + len(taken)}
    if taken:
        fields["last_success_at"] = timezone.now()
    if error:
        pause = min(MAX_PAUSE_SECS, 2 ** min(row.attempts + 1, 9))
        fields.update(
            attempts=F("attempts") + 1, last_error=error[:1000], next_try_at=now + timedelta(seconds=pause)
        )
    else:
        fields.update(attempts=0, last_error="", next_try_at=now if more else None)
        fields["complete"] = tree.finished and not more
    TraceExport.objects.filter(pk=row.pk).update(**fields)
    if more and not error:
        transaction.on_commit(lambda: export_requested(row.root_id), robust=True)
    return len(taken) if not error else -1


def _sampled(tree: spans.Tree) -> bool:
    """The sampler's decision for the root span, taken for the whole tree (a parent-based
    sampler would do the same for each span under it)."""
    root = next((r for r in tree.runs if r.pk == r.root_id or r.root_id is None), tree.runs[0])
    decision = sampler().should_sample(
        None, runlog.trace_id_of(tree.root_id), f"invoke_agent {root.agent}", attributes=None
    )
    return decision.decision.is_sampled()


def sweep(*, now: Any = None) -> int:
    """The periodic backstop: ask again for the export of trees whose receiver failed (their
    pause over) and of trees that ended without an export (a lost task message). Returns how
    many exports it asked for."""
    if not settings.CLAWBOARD_TRACES_EXPORT:
        return 0
    now = now or timezone.now()
    due = (
        TraceExport.objects.filter(complete=False, next_try_at__lte=now)
        .exclude(lease_until__gt=now)
        .order_by("next_try_at")
        .values_list("root_id", flat=True)[:SWEEP_TREES]
    )
    roots = set(due)
    horizon = now - timedelta(hours=float(settings.CLAWBOARD_TRACES_HORIZON_HOURS))
    ended = (
        Run.objects.filter(parent__isnull=True, status__in=TERMINAL_STATUSES, finished_at__gte=horizon)
        .exclude(pk__in=TraceExport.objects.filter(complete=True).values("root_id"))
        .exclude(pk__in=TraceExport.objects.filter(complete=False, next_try_at__gt=now).values("root_id"))
        .order_by("finished_at")
        .values_list("pk", flat=True)[:SWEEP_TREES]
    )
    roots.update(ended)
    for root_id in roots:
        dispatch.dispatcher().send(EXPORT_TASK, [str(root_id)])
    return len(roots)


def drain(*, timeout: float = 30.0) -> bool:
    """Export, in this thread, every ended tree not exported yet, until a pass finds nothing
    more to send (True) or the receiver refuses (False) or `timeout` runs out
    (`manage.py export_traces`, tests, the benchmark)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = list(
            Run.objects.filter(parent__isnull=True, status__in=TERMINAL_STATUSES)
            .exclude(pk__in=TraceExport.objects.filter(complete=True).values("root_id"))
            .values_list("pk", flat=True)
        )
        taken = [export_tree(root_id=root_id) for root_id in waiting]
        if any(n is not None and n < 0 for n in taken):
            return False
        if None in taken:
            time.sleep(0.05)  # a worker's export of that tree is under way
            continue
        if not any(taken):
            return True
    return False
