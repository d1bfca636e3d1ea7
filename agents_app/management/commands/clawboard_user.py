from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agents_app.roles import ROLES
from agents_app.users import user_create_or_update


class Command(BaseCommand):
    help = "Create or update a user with a role and print its password and API token."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=ROLES, required=True)
        parser.add_argument("--password", default=None, help="default: a random one, printed")

    def handle(self, *args: Any, **options: Any) -> None:
        user, password, token = user_create_or_update(
            username=options["username"], role=options["role"], password=options["password"]
        )
        self.stdout.write(
            f"user: {user.username}\nrole: {options['role']}\npassword: {password}\ntoken: {token}"
        )
