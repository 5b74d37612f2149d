"""Fixtures of the TUI tests (the data they use lives in ``tui_fixtures``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_fixtures import ROOT


@pytest.fixture
def runs_dir(tmp_path) -> Path:
    return tmp_path / "runs"


@pytest.fixture(autouse=True)
def _repo_cwd(monkeypatch):
    """Paths on screen are shown relative to the working folder: run from the repository."""
    monkeypatch.chdir(ROOT)
