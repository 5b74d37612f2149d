"""Issue 27 item 4 (the queue of several workloads, "1 of 2", is shown as the run's supervisor
starts them: tests/tui/test_supervised.py): the clock ticks from the launch through the setup that sends no event;
plot axes of non-negative series stay at or above zero; the log panel hides the libraries'
warnings (``a`` shows them); ``accelctl tui`` exits 0 after a quit whatever the last run did.
Real runner, real processes (``fake_worker.py`` replaying a recorded run)."""

from __future__ import annotations

import json
import time

import pytest
from tui_fixtures import WORKLOADS, fake_plan, recorded, spec_json
from tui_screen import screen_text, wait_for

from accelctl.api import launch
from accelctl.tui.app import AccelctlApp
from accelctl.tui.model import RunModel
from accelctl.tui.screens.run import RunScreen
from accelctl.tui.widgets.logtail import LogTail


def start(runs_dir, run="tui_train-cpu-", **options):
    return launch(fake_plan(run, **options), source_text=None, spec_json=spec_json(run), runs_root=runs_dir)


def test_the_clock_ticks_from_the_launch_before_any_event():
    model = RunModel(total_steps=10, started_wall=time.time() - 28.0)
    assert model.live and model.progress().elapsed_s >= 28.0  # 28 s of imports and build, no event yet
    assert model.phase_label.startswith("starting")
    model.end("ok")
    frozen = model.progress().elapsed_s
    time.sleep(0.05)
    assert model.progress().elapsed_s == frozen  # stops with the run
    assert RunModel().progress().elapsed_s == 0.0  # a replay: the events' own span


@pytest.mark.asyncio
async def test_the_progress_line_moves_during_a_silent_setup(runs_dir):
    handle = start(runs_dir, delay_s=0.5, setup_s=3.0)
    app = AccelctlApp(WORKLOADS, runs_root=runs_dir, live_handle=handle)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run view")
        await wait_for(pilot, lambda: "0:00:02" in screen_text(app) and not app.screen.model.rank0, timeout=10,
                       what="two seconds on the clock before the first step")
        await pilot.press("x")
        await wait_for(pilot, lambda: app.screen.model.summary is not None, timeout=20, what="the stop")
        await pilot.press("q")


@pytest.mark.asyncio
async def test_axes_of_non_negative_series_never_go_below_zero(runs_dir):
    from accelctl.tui.feed import ReplaySource

    app = AccelctlApp(WORKLOADS, runs_root=runs_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.push_screen(RunScreen(ReplaySource(recorded("tui_train-cpu-"), speed=None), closable=True))
        await wait_for(pilot, lambda: app.screen.model.summary is not None, timeout=20, what="the replay")
        await pilot.pause(0.3)
        text = screen_text(app)
    axis = [w for line in text.splitlines() for w in line.split() if w.startswith("-") and w[1:2].isdigit()]
    assert not axis, f"negative axis labels: {axis}"


def test_the_log_panel_hides_the_libraries_warnings_until_asked():
    tail = LogTail()
    for line in ("/x/torch/utils/_pytree.py:185: FutureWarning: torch.utils._pytree._register_pytree_node is "
                 "deprecated", "  warnings.warn(", "`loss_type=None` was set in the config but it is unrecognised",
                 "step 3 loss 2.1"):
        tail.lines.append(("log", line))
    tail.lines.append(("warning", "rank 0: FutureWarning from accelctl itself stays"))
    shown, hidden = tail.visible()
    assert hidden == 3 and [ln for _, ln in shown] == ["step 3 loss 2.1", "rank 0: FutureWarning from accelctl "
                                                                            "itself stays"]
    tail.show_all = True
    assert tail.visible() == (list(tail.lines), 0)


def test_accelctl_tui_exits_0_after_a_quit_even_if_the_last_run_failed(monkeypatch):
    import accelctl.tui.app as app_module
    from accelctl.cli import tui as cli

    class Quits(app_module.AccelctlApp):
        def run(self, **kwargs):  # the user's quit after a failed run: the app's own code is 1
            self._return_code = 1

        @property
        def return_code(self):
            return self._return_code

    monkeypatch.setattr(app_module, "AccelctlApp", Quits)
    monkeypatch.setattr("accelctl.tui.priority.lower_this_thread", lambda: None)

    class Args:
        path, runs_dir, view, preflight = None, None, "workloads", False

    assert cli.cmd_tui(Args()) == 0
