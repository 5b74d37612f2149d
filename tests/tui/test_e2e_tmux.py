"""End to end in a real terminal: tmux runs `accelctl run` on a small workload; the pane
shows the step-time panel advancing, then the final summary; `q` leaves and the summary
stays printed; a hang-up of the pane's shell only detaches the TUI from the run's own supervisor:
the run goes on to ``ok`` (``accelctl status RUN``) and no process is left; the same for a run
``r`` started in ``accelctl tui``.  Needs tmux
(apt-get install -y tmux) and torch; a few tens of seconds.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from tui_fixtures import FIXTURES, ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install -y tmux)")]

WORKLOAD = FIXTURES / "e2e" / "e2e.wl"
TOTAL = 802  # warm-up 2 + 800 measured steps


def _command(runs_dir) -> list[str]:
    return [sys.executable, "-m", "accelctl.cli", "run", str(WORKLOAD.relative_to(ROOT)), "--runs-dir", str(runs_dir)]


def _tmux(session: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """``tmux`` on the test's own server (``-L``: a socket named after its session).  A shared
    server would give every pane the environment of the test that started the server -- its
    leftover token among it (tests/leftovers.py), so that test's end would take another test's
    run for its own and end it (seen: a hang-up test's run "stopped" under xdist)."""
    return subprocess.run(["tmux", "-L", session, *args], **kwargs)


def _kill(session: str) -> None:
    """The session killed (its pane's shell gets SIGHUP); its server ends with its last session,
    and the server's socket is removed."""
    _tmux(session, "kill-session", "-t", session, capture_output=True)
    (Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / session).unlink(missing_ok=True)


def _pane(session: str) -> str:
    return _tmux(session, "capture-pane", "-p", "-t", session, capture_output=True, text=True).stdout


def _start(runs_dir, command: list[str] | None = None) -> str:
    session = f"accelctl-e2e-{uuid.uuid4().hex[:8]}"
    cmd = " ".join(shlex.quote(a) for a in command or _command(runs_dir))
    script = f"cd {shlex.quote(str(ROOT))} && export PYTHONPATH={shlex.quote(str(ROOT))} TERM=xterm-256color && " \
             f"{cmd}; echo EXIT=$?; sleep 120"
    _tmux(session, "-f", "/dev/null", "new-session", "-d", "-s", session, "-x", "100", "-y", "30", script, check=True)
    return session


def test_accelctl_run_in_a_terminal_shows_the_run_live(tmp_path):
    pytest.importorskip("torch")
    runs_dir = tmp_path / "runs"
    session = _start(runs_dir)
    try:
        progress: list[int] = []
        panes = []
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            pane = _pane(session)
            m = re.search(rf"(\d+)/{TOTAL} steps", pane)
            if m and "step time (ms)" in pane:
                done = int(m.group(1))
                if not progress or progress[-1] != done:
                    progress.append(done)
                    panes.append(pane)
            if "status ok" in pane:
                break
            time.sleep(0.1)
        else:
            pytest.fail("the run did not end in time; last pane:\n" + _pane(session))
        advancing = [p for p in progress if 0 < p < TOTAL]
        assert len(advancing) >= 2 and advancing == sorted(advancing), progress
        mid = panes[progress.index(advancing[0])]
        assert re.search(r"step\s+\d+\.\d ms", mid), mid  # the current step time, live
        final = _pane(session)
        assert f"{TOTAL}/{TOTAL} steps · ok" in final and "status ok" in final and "step time median" in final
        _tmux(session, "send-keys", "-t", session, "q", check=True)
        deadline = time.monotonic() + 30
        while "EXIT=" not in (after := _pane(session)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "EXIT=0" in after, after
        assert "status: ok" in after  # the summary stays in the terminal after the TUI is gone
    finally:
        _kill(session)
    (run,) = runs_dir.iterdir()
    assert json.loads((run / "summary.json").read_text())["status"] == "ok"


def _status(run_id: str, runs_dir) -> dict:
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "status", run_id, "--json", "--runs-dir",
                         str(runs_dir)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    (state,) = json.loads(cp.stdout)["result"]["runs"]
    return state


def test_a_hang_up_of_the_terminal_leaves_the_run_going_to_its_end(tmp_path):
    _hang_up_while_it_runs(tmp_path / "runs", None, b"")


def test_a_hang_up_of_accelctl_tui_leaves_the_run_r_started_going_to_its_end(tmp_path):
    """``accelctl tui FILE``, ``r``: the run is its own supervisor's, so a hang-up of the TUI
    (SIGHUP from the pane's shell) leaves it going."""
    runs_dir = tmp_path / "runs"
    command = [sys.executable, "-m", "accelctl.cli", "tui", str(WORKLOAD.relative_to(ROOT)), "--runs-dir",
               str(runs_dir)]
    _hang_up_while_it_runs(runs_dir, command, b"tui_e2e")


def _hang_up_while_it_runs(runs_dir, command: list[str] | None, press_r_after: bytes) -> None:
    """Start ``command`` in a pane (``r`` pressed once ``press_r_after`` shows), hang the pane up
    while the run's steps advance on screen: the run goes on to ``ok``, and nothing is left."""
    psutil = pytest.importorskip("psutil")
    pytest.importorskip("torch")
    session = _start(runs_dir, command)
    try:
        deadline = time.monotonic() + 180
        if press_r_after:
            while press_r_after.decode() not in _pane(session):
                assert time.monotonic() < deadline, _pane(session)
                time.sleep(0.1)
            _tmux(session, "send-keys", "-t", session, "r", check=True)
        while not re.search(rf"[1-9]\d*/{TOTAL} steps", _pane(session)):  # the run is going, on screen
            assert time.monotonic() < deadline, _pane(session)
            time.sleep(0.1)
        shell = psutil.Process(int(_tmux(session, "display-message", "-p", "-t", session, "#{pane_pid}",
                                         capture_output=True, text=True, check=True).stdout))
        started = shell.children(recursive=True)  # the TUI, its supervisor, the run's worker
        assert len(started) >= 3, started
    finally:
        _kill(session)  # the pane's shell: SIGHUP
    (run,) = [p for p in runs_dir.iterdir() if not p.name.startswith(".")]
    assert _status(run.name, runs_dir)["state"] == "running"  # the hang-up did not stop it
    deadline = time.monotonic() + 240
    while (state := _status(run.name, runs_dir))["state"] == "running":
        assert time.monotonic() < deadline, state
        time.sleep(0.5)
    assert state["state"] == "ok", state
    assert json.loads((run / "summary.json").read_text())["status"] == "ok"
    gone, alive = psutil.wait_procs(started, timeout=30)
    assert not alive, alive  # the viewer, the supervisor and the worker all ended
