"""A run started in the TUI goes through the same orchestrator as ``accelctl run``
(``accelctl.run.orchestrate``, issue 25 item 3): the engine's pre-check refuses it before a run
folder exists with the line the CLI prints; ``--preflight`` runs the same preflight first; a
``measure { repeat = N }`` workload runs as N independent processes, one series (the TUI used to
skip the engine check and the preflight and to run 1 of the N)."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from tui_screen import wait_for

from accelctl.cli import main
from accelctl.tui.app import AccelctlApp, Selection

#: a cpu target its Kubernetes engine refuses to start with a runs folder off the pods' volume
K8S = Path(__file__).parents[1] / "data" / "workloads" / "k8s_cpu.wl"

#: two independent processes of a tiny run (measure { repeat = 2 })
REPEATED = """
workload twice {
  task pretrain { objective = mlm }
  model bert(layers = 1, hidden = 32, heads = 2)
  dataset synthetic(seq_len = 16)
  batch { micro = 2 }
  measure { warmup = 1 steps  steps = 2 steps  repeat = 2 }
  target cpu { devices = 1 }
}
"""


def _file(tmp_path, text: str):
    folder = tmp_path / "wl"
    folder.mkdir()
    path = folder / "w.wl"
    path.write_text(text, encoding="utf-8")
    return path


def _cli_stderr(*argv: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(list(argv))
    return code, err.getvalue()


@pytest.mark.asyncio
async def test_r_on_a_target_its_engine_cannot_start_is_refused_as_the_cli_refuses_it(tmp_path):
    path = _file(tmp_path, K8S.read_text(encoding="utf-8"))
    runs = tmp_path / "runs"
    code, err = _cli_stderr("run", str(path), "-t", "cpu", "--headless", "--runs-dir", str(runs))
    assert code == 1 and "is not on the shared volume the pods mount at /shared" in err
    assert not runs.exists()
    app = AccelctlApp(path, runs_root=runs, selection=Selection(path, "w", "cpu"))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: app._notifications, what="the refusal")
        shown = [n.message for n in app._notifications]
        assert err.strip() == f"accelctl: error: {shown[0]}", shown
        assert app.live is None
    assert not runs.exists() or not any(runs.iterdir())  # nothing launched, no run folder


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_tui_run_is_preflighted_and_runs_every_repeat_of_its_series(tmp_path):
    path = _file(tmp_path, REPEATED)
    runs = tmp_path / "runs"
    app = AccelctlApp(path, runs_root=runs, selection=Selection(path, "twice", "cpu"), preflight=True,
                      auto_exit=True)
    shown, notify = [], app.notify
    app.notify = lambda message, **kw: (shown.append(message), notify(message, **kw))[1]  # each notice, kept
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: app.series is not None and app.series.index == 2 and not app.live_running
                       and len([p for p in runs.glob("*/summary.json") if (p.parent / "series.json").exists()]) == 2,
                       timeout=600, what="both repeats of the series, each with its summary")
    preflights = [p for p in (runs / "preflight").iterdir() if p.is_dir()]
    assert len(preflights) == 1, preflights  # the preflight, stored apart as `run --preflight` stores it
    assert shown[0] == "preflight of target cpu (world 1, engine local) ...", shown
    assert shown[1].startswith("preflight ok: all-reduce over 1 rank(s) (local, "), shown  # as run --preflight says
    assert shown[2:] == [f"repeat {i} of 2 (an independent process; measure {{ repeat = 2 }})" for i in (1, 2)]
    folders = sorted(p for p in runs.iterdir() if (p / "series.json").exists())
    marks = [json.loads((p / "series.json").read_text()) for p in folders]
    assert sorted(m["index"] for m in marks) == [1, 2] and {m["of"] for m in marks} == {2}
    assert len({m["id"] for m in marks}) == 1
    assert all(json.loads((p / "summary.json").read_text())["status"] == "ok" for p in folders)
    assert app.return_code == 0


@pytest.mark.asyncio
async def test_attach_shows_a_run_another_process_supervises_and_leaving_never_stops_it(runs_dir):
    """``accelctl attach RUN`` on a terminal: the run's view, followed from its folder while it goes
    on; ``q`` leaves the viewer and the run still ends by itself, ok."""
    from tui_fixtures import WORKLOADS, fake_plan, spec_json

    from accelctl.api import launch
    from accelctl.tui.screens.run import RunScreen

    handle = launch(fake_plan("tui_train-cpu-", delay_s=0.4), source_text=None, spec_json=spec_json("tui_train-cpu-"),
                    runs_root=runs_dir)
    app = AccelctlApp(WORKLOADS, runs_root=runs_dir, start="runs", attach=handle.run_dir)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the attached run's view")
        screen = app.screen
        await wait_for(pilot, lambda: 0 < len(screen.model.rank0) < 10, timeout=20, what="its first steps, live")
        assert not handle.done and app.live is None  # the viewer started nothing and owns nothing
        await pilot.press("q")
        await pilot.pause()
    assert not handle.done  # leaving the viewer left the run going
    assert handle.wait(timeout=60).status == "ok"


@pytest.mark.slow
def test_accelctl_attach_on_a_terminal_opens_the_tui_and_in_a_pipe_streams(tmp_path):
    import shutil
    import subprocess
    import sys

    from cli_pty import ROOT, in_pty
    from tui_fixtures import recorded

    runs = tmp_path / "runs"
    runs.mkdir()
    run = shutil.copytree(recorded("tui_train-cpu-"), runs / recorded("tui_train-cpu-").name)
    code, out = in_pty(["attach", run.name, "--runs-dir", str(runs)], columns=100, rows=30, keys=b"q",
                       after=b"tui_train", timeout=90)
    assert b"\x1b[?1049h" in out and code == 0, out[-2000:]  # the alternate screen: the TUI; the run's ok status
    piped = subprocess.run([sys.executable, "-m", "accelctl.cli", "attach", run.name, "--runs-dir", str(runs)],
                           cwd=ROOT, capture_output=True, text=True, timeout=90)
    assert piped.returncode == 0 and "\x1b[" not in piped.stdout + piped.stderr  # the console stream, plain
    assert "tui_train" in piped.stdout, piped.stdout[-500:]
