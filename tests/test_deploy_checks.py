"""Production settings pass Django's deployment checks, and the models match their migrations."""

from __future__ import annotations

import os
import secrets
import string
import subprocess
import sys
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent


def manage(*args: str, data_dir: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=BASE_DIR,
        env={**os.environ, "DATA_DIR": str(data_dir), **env},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_check_deploy_reports_no_issues_with_production_settings(tmp_path: Path) -> None:
    secret_key = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(50))
    result = manage(
        "check",
        "--deploy",
        data_dir=tmp_path,
        DJANGO_DEBUG="false",
        CLAWBOARD_TLS="true",
        SECRET_KEY=secret_key,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == "System check identified no issues (0 silenced).\n"


def test_check_deploy_warns_about_debug_mode(tmp_path: Path) -> None:
    # The check above could pass vacuously if the deploy checks never ran; here they must speak.
    result = manage("check", "--deploy", data_dir=tmp_path, DJANGO_DEBUG="true")
    assert "(security.W018) You should not have DEBUG set to True in deployment." in result.stderr


def test_models_have_no_missing_migrations(tmp_path: Path) -> None:
    result = manage("makemigrations", "--check", "--dry-run", data_dir=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "No changes detected\n"
