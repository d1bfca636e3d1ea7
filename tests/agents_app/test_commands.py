"""Management commands: clawboard_config (import/export), clawboard_user, demo."""

from __future__ import annotations

import re
import stat
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from agents_app.config_io import export_toml, parse_toml
from agents_app.models import ConfigRevision
from agents_app.selectors import config_snapshot_get
from agents_app.services import config_update
from tests.agents_app.support import BASE_TOML, config_state

CHANGED_TOML = BASE_TOML.replace(
    '[agents.beta]\nmodel_provider = "scripted.demo"', '[agents.beta]\nmodel_provider = "scripted.spare"'
)


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def token_client(token: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


# --- clawboard_config ---------------------------------------------------------------------------


@pytest.mark.usefixtures("base_config")
def test_export_writes_the_configuration_as_toml(tmp_path: Path) -> None:
    path = tmp_path / "out.toml"
    out, _ = run("clawboard_config", "export", str(path))
    assert out == f"exported to {path}\n"
    assert path.read_text(encoding="utf-8") == export_toml(config_snapshot_get())
    assert parse_toml(path.read_text()).snapshot == parse_toml(BASE_TOML).snapshot


@pytest.mark.usefixtures("base_config")
def test_export_to_stdout() -> None:
    out, _ = run("clawboard_config", "export", "-")
    assert out == export_toml(config_snapshot_get())


@pytest.mark.usefixtures("base_config")
def test_import_dry_run_shows_the_diff_and_changes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "changed.toml"
    path.write_text(CHANGED_TOML)
    before = config_state()
    out, _ = run("clawboard_config", "import", str(path), "--dry-run")
    assert out.startswith("~ agents.beta: model_provider\n--- current\n+++ new\n")
    assert '-model_provider = "scripted.demo"\n+model_provider = "scripted.spare"\n' in out
    assert out.endswith("dry run: nothing changed\n")
    assert config_state() == before


@pytest.mark.usefixtures("base_config")
def test_import_applies_the_file_with_a_revision(tmp_path: Path) -> None:
    path = tmp_path / "changed.toml"
    path.write_text(CHANGED_TOML)
    out, _ = run("clawboard_config", "import", str(path))
    revision = ConfigRevision.objects.order_by("-id").first()
    assert revision is not None
    assert out == f"~ agents.beta: model_provider\nimported: revision {revision.pk}\n"
    assert revision.summary == f"import {path}"
    assert revision.created_by is None
    assert config_snapshot_get() == parse_toml(CHANGED_TOML).snapshot

    before = config_state()
    out, _ = run("clawboard_config", "import", str(path))
    assert out == "no change\n"
    assert config_state() == before


@pytest.mark.usefixtures("base_config")
def test_import_of_a_file_with_errors_is_refused_with_every_message(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        CHANGED_TOML
        + '\n[agents.broken]\nmodel_provider = "nodots"\nrisk_profile = "team"\ndelegates = ["broken"]\n'
    )
    before = config_state()
    with pytest.raises(CommandError) as raised:
        run("clawboard_config", "import", str(path))
    assert str(raised.value) == (
        'agents.broken.model_provider must be dotted form <type>.<alias> (got "nodots")\n'
        'agents.broken.delegates[0].agent = "broken" names this agent itself; an agent cannot delegate to itself'
    )
    assert config_state() == before


@pytest.mark.usefixtures("base_config")
def test_import_of_malformed_toml_gives_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[agents.a]\nenabled = tru\n")
    with pytest.raises(CommandError) as raised:
        run("clawboard_config", "import", str(path))
    assert str(raised.value) == "invalid TOML: Invalid value (at line 2, column 11)"


@pytest.mark.usefixtures("base_config")
def test_import_of_a_missing_file_is_a_command_error(tmp_path: Path) -> None:
    path = tmp_path / "none.toml"
    with pytest.raises(CommandError) as raised:
        run("clawboard_config", "import", str(path))
    assert str(raised.value) == f"cannot read {path}: No such file or directory"


@pytest.mark.usefixtures("base_config")
def test_import_lists_skipped_keys_as_warnings(tmp_path: Path) -> None:
    path = tmp_path / "zeroclaw.toml"
    path.write_text("[gateway]\nport = 8080\n" + BASE_TOML)
    out, err = run("clawboard_config", "import", str(path))
    assert err == 'warning: skipped unknown key "gateway"\n'
    assert out == "no change\n"


# --- clawboard_user -----------------------------------------------------------------------------


@pytest.mark.usefixtures("base_config")
def test_clawboard_user_prints_a_token_that_authenticates() -> None:
    out, _ = run("clawboard_user", "vera", "--role", "viewer")
    found = re.fullmatch(r"user: vera\nrole: viewer\npassword: (\S+)\ntoken: ([0-9a-f]{40})\n", out)
    assert found is not None, out
    client = token_client(found.group(2))
    assert client.get("/api/v1/agents/").status_code == 200
    assert client.post("/api/v1/agents/", {"alias": "x"}, format="json").status_code == 403
    assert APIClient().login(username="vera", password=found.group(1))


@pytest.mark.usefixtures("base_config")
def test_clawboard_user_sets_the_given_password_and_changes_the_role() -> None:
    run("clawboard_user", "olga", "--role", "viewer")
    out, _ = run("clawboard_user", "olga", "--role", "admin", "--password", "a long enough secret")
    token = out.rsplit("token: ", 1)[1].strip()
    assert "password: a long enough secret\n" in out
    assert (
        token_client(token).post("/api/v1/risk-profiles/", {"alias": "fresh"}, format="json").status_code
        == 201
    )
    user = get_user_model().objects.get(username="olga")
    assert user.check_password("a long enough secret")
    assert list(user.groups.values_list("name", flat=True)) == ["admin"]


# --- demo ---------------------------------------------------------------------------------------


def demo_output(out: str) -> tuple[str, str, str]:
    found = re.fullmatch(
        r"(.+)\nadmin user: admin\nadmin password: (.+)\nadmin API token: ([0-9a-f]{40})\n", out, re.S
    )
    assert found is not None, out
    return found.group(1), found.group(2), found.group(3)


@pytest.mark.django_db
def test_demo_loads_the_demo_configuration_and_creates_the_admin(_data_dir: Path) -> None:
    status, password, token = demo_output(run("demo")[0])
    assert status == "demo configuration loaded"
    assert list(config_snapshot_get().agents) == [
        "coordinator",
        "explorer",
        "local-llm",
        "reviewer",
        "sysadmin",
        "verifier",
    ]
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.check_password(password)
    credentials = _data_dir / "admin-credentials.txt"
    assert credentials.read_text() == password + "\n"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600
    response = token_client(token).post("/api/v1/risk-profiles/", {"alias": "fresh"}, format="json")
    assert response.status_code == 201


@pytest.mark.django_db
def test_demo_is_idempotent() -> None:
    _, password, token = demo_output(run("demo")[0])
    before = config_state()
    status, again_password, again_token = demo_output(run("demo")[0])
    assert status == "demo configuration already loaded"
    assert config_state() == before
    assert ConfigRevision.objects.count() == 1
    assert (again_password, again_token) == (password, token)
    assert get_user_model().objects.filter(username="admin").count() == 1


@pytest.mark.django_db
def test_demo_never_overwrites_an_edited_configuration() -> None:
    run("demo")
    config_update(mutate=lambda s: parse_toml(BASE_TOML).snapshot)
    before = config_state()
    status, _, _ = demo_output(run("demo")[0])
    assert status == (
        "a configuration is already present and differs from the demo; left unchanged "
        "(--replace loads the demo over it)"
    )
    assert config_state() == before
    status, _, _ = demo_output(run("demo", "--replace")[0])
    assert status == "demo configuration loaded"
    assert "coordinator" in config_snapshot_get().agents


@pytest.mark.django_db
def test_demo_keeps_a_password_the_admin_changed() -> None:
    run("demo")
    admin = get_user_model().objects.get(username="admin")
    admin.set_password("my own new password")
    admin.save()
    _, password, _ = demo_output(run("demo")[0])
    assert password == "(unchanged)"
    admin.refresh_from_db()
    assert admin.check_password("my own new password")
