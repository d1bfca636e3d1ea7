"""Structured logs (`CLAWBOARD_LOG_FORMAT=json`): one JSON object per line.

Every record has `time` (ISO 8601, UTC), `level`, `logger` and `message` (plus `exception`
when one is logged). A record written while a worker holds a run also has that run's
`run_id`, `root_id`, `agent_alias`, `spawn_site`, `trace_id` and `span_id`
(`runs_app.runlog`), the ids under which the run's span is exported, so
`grep '"spawn_site": "cron"'` finds what the cron runs logged, and a trace viewer finds the
span of a line."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from runs_app import runlog

RUN_FIELDS = ("run_id", "root_id", "agent_alias", "spawn_site", "trace_id", "span_id")


class RunFilter(logging.Filter):
    """Adds the bound run's fields to a record (none when no run is bound); drops nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        found = runlog.fields()
        if found:
            for key, value in found.items():
                if not hasattr(record, key):
                    setattr(record, key, value)
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in RUN_FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)
