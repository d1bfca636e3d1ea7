"""Rotate the key that encrypts provider API keys and MCP servers' env/headers values kept in
Clawboard (agents_app.secrets)."""

from __future__ import annotations

import os
from typing import Any

from cryptography.fernet import Fernet
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from agents_app import secrets
from agents_app.models import McpServer, ModelProvider


class Command(BaseCommand):
    help = (
        "Re-encrypt every stored provider API key and MCP secret with the current encryption key. With "
        "CLAWBOARD_ENCRYPTION_KEY, put the new key first in its comma-separated list, run this, "
        "then drop the old key once no run started before is still going. In embedded mode, "
        "--new-key first adds a generated key to DATA_DIR/encryption-key.txt."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--new-key",
            action="store_true",
            help="embedded mode: generate a new key and make it the current one",
        )
        parser.add_argument(
            "--drop-old",
            action="store_true",
            help="embedded mode: afterwards keep only the current key in the file",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        from django.conf import settings

        from_env = bool(str(getattr(settings, "CLAWBOARD_ENCRYPTION_KEY", "") or "").strip())
        if (options["new_key"] or options["drop_old"]) and from_env:
            raise CommandError(
                "--new-key and --drop-old change the key file; with CLAWBOARD_ENCRYPTION_KEY set, "
                "edit that variable instead"
            )
        try:
            secrets.fernet()  # the key file exists from here on (embedded mode)
        except secrets.SecretsUnavailable as exc:
            raise CommandError(str(exc)) from exc
        path = secrets.key_file()
        if options["new_key"]:
            old = path.read_text()
            _write_private(path, Fernet.generate_key().decode() + "\n" + old)
        count = mcp_count = 0
        try:
            with transaction.atomic():
                for provider in ModelProvider.objects.select_for_update().exclude(api_key=""):
                    provider.api_key = secrets.rotate_token(provider.api_key)
                    provider.save(update_fields=["api_key"])
                    count += 1
                for server in McpServer.objects.select_for_update():
                    for rows in (server.env, server.headers):
                        for row in rows.values():
                            if row.get("token"):
                                row["token"] = secrets.rotate_token(row["token"])
                                mcp_count += 1
                    server.save(update_fields=["env", "headers"])
        except secrets.SecretsUnavailable as exc:
            raise CommandError(str(exc)) from exc
        if options["drop_old"]:
            first = next(line for line in path.read_text().splitlines() if line.strip())
            _write_private(path, first.strip() + "\n")
        self.stdout.write(
            f"re-encrypted {count} provider key(s) and {mcp_count} MCP secret(s) with the current key"
        )


def _write_private(path: Any, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.replace(tmp, path)
