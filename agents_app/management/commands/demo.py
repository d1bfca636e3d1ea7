from __future__ import annotations

from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.authtoken.models import Token

from agents_app.config_io import ConfigParseError, ConfigShapeError, parse_toml
from agents_app.selectors import config_snapshot_get
from agents_app.services import ConfigValidationError, config_replace
from agents_app.snapshot import ConfigSnapshot
from agents_app.users import user_create_or_update

DEMO_FILE = Path(settings.BASE_DIR) / "demo" / "clawboard.toml"


class Command(BaseCommand):
    help = (
        "Load the demo configuration into an empty configuration (idempotent; an edited "
        "configuration is kept unless --replace) and make sure an `admin` user exists."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--file", default=str(DEMO_FILE))
        parser.add_argument(
            "--replace", action="store_true", help="load the demo even over a configuration that differs"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            result = parse_toml(Path(options["file"]).read_bytes())
        except OSError as exc:
            raise CommandError(f"cannot read {options['file']}: {exc.strerror}") from exc
        except ConfigParseError as exc:
            raise CommandError(str(exc)) from exc
        except ConfigShapeError as exc:
            raise CommandError("\n".join(m for _, m in exc.errors)) from exc
        current = config_snapshot_get()
        # `make run` runs this at every start: it must never overwrite an operator's edits.
        if current == result.snapshot:
            self.stdout.write("demo configuration already loaded")
        elif current != ConfigSnapshot() and not options["replace"]:
            self.stdout.write(
                "a configuration is already present and differs from the demo; left unchanged "
                "(--replace loads the demo over it)"
            )
        else:
            try:
                config_replace(snapshot=result.snapshot, summary="demo configuration")
            except ConfigValidationError as exc:
                raise CommandError("\n".join(m for _, m in exc.errors)) from exc
            self.stdout.write("demo configuration loaded")
        self._ensure_admin()

    def _ensure_admin(self) -> None:
        credentials = Path(settings.DATA_DIR) / "admin-credentials.txt"
        user = get_user_model().objects.filter(username="admin").first()
        if user is None:
            _, password, token = user_create_or_update(username="admin", role="admin")
            credentials.parent.mkdir(parents=True, exist_ok=True)
            credentials.write_text(password + "\n")
            credentials.chmod(0o600)
        else:
            # An existing admin keeps its password, even one changed since it was generated.
            stored = credentials.read_text().strip() if credentials.exists() else ""
            password = stored if stored and user.check_password(stored) else "(unchanged)"
            token = Token.objects.get_or_create(user=user)[0].key
        self.stdout.write(f"admin user: admin\nadmin password: {password}\nadmin API token: {token}")
