"""Reading the store never writes it (issue 28): a lost run (its runner SIGKILLed: no summary,
half its events never merged) is shown ``failed (runner lost)`` with its partial figures by
``runs``, ``report`` and ``status`` -- in a folder made read-only (chmod, and checked byte for
byte, since root writes through a mode) -- and its folder is left exactly as it was; the write
is ``runs gc``'s (the folder's next owner), under its claim."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from test_store_hostile import lost  # noqa: F401  (the fixture: one real lost run, copied per test)

from accelctl.run import store

ROOT = Path(__file__).resolve().parents[2]
def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder`` (itself included): its kind, mode, size, mtime and bytes' hash."""
    out = {}
    for path in [folder, *sorted(folder.rglob("*"))]:
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if stat.S_ISREG(st.st_mode) else ""
        out[str(path.relative_to(folder.parent))] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_size,
                                                     st.st_mtime_ns, digest)
    return out


def accelctl(*argv: str) -> subprocess.CompletedProcess:
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                        timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    assert "Traceback" not in cp.stderr and cp.returncode != 70, cp.stderr[-3000:]
    return cp


def _read_only(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode & ~0o222)


def _writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(path.stat().st_mode | 0o200)


@pytest.mark.parametrize("read_only", [True, False], ids=["read-only", "writable"])
def test_runs_report_and_status_show_a_lost_run_and_leave_its_folder_as_it_was(lost, read_only):
    runs = lost.parent
    if read_only:
        _read_only(runs)
    before = snapshot(runs)
    try:
        cp = accelctl("runs", "--runs-dir", str(runs), "--json")
        assert cp.returncode == 0, cp.stderr
        (listed,) = json.loads(cp.stdout)["result"]["runs"]
        assert listed["status"] == "failed (runner lost)", listed
        cp = accelctl("report", lost.name, "--runs-dir", str(runs), "-f", "md")
        assert cp.returncode == 0 and lost.name in cp.stdout, cp.stderr
        cp = accelctl("status", lost.name, "--runs-dir", str(runs), "--json")
        (state,) = json.loads(cp.stdout)["result"]["runs"]
        assert cp.returncode == 0 and state["state"] == "failed (runner lost)", cp.stdout
        cp = accelctl("status", "--runs-dir", str(runs))  # every run in progress: none
        assert cp.returncode == 0, cp.stderr
        assert snapshot(runs) == before, "reading the store changed it"
    finally:
        _writable(runs)


def test_runs_gc_writes_the_lost_runs_result_that_reading_only_shows(lost):
    runs = lost.parent
    cp = accelctl("runs", "gc", "--older-than", "1d", "--runs-dir", str(runs))
    assert cp.returncode == 0 and "wrote the result of 1 lost run(s) into its folder" in cp.stderr, cp.stderr
    summary = json.loads((lost / store.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and summary["failure"]["reason"] == "runner_lost"
    events = (lost / store.EVENTS_FILE).read_text().splitlines()
    assert json.loads(events[-1])["reason"] == "runner_lost"
    before = snapshot(runs)
    cp = accelctl("runs", "gc", "--older-than", "1d", "--runs-dir", str(runs))
    assert cp.returncode == 0 and "lost run" not in cp.stderr, cp.stderr  # written once
    assert {k: v for k, v in snapshot(runs).items() if "owner.lock" not in k and k != runs.name} == \
        {k: v for k, v in before.items() if "owner.lock" not in k and k != runs.name}
