"""The TUI attached to live runs: real runner, real processes (``fake_worker.py`` replaying
a recorded run, so no torch and a few tenths of a second per run)."""

from __future__ import annotations

import json
import os

import pytest
from tui_fixtures import WORKLOADS, fake_plan, recorded, spec_json
from tui_screen import screen_text, wait_for

from accelctl.api import launch
from accelctl.contract.events import read_events
from accelctl.tui.app import AccelctlApp
from accelctl.tui.live import run_live
from accelctl.tui.screens.dialogs import QuitScreen
from accelctl.tui.screens.run import RunScreen


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def start(runs_dir, run="tui_train-cpu-", **options):
    return launch(fake_plan(run, **options), source_text=None, spec_json=spec_json(run), runs_root=runs_dir)


@pytest.mark.asyncio
async def test_live_run_panels_follow_the_run_and_end_with_its_summary(runs_dir):
    handle = start(runs_dir, delay_s=0.3)
    app = AccelctlApp(WORKLOADS, runs_root=runs_dir, live_handle=handle)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run view")
        screen = app.screen
        await wait_for(pilot, lambda: 0 < len(screen.model.rank0) < 10, what="the first steps")
        seen = len(screen.model.rank0)
        # the top bar redraws at most once a second (the TUI must not slow the run)
        await wait_for(pilot, lambda: "running" in screen_text(app).splitlines()[1], timeout=5,
                       what="the running state in the top bar")
        await wait_for(pilot, lambda: screen.model.summary is not None, timeout=20, what="the end of the run")
        assert len(screen.model.rank0) == 10 > seen
        assert screen.model.status == "ok"
        await wait_for(pilot, lambda: "10/10 steps · ok" in screen_text(app) and "status ok" in screen_text(app),
                       timeout=5, what="the final summary on screen")
        await pilot.press("q")  # the run is over: no question
        await pilot.pause()
    assert app.return_code == 0
    summary = json.loads((handle.run_dir / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["stats"]["step_time"]["count"] == 8


@pytest.mark.asyncio
async def test_stop_from_the_tui_stops_the_process_group_and_records_stopped(runs_dir):
    handle = start(runs_dir, delay_s=2)
    app = AccelctlApp(WORKLOADS, runs_root=runs_dir, live_handle=handle)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.model.rank0, timeout=20,
                       what="a step")
        pids = list(handle.pids)
        await pilot.press("x")
        await wait_for(pilot, lambda: app.screen.model.summary is not None, timeout=20, what="the stop")
        assert app.screen.model.status == "stopped"
        await wait_for(pilot, lambda: "status stopped" in screen_text(app), timeout=5, what="the stopped status")
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 130
    assert handle.wait().status == "stopped"
    assert not any(_alive(p) for p in pids)
    assert json.loads((handle.run_dir / "summary.json").read_text())["status"] == "stopped"


@pytest.mark.asyncio
async def test_quitting_while_live_asks_first_then_stops_the_run(runs_dir):
    # 10 steps 3 s apart: the run must still be going after two dialogs (at 0.5 s a loaded CI
    # machine saw the run end between the question and the answer)
    handle = start(runs_dir, delay_s=3)
    app = AccelctlApp(WORKLOADS, runs_root=runs_dir, live_handle=handle)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.model.rank0, timeout=20,
                       what="a step")
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen)
        assert "Stop it" in screen_text(app)
        await pilot.press("escape")  # keep running
        await pilot.pause()
        assert isinstance(app.screen, RunScreen) and not handle.done
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("s")  # stop and quit: the app leaves once the run has ended
        await wait_for(pilot, lambda: handle.done, timeout=20, what="the run to stop")
        await pilot.pause(0.2)
    assert app.return_code == 130
    assert handle.wait().status == "stopped"


def test_run_live_returns_the_runs_exit_code(runs_dir):
    plan = fake_plan("tui_train-cpu-", delay_s=0.01)
    assert run_live(plan, None, None, runs_dir, headless=True, auto_exit=True, size=(80, 24)) == 0
    failing = fake_plan("tui_train-cpu-", delay_s=0.01, fail_at=3)
    assert run_live(failing, None, None, runs_dir, headless=True, auto_exit=True, size=(80, 24)) == 1


class BrokenApp(AccelctlApp):
    """A TUI that dies as soon as the first events arrive."""

    async def start_live(self, handle) -> None:
        await super().start_live(handle)
        raise RuntimeError("the display broke")


def test_when_the_in_process_tui_dies_its_run_is_stopped_and_nothing_is_left(runs_dir, capsys):
    """``run_live`` (the overhead benchmark's in-process viewer): the run belongs to this process,
    so a display that dies stops it (``accelctl run`` on a terminal only detaches: its run has a
    supervisor of its own, tests/tui/test_supervised.py)."""
    plan = fake_plan("tui_train-cpu-", delay_s=0.3)
    rc = run_live(plan, None, None, runs_dir, headless=True, size=(80, 24), app_factory=BrokenApp)
    assert rc == 130
    run_dir = next(runs_dir.iterdir())
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "stopped"
    assert sum(e.kind == "step" for e in read_events(run_dir / "events.jsonl")) < sum(
        e.kind == "step" for e in read_events(recorded("tui_train-cpu-") / "events.jsonl"))
    pids = json.loads((run_dir / "runner.json").read_text()).get("pgids") or []
    assert not any(_alive(p) for p in pids)
    out, err = capsys.readouterr()
    assert "RuntimeError: the display broke" in err and "the TUI ended with an error; stopping run" in err
    assert "status: stopped" in out
