"""The runs view names the scheduler's job behind a run (``scheduler.json``: id, state, exit code)."""

from __future__ import annotations

import shutil

import pytest
from tui_fixtures import STORE, WORKLOADS
from tui_screen import screen_text

from accelctl.contract import scheduler
from accelctl.tui.app import AccelctlApp

pytestmark = pytest.mark.asyncio


async def test_a_slurm_runs_job_shows_in_the_detail(tmp_path):
    run = next(p for p in sorted(STORE.iterdir()) if p.is_dir())
    shutil.copytree(run, tmp_path / run.name)
    scheduler.write(tmp_path / run.name, scheduler.SchedulerJob("slurm", "77", "TIMEOUT", 1))
    app = AccelctlApp(WORKLOADS, runs_root=tmp_path)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("4")
        await pilot.pause()
        assert "slurm 77 TIMEOUT exit 1" in screen_text(app)
