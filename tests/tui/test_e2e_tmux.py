"""End to end in a real terminal: tmux runs `accelctl run` on a small workload; the pane
shows the step-time panel advancing, then the final summary; `q` leaves and the summary
stays printed.  Needs tmux (apt-get install -y tmux) and torch; a few tens of seconds.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid

import pytest
from tui_fixtures import FIXTURES, ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (apt-get install -y tmux)")]

WORKLOAD = FIXTURES / "e2e" / "e2e.wl"
TOTAL = 802  # warm-up 2 + 800 measured steps


def _command(runs_dir) -> list[str]:
    return [sys.executable, "-m", "accelctl.cli", "run", str(WORKLOAD.relative_to(ROOT)), "--runs-dir", str(runs_dir)]


def _pane(session: str) -> str:
    return subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True, text=True).stdout


def test_accelctl_run_in_a_terminal_shows_the_run_live(tmp_path):
    pytest.importorskip("torch")
    session = f"accelctl-e2e-{uuid.uuid4().hex[:8]}"
    runs_dir = tmp_path / "runs"
    cmd = " ".join(shlex.quote(a) for a in _command(runs_dir))
    script = f"cd {shlex.quote(str(ROOT))} && export PYTHONPATH={shlex.quote(str(ROOT))} TERM=xterm-256color && " \
             f"{cmd}; echo EXIT=$?; sleep 120"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "100", "-y", "30", script], check=True)
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
        subprocess.run(["tmux", "send-keys", "-t", session, "q"], check=True)
        deadline = time.monotonic() + 30
        while "EXIT=" not in (after := _pane(session)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "EXIT=0" in after, after
        assert "status: ok" in after  # the summary stays in the terminal after the TUI is gone
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    (run,) = runs_dir.iterdir()
    assert json.loads((run / "summary.json").read_text())["status"] == "ok"
