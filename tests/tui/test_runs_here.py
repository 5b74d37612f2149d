"""The TUI starts what runs here (issue 23 item 4): its default selection is a target whose
devices this machine has, and `r` on a target whose devices it lacks is refused before a run
folder exists, with the line `accelctl run` prints."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList
from tui_screen import wait_for

from accelctl.api import load
from accelctl.plan.select import missing_here
from accelctl.tui.app import AccelctlApp



#: first in the folder, first target a DL1 under the local engine (as bert_1_5b_zero1.wl's dl1_1n)
ACCEL_FIRST = """
workload accel_first {
  task pretrain { objective = mlm }
  model bert(layers = 1, hidden = 32, heads = 2)
  measure { warmup = 1 steps  steps = 2 steps }
  target dl1 { instance = dl1.24xlarge  devices = 8 }
  target a100 { device = a100  devices = 1 }
  target cpu { devices = 1 }
}
"""
#: a later file whose targets all run here
CPU_ONLY = """
workload cpu_only {
  task pretrain { objective = mlm }
  model bert(layers = 1, hidden = 32, heads = 2)
  target cpu { devices = 1 }
}
"""


def _folder(tmp_path):
    wl = tmp_path / "wl"
    wl.mkdir()
    (wl / "a_accel.wl").write_text(ACCEL_FIRST, encoding="utf-8")
    (wl / "b_cpu.wl").write_text(CPU_ONLY, encoding="utf-8")
    return wl


@pytest.mark.asyncio
async def test_the_default_selection_is_a_target_that_runs_here(tmp_path):
    app = AccelctlApp(_folder(tmp_path), runs_root=tmp_path / "runs")
    app.present_devices = {"cpu": "always"}  # this machine as the test says it is, whatever it has
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert app.selection.path.name == "a_accel.wl"
        assert (app.selection.workload, app.selection.target) == ("accel_first", "cpu")
        targets = app.screen.query_one("#wl-targets", OptionList)
        assert str(targets.get_option_at_index(targets.highlighted).prompt) == "accel_first › cpu"


@pytest.mark.asyncio
async def test_r_on_a_target_whose_devices_are_missing_is_refused_before_a_run_exists(tmp_path):
    folder = _folder(tmp_path)
    runs = tmp_path / "runs"
    app = AccelctlApp(folder, runs_root=runs)
    app.present_devices = {"cpu": "always"}
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        app.screen.query_one("#wl-targets", OptionList).focus()
        await pilot.press("up")  # from cpu to a100 in the target list
        await pilot.pause()
        await wait_for(pilot, lambda: app.selection.target == "a100", what="the a100 target")
        await pilot.press("r")
        await pilot.pause()
        spec = load(folder / "a_accel.wl")[0]
        line = missing_here(spec, spec.target("a100"), present={"cpu": "always"})
        shown = [n.message for n in app._notifications]
        assert line in shown and "accelctl doctor" in line and "--rehearse" in line
        assert app.live is None
    assert not runs.exists() or not any(runs.iterdir())


def test_the_live_tui_entry_refuses_it_too(tmp_path, capsys, monkeypatch):
    """`python -m accelctl.tui.live FILE -t T` (run_live, the in-process path) refuses it as `accelctl run` does."""
    from accelctl.plan import select
    from accelctl.tui import live

    monkeypatch.setattr(select, "present_adapters", lambda: {"cpu": "always"})
    folder = _folder(tmp_path)
    code = live.main([str(folder / "a_accel.wl"), "-t", "a100", "--runs-dir", str(tmp_path / "runs")])
    assert code == 4 and "needs 1 x a100" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()
