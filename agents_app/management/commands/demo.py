from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from agents_app.config_io import parse_toml
from agents_app.services import config_replace
from agents_app.users import user_create_or_update

DEMO_FILE = Path(settings.BASE_DIR) / "demo" / "clawboard.toml"


class Command(BaseCommand):
    help = "Load the demo configuration (idempotent) and make sure an `admin` user exists."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", default=str(DEMO_FILE))

    def handle(self, *args: Any, **options: Any) -> None:
        result = parse_toml(Path(options["file"]).read_text())
        revision = config_replace(snapshot=result.snapshot, summary="demo configuration")
        self.stdout.write("demo configuration loaded" if revision else "demo configuration already loaded")

        credentials = Path(settings.DATA_DIR) / "admin-credentials.txt"
        exists = get_user_model().objects.filter(username="admin").exists()
        if exists and credentials.exists():
            password = credentials.read_text().strip()
            _, _, token = user_create_or_update(username="admin", role="admin", password=password)
        else:
            _, password, token = user_create_or_update(username="admin", role="admin")
            credentials.parent.mkdir(parents=True, exist_ok=True)
            credentials.write_text(password + "\n")
            credentials.chmod(0o600)
        self.stdout.write(f"admin user: admin\nadmin password: {password}\nadmin API token: {token}")
