"""A run started in the TUI goes through the same orchestrator as ``accelctl run``
(``accelctl.run.supervision.orchestrate``): the engine's pre-check refuses it before a run
folder exists with the line the CLI prints (the TUI used to skip the engine check).  ``r``'s runs,
their preflight and repeat series: tests/tui/test_tui_runs.py."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from tui_screen import wait_for

from accelctl.cli import main
from accelctl.tui.app import AccelctlApp, Selection

#: a cpu target its Kubernetes engine refuses to start with a runs folder off the pods' volume
K8S = Path(__file__).parents[1] / "data" / "workloads" / "k8s_cpu.wl"


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
        assert app.live is None and app.supervisor is None  # no process started
    assert not runs.exists() or not any(runs.iterdir())  # nothing launched, no run folder


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
