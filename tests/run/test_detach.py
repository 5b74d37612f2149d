"""Runs that outlive the terminal (issue 25, item 1), with real processes: ``run --detach``
survives a hang-up of the starting terminal's session; ``status``, ``logs -f`` and ``attach``
follow it from other processes (a hang-up of a viewer only detaches it); ``runs rm``/``gc``
refuse it while it runs; ``cancel`` from a third process ends it with no process left (read in
/proc); a supervisor killed with SIGKILL leaves no worker behind and the run is found lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_supervision import _workload, read_until_measure, run_processes

from accelctl import exitcodes
from accelctl.contract import supervision
from accelctl.run import store
from accelctl.run.store import liveness

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
pytestmark = pytest.mark.slow


def accelctl(*argv: str, runs: Path, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *argv, "--runs-dir", str(runs)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=kw.pop("timeout", 120), **kw)


def viewer(*argv: str, runs: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "accelctl.cli", *argv, "--runs-dir", str(runs)], cwd=ROOT,
                            env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def state(run_id: str, runs: Path) -> dict:
    done = accelctl("status", run_id, "--json", runs=runs)
    return json.loads(done.stdout)["result"]["runs"][0]


def wait_for_step(run_id: str, runs: Path, step: int = 3, timeout_s: float = 300) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = state(run_id, runs)
        assert now["state"] == "running", now
        if now["step"] >= step:
            return now
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} did not reach step {step} in {timeout_s} s")


def read_until(proc: subprocess.Popen, text: str) -> str:
    return read_until_measure(proc, 60, text)


def session_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[3])


def start_detached(wl: Path, workload: str, runs: Path) -> tuple[str, subprocess.Popen]:
    """``accelctl run --detach`` as the leader of a session of its own (a terminal's), hung up
    (SIGHUP to that whole session's process group) as soon as it printed the run id."""
    starter = subprocess.Popen([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-w", workload, "--detach",
                                "--runs-dir", str(runs)], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    run_id = starter.stdout.readline().strip()  # type: ignore[union-attr]
    try:
        os.killpg(starter.pid, signal.SIGHUP)
    except ProcessLookupError:  # it had returned already, with everything of its group
        pass
    starter.wait(timeout=30)
    assert store.is_run_id(run_id), (run_id, starter.stderr.read())  # type: ignore[union-attr]
    return run_id, starter


def test_a_detached_ddp_run_survives_a_hangup_is_followed_and_cancelled_from_other_processes(tmp_path):
    wl, workload = _workload(tmp_path, "ddp_cpu")
    runs = tmp_path / "runs"
    t0 = time.monotonic()
    run_id, starter = start_detached(wl, workload, runs)
    assert time.monotonic() - t0 < 30  # it returned at once (python start-ups on a busy machine apart)
    run_dir = runs / run_id
    ident = store.read_json(run_dir / store.RUNNER_FILE)["runner"]
    supervisor = int(ident.split(":")[0])
    assert session_of(supervisor) == supervisor != starter.pid  # a session of its own: setsid
    wait_for_step(run_id, runs)
    assert len(run_processes(run_dir)) >= 3  # torchrun and two ranks, after the hang-up

    follower = viewer("logs", run_id, "-f", runs=runs)
    first = viewer("attach", run_id, runs=runs)
    read_until(first, f"run {run_id}")  # the console stream from the start
    first.send_signal(signal.SIGHUP)  # a viewer's hang-up only detaches it
    assert first.wait(timeout=30) == exitcodes.STOPPED
    assert "detached from run" in first.stderr.read()  # type: ignore[union-attr]
    assert state(run_id, runs)["state"] == "running"

    for argv in (("runs", "rm", run_id), ("runs", "gc", "--older-than", "0s"), ("runs", "gc", "--failed")):
        kept = accelctl(*argv, runs=runs)
        assert run_dir.is_dir(), argv
        if "--failed" not in argv:
            assert kept.returncode == exitcodes.USAGE and f"kept {run_id}: it is in progress" in kept.stderr, kept

    second = viewer("attach", run_id, runs=runs)
    read_until(second, "· measure")
    done = accelctl("cancel", run_id, runs=runs)
    assert done.returncode == 0, done.stderr
    assert "cancelled: stopped; no process of it is left" in done.stdout
    assert run_processes(run_dir) == [] and not supervision.alive(ident)
    assert json.loads((run_dir / store.SUMMARY_FILE).read_text())["status"] == "stopped"

    rest = second.communicate(timeout=60)[0]
    assert second.returncode == exitcodes.STOPPED and "status: stopped" in rest  # the run's end, then its exit
    log = follower.communicate(timeout=60)[0]
    assert follower.returncode == 0 and "# accelctl: launch torchrun:" in log  # it ended with the run
    assert accelctl("runs", "rm", run_id, runs=runs).returncode == 0 and not run_dir.exists()


def test_a_detached_supervisor_killed_with_sigkill_leaves_no_worker_and_the_run_is_lost(tmp_path):
    wl, workload = _workload(tmp_path, "solo")
    runs = tmp_path / "runs"
    run_id, _ = start_detached(wl, workload, runs)
    run_dir = runs / run_id
    supervisor = wait_for_step(run_id, runs)["supervisor_pid"]
    assert run_processes(run_dir)
    os.kill(supervisor, signal.SIGKILL)
    deadline = time.monotonic() + 15
    while run_processes(run_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert run_processes(run_dir) == []  # the parent-death signal ended the worker
    assert state(run_id, runs)["state"] == "failed (runner lost)"
    (console,) = (runs / ".detached").iterdir()
    assert f"-{supervisor}_" in console.name  # named by its (ended) supervisor
    gc = accelctl("runs", "gc", "--failed", runs=runs)
    assert gc.stdout.strip() == f"removed {run_id}" and "console file(s) of 1 ended" in gc.stderr
    assert not run_dir.exists() and not console.exists()


def test_a_foreground_run_is_its_supervisor_viewed_and_cancel_from_elsewhere_ends_both(tmp_path):
    """``accelctl run`` (no --detach) starts the same supervisor, in a session of its own, and
    views it: ``status`` from another process names that supervisor, not the viewer; ``cancel``
    from a third ends the run, and the viewer ends with it (the run's end printed, exit 130)."""
    wl, workload = _workload(tmp_path, "solo")
    runs = tmp_path / "runs"
    fg = subprocess.Popen([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-w", workload, "--headless",
                           "--runs-dir", str(runs)], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        read_until(fg, "· measure")
        (run_dir,) = list(runs.iterdir())
        now = wait_for_step(run_dir.name, runs)
        supervisor, ident = now["supervisor_pid"], store.read_json(run_dir / store.RUNNER_FILE)["runner"]
        assert supervisor != fg.pid and session_of(supervisor) == supervisor != session_of(fg.pid)
        done = accelctl("cancel", run_dir.name, runs=runs)
        assert done.returncode == 0 and "cancelled: stopped" in done.stdout, done.stderr
        rest = fg.communicate(timeout=60)[0]
    finally:
        if fg.poll() is None:
            os.killpg(fg.pid, signal.SIGTERM)  # the viewer stops the run
            fg.wait(timeout=60)
        for left in runs.iterdir() if runs.exists() else ():  # a viewer killed on the way: its run still
            if (pid := liveness.supervisor(left)) is not None:
                os.kill(pid, signal.SIGTERM)
    assert fg.returncode == exitcodes.STOPPED and "status: stopped" in rest, rest[-2000:]
    assert run_processes(run_dir) == [] and not supervision.alive(ident)
