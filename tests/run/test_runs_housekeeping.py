"""``accelctl runs rm`` / ``runs gc`` and the fast parts of ``status``/``logs``/``cancel`` (issue 25,
items 4 and 1): real runs of the fake worker (real processes) and real ownership locks held by
other processes; never a run in progress removed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_run_ownership import hold_in_another_process

from accelctl import exitcodes
from accelctl.cli import main
from accelctl.run import store
from accelctl.run.store import housekeeping
from accelctl.run.supervision import runner
from accelctl.run.viewers import follow

ROOT = Path(__file__).resolve().parents[2]


def finished(make_plan, runs: Path, mode: str = "ok") -> store.RunRecord:
    handle = runner.launch(make_plan(mode, steps=2, repeat=1), source_text=None, spec_json=None, runs_root=runs)
    handle.wait(timeout=60)
    return store.load_run(handle.run_id, runs)


def cli(*argv: str, runs: Path) -> tuple[int, dict]:
    """``accelctl ARGV --runs-dir RUNS --json`` in this process: its exit code and document."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main([*argv, "--runs-dir", str(runs), "--json"])
    return code, json.loads(out.getvalue())


def test_rm_removes_finished_runs_and_refuses_one_owned_by_another_process(make_plan, runs):
    ok, failed = finished(make_plan, runs), finished(make_plan, runs, "exception")
    holder = hold_in_another_process(failed.path)  # as a runner or a resume holds it
    try:
        code, doc = cli("runs", "rm", ok.id, failed.id, runs=runs)
        assert code == exitcodes.USAGE, doc
        assert doc["result"]["removed"] == [ok.id]
        assert doc["result"]["running"] == [{"id": failed.id, "why": f"in use by accelctl pid {holder.pid}"}]
        assert not ok.path.exists() and failed.path.is_dir()
    finally:
        holder.kill()
        holder.wait()
    code, doc = cli("runs", "rm", failed.id, runs=runs)
    assert code == exitcodes.OK and doc["result"]["removed"] == [failed.id] and not failed.path.exists()


def test_rm_of_an_unknown_run_is_a_usage_error_and_removes_nothing(make_plan, runs):
    ok = finished(make_plan, runs)
    code, doc = cli("runs", "rm", ok.id, "ffff-no-such-run", runs=runs)
    assert code == exitcodes.USAGE and "no run 'ffff-no-such-run'" in doc["error"]["message"]
    assert ok.path.is_dir()


def test_gc_failed_dry_run_then_for_real_keeps_ok_and_running_runs(make_plan, runs):
    ok, bad = finished(make_plan, runs), finished(make_plan, runs, "exception")
    assert bad.status == "failed"
    going = runner.launch(make_plan("ok", steps=400, repeat=1, options={"step_sleep": 0.05}), source_text=None,
                          spec_json=None, runs_root=runs)
    try:
        code, doc = cli("runs", "gc", "--failed", "--dry-run", runs=runs)
        assert code == exitcodes.OK and doc["result"]["removed"] == [bad.id] and doc["result"]["dry_run"]
        assert bad.path.is_dir()
        code, doc = cli("runs", "gc", "--older-than", "0s", runs=runs)  # every run: the running one kept
        assert code == exitcodes.USAGE, doc
        assert sorted(doc["result"]["removed"]) == sorted([ok.id, bad.id])
        assert [r["id"] for r in doc["result"]["running"]] == [going.run_id]
        assert going.run_dir.is_dir() and not ok.path.exists() and not bad.path.exists()
    finally:
        going.stop(grace_s=0.5)
        going.wait(timeout=60)


def test_gc_needs_a_criterion_and_a_real_age(runs):
    code, doc = cli("runs", "gc", runs=runs)
    assert code == exitcodes.USAGE and "--failed or --older-than" in doc["error"]["message"]
    code, doc = cli("runs", "gc", "--older-than", "soon", runs=runs)
    assert code == exitcodes.USAGE and "neither an age" in doc["error"]["message"]


def test_gc_candidates_by_status_and_age(tmp_path):
    def rec(name, status, start):
        return store.RunRecord(id=name, path=tmp_path / name, workload="w", target="t", backend="cpu",
                               status=status, started="", summary={"started_unix_s": start})

    runs = [rec("a", "ok", 100.0), rec("b", "failed", 100.0), rec("c", "failed (runner lost)", 300.0),
            rec("d", "stopped", 100.0), rec("e", "not started (runner lost)", 300.0),
            rec("f", "unreadable: summary.json is not JSON", 100.0), rec("g", "incomplete", 100.0)]
    start = follow_start = lambda r: r.summary["started_unix_s"]  # noqa: E731
    assert [r.id for r in housekeeping.gc_candidates(runs, failed=True, started_before=None,
                                                      started_unix_s=start)] == ["b", "c", "e"]
    assert [r.id for r in housekeeping.gc_candidates(runs, failed=False, started_before=200.0,
                                                      started_unix_s=follow_start)] == ["a", "b", "d", "g"]
    assert [r.id for r in housekeeping.gc_candidates(runs, failed=True, started_before=200.0,
                                                      started_unix_s=start)] == ["b"]


def test_status_logs_and_cancel_of_a_running_fake_run(make_plan, runs):
    going = runner.launch(make_plan("ok", steps=400, repeat=1, options={"step_sleep": 0.05}), source_text=None,
                          spec_json=None, runs_root=runs)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            code, doc = cli("status", going.run_id, runs=runs)
            if doc["result"]["runs"][0]["step"] >= 3:
                break
            time.sleep(0.1)
        (state,) = doc["result"]["runs"]
        assert state["state"] == "running" and state["total"] == 402 and state["supervisor_pid"] == os.getpid()
        assert state["eta_s"] > 0
        code, doc = cli("status", runs=runs)
        assert [s["id"] for s in doc["result"]["runs"]] == [going.run_id]
        code, doc = cli("logs", going.run_id, runs=runs)
        assert code == 0 and any("fake worker rank 0 mode ok" in line for line in doc["result"]["lines"])
        code, doc = cli("logs", going.run_id, "--rank", "1", runs=runs)
        assert code == exitcodes.USAGE and "no rank 1" in doc["error"]["message"]
        code, doc = cli("cancel", going.run_id, runs=runs)  # run inside pytest: not an `accelctl run` to signal
        assert code == exitcodes.USAGE and "not by an `accelctl run`" in doc["error"]["message"]
        assert state_now(going.run_id, runs) == "running"
    finally:
        going.stop(grace_s=0.5)
        going.wait(timeout=60)
    code, doc = cli("status", going.run_id, runs=runs)
    assert doc["result"]["runs"][0]["state"] == "stopped" and doc["result"]["runs"][0]["eta_s"] is None
    code, doc = cli("cancel", going.run_id, runs=runs)  # idempotent: it had ended
    assert code == 0 and doc["result"] == {"run_id": going.run_id, "status": "stopped", "was_running": False,
                                           "left": []}
    code, doc = cli("status", runs=runs)
    assert doc["result"]["runs"] == []


def state_now(run_id: str, runs: Path) -> str:
    return cli("status", run_id, runs=runs)[1]["result"]["runs"][0]["state"]


def test_rank_of_reads_torchs_tag():
    assert follow.rank_of(b"[rank1]:W1126 warning", 2) == 1
    assert follow.rank_of(b"[rank12]: x", 16) == 12
    assert follow.rank_of(b"torchrun says", 2) is None
    assert follow.rank_of(b"anything", 1) == 0
    assert follow.rank_of(b"[rankx]: y", 2) is None


def test_detach_of_an_invalid_workload_reports_its_diagnostic_and_starts_nothing(tmp_path):
    """The supervisor's refusal is the command's; a file named like an option stays a file."""
    (tmp_path / "-w").mkdir()
    (tmp_path / "-w" / "bad.wl").write_text("workload bad {\n  task pretrain { objective = mlm }\n  modle bert()\n}\n")
    runs = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", "--detach", "--runs-dir", str(runs), "--",
                           "-w/bad.wl"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == exitcodes.FAILED, proc.stderr
    assert "-w/bad.wl:3:3: error[" in proc.stderr and proc.stdout == ""
    assert not [p for p in runs.rglob("*") if p.is_file()]  # no run folder, no console left


def test_gc_removes_the_consoles_of_ended_supervisors_only(tmp_path):
    from accelctl.contract import supervision

    ended = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    dead = supervision.identity(ended.pid)
    ended.kill()
    ended.wait()
    folder = tmp_path / "runs" / ".detached"
    folder.mkdir(parents=True)
    live = folder / f"20261126-120000-abc123-{supervision.identity().replace(':', '_')}.console"
    gone = folder / f"20261126-110000-def456-{dead.replace(':', '_')}.console"
    other = folder / "notes.txt"
    for f in (live, gone, other):
        f.write_text("x")
    code, doc = cli("runs", "gc", "--failed", "--dry-run", runs=tmp_path / "runs")
    assert code == 0 and doc["result"]["consoles"] == [str(gone)] and gone.exists()
    code, doc = cli("runs", "gc", "--failed", runs=tmp_path / "runs")
    assert code == 0 and doc["result"]["consoles"] == [str(gone)]
    assert not gone.exists() and live.exists() and other.exists()


def test_gc_removes_what_a_detached_viewer_left_of_an_ended_supervisor_for_this_store_only(tmp_path):
    """A foreground run's viewer keeps its supervisor's console in a folder of ``$TMPDIR`` (out of the
    store); a viewer SIGKILLed, or detached before any run could name it, leaves that folder behind:
    ``runs gc`` of the store it names removes it once the supervisor has ended, and no other store's."""
    from accelctl.contract import supervision
    from accelctl.run.store import consoles

    ended = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    dead = supervision.identity(ended.pid).replace(":", "_")
    ended.kill()
    ended.wait()
    mine, other = tmp_path / "runs", tmp_path / "other"
    for root in (mine, other):
        root.mkdir()
    left = consoles.viewer_folder(mine)
    kept = consoles.viewer_folder(other)
    live = consoles.viewer_folder(mine)
    try:
        for folder, ident in ((left, dead), (kept, dead), (live, supervision.identity().replace(":", "_"))):
            for suffix in (".console", ".stderr"):
                (folder / f"20261127-010000-abc123-{ident}{suffix}").write_text("x")
        expected = sorted(str(p) for p in left.iterdir() if p.suffix in (".console", ".stderr"))
        code, doc = cli("runs", "gc", "--failed", runs=mine)
        assert code == 0 and sorted(doc["result"]["consoles"]) == expected and len(expected) == 2
        assert not left.exists()  # the folder with its note, once its consoles are gone
        assert kept.exists() and live.exists() and len(list(live.iterdir())) == 3
    finally:
        for folder in (left, kept, live):
            shutil.rmtree(folder, ignore_errors=True)


def test_a_folder_no_runner_ever_recorded_is_not_running_once_its_start_is_past(runs):
    """A run folder with neither an owner nor a ``runner.json`` (a crash before the launch, or
    made by hand): while its id is young it may be a run starting, and it is kept; once its start
    is ``STARTING_S`` past, ``runs`` and ``status`` both call it incomplete and ``runs rm`` removes
    it (it was kept as "in progress" for ever)."""
    from accelctl.run.store import liveness

    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() - liveness.STARTING_S - 5))
    old = runs / f"{stamp}-stray-cpu-abcd"
    young = runs / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-starting-cpu-beef"
    for folder in (old, young):
        folder.mkdir(mode=0o700, parents=True)
    code, doc = cli("runs", runs=runs)
    listed = {r["id"]: r["status"] for r in doc["result"]["runs"]}
    assert code == 0 and listed[old.name] == listed[young.name] == "incomplete"
    code, doc = cli("status", old.name, runs=runs)
    assert code == 0 and doc["result"]["runs"][0]["state"] == "incomplete", doc
    code, doc = cli("status", young.name, runs=runs)
    assert doc["result"]["runs"][0]["state"] == "running"
    code, doc = cli("runs", "rm", old.name, young.name, runs=runs)
    assert doc["result"]["removed"] == [old.name] and [r["id"] for r in doc["result"]["running"]] == [young.name]
    assert not old.exists() and young.is_dir()
