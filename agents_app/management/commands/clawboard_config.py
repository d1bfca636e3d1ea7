from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agents_app.config_io import ConfigParseError, ConfigShapeError, export_toml, parse_toml
from agents_app.imports import import_apply, import_plan
from agents_app.selectors import config_snapshot_get
from agents_app.services import ConfigValidationError


class Command(BaseCommand):
    help = (
        "Import or export the whole configuration as TOML (import is atomic; --dry-run shows the diff; "
        "--prune deletes what the file lacks)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["import", "export"])
        parser.add_argument("file", help="path of the TOML file, or - for stdin/stdout")
        parser.add_argument("--dry-run", action="store_true", help="import: show the diff, change nothing")
        parser.add_argument(
            "--prune", action="store_true", help="import: delete the entries the file does not mention"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["action"] == "export":
            text = export_toml(config_snapshot_get())
            if options["file"] == "-":
                self.stdout.write(text, ending="")
                return
            try:
                Path(options["file"]).write_text(text, encoding="utf-8")
            except OSError as exc:
                raise CommandError(f"cannot write {options['file']}: {exc.strerror}") from exc
            self.stdout.write(f"exported to {options['file']}")
            return
        try:
            raw = sys.stdin.buffer.read() if options["file"] == "-" else Path(options["file"]).read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc.strerror}") from exc
        try:
            result = parse_toml(raw)
        except ConfigParseError as exc:
            raise CommandError(str(exc)) from exc
        except ConfigShapeError as exc:
            raise CommandError("\n".join(m for _, m in exc.errors)) from exc
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
        revision = None
        if options["dry_run"]:
            plan = import_plan(result, prune=options["prune"])
            if plan.errors:
                raise CommandError("\n".join(m for _, m in plan.errors))
        else:
            try:
                plan, revision = import_apply(
                    result, prune=options["prune"], summary=f"import {options['file']}"
                )
            except ConfigValidationError as exc:
                raise CommandError("\n".join(m for _, m in exc.errors)) from exc
        for line in plan.summary_lines()[len(plan.warnings) :]:
            self.stdout.write(line)
        if options["dry_run"]:
            self.stdout.write(plan.diff, ending="")
            self.stdout.write("dry run: nothing changed")
            return
        self.stdout.write(f"imported: revision {revision.pk}" if revision else "no change")
