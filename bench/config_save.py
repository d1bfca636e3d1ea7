"""Saving a maximal risk profile (issue 16, item 4): how long the save takes and how long it
holds the database's write lock.

    .venv/bin/python bench/config_save.py [--repeat 3]

A maximal profile has every list at its cap (1,000 entries), with entries as long as the whole
export allows (it must stay under the 1 MiB an import accepts). The save goes through the
same service as REST (`entries.entry_update`): validation, TOML, diff and summary before the
write transaction, then the writes. Also timed: changing one entry of that profile (the diff
of two near-1 MiB exports), and refusing a list of 100,000 commands (the case that held
SQLite's write lock for about 20 minutes before). Prints one line per case, medians."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LISTS = (
    "allowed_roots",
    "allowed_roots_read_only",
    "allowed_roots_write_only",
    "forbidden_paths",
    "allowed_commands",
    "shell_env_passthrough",
)


def setup() -> None:
    os.environ["DATA_DIR"] = tempfile.mkdtemp(prefix="clawboard-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "zeroclaw_site.settings")
    os.environ.setdefault("DJANGO_DEBUG", "false")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def maximal_body(width: int, tag: str) -> dict[str, Any]:
    body: dict[str, Any] = {}
    for name in LISTS:
        if name == "shell_env_passthrough":
            body[name] = [f"VAR_{tag}_{i:04d}" for i in range(1000)]
        else:
            body[name] = [f"/srv/{tag}/{i:04d}/".ljust(width, "x") for i in range(1000)]
    body["allowed_tools"] = ["file_read", "file_list", "shell"]
    body["always_ask"] = ["shell"]
    return body


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    setup()
    from agents_app import services
    from agents_app.config_io import MAX_DOCUMENT_BYTES, export_toml
    from agents_app.entries import entry_create, entry_update
    from agents_app.selectors import config_snapshot_get
    from agents_app.services import ConfigValidationError

    entry_create(kind="risk_profiles", body={"alias": "max"})
    # The widest entries whose export still fits under the import's cap (each entry costs its
    # width plus about 8 bytes of quotes, comma and indent; one list holds env-var names).
    width = (MAX_DOCUMENT_BYTES - 40_000) // (1000 * (len(LISTS) - 1)) - 8

    held: list[float] = []
    real_lock, real_commit = services._lock_configuration, services._commit
    started: list[float] = []

    def lock() -> None:
        started.append(time.perf_counter())
        real_lock()

    def commit(*a: Any, **k: Any) -> Any:
        try:
            return real_commit(*a, **k)
        finally:
            held.append(time.perf_counter() - started[-1])

    services._lock_configuration = lock  # type: ignore[assignment]
    services._commit = commit  # type: ignore[assignment]

    saves, locks, changes, change_locks, refusals = [], [], [], [], []
    for i in range(args.repeat):
        body = maximal_body(width, f"r{i}")
        t0 = time.perf_counter()
        entry_update(kind="risk_profiles", key="max", body=body, partial=True)
        saves.append(time.perf_counter() - t0)
        locks.append(held[-1])
        body["allowed_commands"] = body["allowed_commands"][:-1] + ["/srv/changed"]
        t0 = time.perf_counter()
        entry_update(kind="risk_profiles", key="max", body=body, partial=True)
        changes.append(time.perf_counter() - t0)
        change_locks.append(held[-1])
        t0 = time.perf_counter()
        try:
            entry_update(
                kind="risk_profiles",
                key="max",
                body={"allowed_commands": [f"c{j}" for j in range(100_000)]},
                partial=True,
            )
        except ConfigValidationError:
            pass
        refusals.append(time.perf_counter() - t0)
    size = len(export_toml(config_snapshot_get()).encode())
    med = statistics.median
    print(
        f"maximal profile ({len(LISTS)} lists x 1000 entries of up to {width} chars, export {size} bytes): "
        f"saved in {med(saves):.2f} s (write transaction {med(locks) * 1000:.0f} ms); "
        f"one entry changed: {med(changes):.2f} s (write transaction {med(change_locks) * 1000:.0f} ms); "
        f"100,000 allowed_commands refused in {med(refusals):.2f} s; median of {args.repeat}; "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )


if __name__ == "__main__":
    main()
