"""A reader of stdout that goes away: every verb ends with exit 141 (128 + SIGPIPE) and
no traceback (accelctl.cli.pipes).  Each command writes into a real pipe whose read end
is already closed (its first write meets EPIPE, however little it prints), and one runs
under a real shell as ``accelctl runs | head -1``."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
STORE = ROOT / "tests" / "report" / "fixtures" / "store"
WL = ROOT / "workloads" / "tiny_gpt2.wl"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

VERBS = {
    "report": ["report", "--runs-dir", str(STORE)],
    "report --reference": ["report", "--reference"],
    "runs": ["runs", "--runs-dir", str(STORE)],
    "runs --json": ["runs", "--runs-dir", str(STORE), "--json"],
    "compare": ["compare", "--runs-dir", str(STORE), "0001", "0002"],
    "validate": ["validate", str(WL)],
    "plan": ["plan", str(WL)],
    "estimate": ["estimate", str(WL)],
    "__complete": ["__complete", "runs", str(STORE)],
    "completion": ["completion", "bash"],
    "--help": ["--help"],
    "report --help": ["report", "--help"],
    "bare": [],
}


def into_closed_pipe(argv: list[str]) -> subprocess.CompletedProcess:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    try:
        return subprocess.run([sys.executable, "-m", "accelctl.cli", *argv], cwd=ROOT, env=ENV, stdout=write_end,
                              stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, timeout=300)
    finally:
        os.close(write_end)


def quiet_141(proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode == 141, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
    assert "a bug in accelctl" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_ends_141_on_a_closed_pipe(verb):
    quiet_141(into_closed_pipe(VERBS[verb]))


@pytest.mark.slow
def test_doctor_ends_141_on_a_closed_pipe():
    quiet_141(into_closed_pipe(["doctor"]))


@pytest.mark.parametrize("verb", ["runs", "__complete"])
def test_head_1_in_a_shell(verb):
    """``accelctl runs | head -1`` as a user types it: head reads one line and leaves."""
    argv = " ".join(shlex.quote(a) for a in VERBS[verb])
    proc = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} -m accelctl.cli {argv} | head -1; "
                                         "echo \"rc=${PIPESTATUS[0]}\" >&2"],
                          cwd=ROOT, env={**ENV, "COLUMNS": "80"}, capture_output=True, text=True, timeout=300)
    assert len(proc.stdout.splitlines()) == 1
    assert "Traceback" not in proc.stderr, proc.stderr
    # head may leave after the whole (short) output was written: then 0; never anything else
    assert proc.stderr.strip().splitlines()[-1] in ("rc=141", "rc=0"), proc.stderr


@pytest.mark.slow
def test_run_into_head_ends_141_and_the_runs_end_as_they_would(tmp_path):
    """``accelctl run F --headless | head -3``: the viewer of the run stops quietly at the closed
    pipe and detaches, as on a hang-up (exit 141); the runs go on under their supervisor and end
    ok, recorded (nothing half-written)."""
    pytest.importorskip("torch")
    runs = tmp_path / "runs"
    command = (f"{shlex.quote(sys.executable)} -m accelctl.cli run {shlex.quote(str(WL))} --headless "
               f"--runs-dir {shlex.quote(str(runs))} | head -3; echo \"rc=${{PIPESTATUS[0]}}\" >&2")
    proc = subprocess.run(["bash", "-c", command], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert len(proc.stdout.splitlines()) == 3
    assert proc.stderr.strip().splitlines()[-1] == "rc=141", proc.stderr
    assert "Traceback" not in proc.stderr and "failed in on_event" not in proc.stderr, proc.stderr
    assert "the reader of stdout went away: detached from run" in proc.stderr, proc.stderr
    import json
    import time

    deadline = time.monotonic() + 300  # the runs go on under their supervisor: both end
    while len(list(runs.glob("*/summary.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    dirs = sorted(runs.iterdir())
    statuses = [json.loads((d / "summary.json").read_text())["status"] for d in dirs]
    assert statuses == ["ok", "ok"]  # tiny_gpt2.wl: a training and a generation workload
