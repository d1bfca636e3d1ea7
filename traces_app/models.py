from __future__ import annotations

from django.db import models


class TraceExport(models.Model):
    """The export of one run tree (one trace) to the OTLP receiver: which of its spans the
    receiver has taken, and when to try again. Written only by the exporter, after the
    engine's transactions, never inside them: the runs, calls and events are the record, and
    this row only remembers how far their export got."""

    # No foreign key: deleting runs must not wait on their export, nor the other way round.
    root_id = models.UUIDField(unique=True)
    # Span ids (16 hex digits) the receiver acknowledged: a span is sent again only if its
    # batch was never acknowledged.
    sent = models.JSONField(default=list, blank=True)
    spans_sent = models.PositiveIntegerField(default=0)
    # Every run of the tree ended and every span was taken (or the sampler dropped the trace).
    complete = models.BooleanField(default=False)
    sampled = models.BooleanField(default=True)
    attempts = models.PositiveIntegerField(default=0)
    next_try_at = models.DateTimeField(null=True, blank=True)
    # While an exporter works on the tree; another one leaves it alone until then.
    lease_until = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    last_success_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        indexes = [models.Index(fields=["complete", "next_try_at"])]

    def __str__(self) -> str:
        return f"export of {self.root_id}"
