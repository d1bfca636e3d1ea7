from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _data_dir(settings: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """Every test gets its own DATA_DIR (workspaces, delegate_results, ...)."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    settings.DATA_DIR = data_dir  # type: ignore[attr-defined]
    return data_dir
