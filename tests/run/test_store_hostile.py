"""Issue 22 #2, #3, #9: one bad run folder never stops the store.

* #2: a lost run (no summary, its runner dead: what SIGKILL leaves) whose ``events.jsonl``,
  ``rank0.jsonl``, ``runner.json``, ``plan.json``, ``job.json`` or ``workload.wl`` is a FIFO or a
  link to ``/dev/zero`` is ``unreadable: <reason>`` at once -- nothing opened that blocks, nothing
  read without limit, nothing written; a reader never writes a lost run's result (``lostrun.keep``,
  the next owner's step, does), and the keeper never waits for another one's lock on
  ``runner.json``.
* #3: store files of the wrong shape (a ``failure`` that is a string, ``pgids`` of ``["x"]``,
  ``[1e999]``, NaN, huge integers, missing keys ...) are ``unreadable: <the field>`` in ``runs``,
  ``report``, ``compare`` and ``run --resume``, never exit 70.
* #9: a step time edited to zero, negative, NaN or infinite is unreadable (never ``0 µs``); the
  job of a lost runner that never began is ``not started (runner lost)``; a run folder removed
  mid-run ends the run at once, failed, naming the folder, with no process left and no folder
  recreated.

Lost runs are real: a fake-worker run (tests/run/fake_worker.py) whose summary is removed and
whose ``runner.json`` names a process that has ended, with half its events never merged.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from test_store_faults import BROKEN, FIXTURES, GOOD, cli
from viewed import supervisor_of

from accelctl.contract import boundedfile, supervision
from accelctl.run import store
from accelctl.run.store import lostrun
from accelctl.run import procgroup
from accelctl.run.supervision import runner

ROOT = Path(__file__).resolve().parents[2]
HANG_S = 10.0


# --------------------------------------------------------------------------- a real lost run


def _make_lost(make_plan, root: Path) -> Path:
    """A store with one lost run: ran to its end, then its summary removed, its runner.json
    naming an ended process, and the second half of its events never merged."""
    handle = runner.launch(make_plan("ok"), source_text="workload tiny {}\n", spec_json={"name": "tiny"},
                           runs_root=root)
    assert handle.wait(timeout=60).status == "ok"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    ident = supervision.identity(proc.pid)
    proc.kill()
    proc.wait()
    run_dir = handle.run_dir
    (run_dir / store.SUMMARY_FILE).unlink()
    store.write_runner(run_dir, ident, [proc.pid])
    lines = (run_dir / store.EVENTS_FILE).read_text().splitlines()
    (run_dir / store.EVENTS_FILE).write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    return run_dir


_TEMPLATE: dict[str, Path] = {}


@pytest.fixture
def lost(make_plan, tmp_path, tmp_path_factory) -> Path:
    if "lost" not in _TEMPLATE:  # one real run for the module
        _TEMPLATE["lost"] = _make_lost(make_plan, tmp_path_factory.mktemp("lost"))
    run_dir = tmp_path / "runs" / _TEMPLATE["lost"].name
    shutil.copytree(_TEMPLATE["lost"], run_dir, symlinks=True)
    return run_dir


def listed(root: Path, timeout_s: float = HANG_S) -> dict[str, store.RunRecord]:
    """``store.list_runs(root)`` in a thread: a reader that blocks fails the test (and is then
    released: each FIFO of the store opened for writing once)."""
    out: dict = {}
    thread = threading.Thread(target=lambda: out.update({r.id: r for r in store.list_runs(root)}), daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        for fifo in root.rglob("*"):
            with contextlib.suppress(OSError):
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"reading the store blocked for {timeout_s} s")
    return out


def test_a_lost_run_is_shown_finished_by_its_reader_and_written_only_by_keep(lost):
    before = (lost / store.EVENTS_FILE).read_bytes()
    (rec,) = listed(lost.parent).values()
    assert rec.status == "failed (runner lost)" and rec.median_step_time_s > 0
    assert rec.summary["failure"]["reason"] == "runner_lost" and rec.summary["stats"]["step_time"]["count"] == 8
    assert not (lost / store.SUMMARY_FILE).exists() and (lost / store.EVENTS_FILE).read_bytes() == before
    assert lostrun.keep(lost)  # the explicit step (the folder's next owner: run --resume, runs gc)
    kept = json.loads((lost / store.SUMMARY_FILE).read_text())
    assert kept["failure"]["reason"] == "runner_lost" and kept["stats"]["step_time"]["count"] == 8
    after = (lost / store.EVENTS_FILE).read_bytes()
    assert after.startswith(before) and len(after) > len(before)
    assert json.loads(after.splitlines()[-1])["reason"] == "runner_lost"
    assert not lostrun.keep(lost)  # kept already
    (rec,) = listed(lost.parent).values()
    assert rec.status == "failed (runner lost)" and rec.summary == kept


def test_a_summary_written_as_the_runner_ends_is_read_not_taken_for_a_lost_run(lost, monkeypatch):
    """The runner writes ``summary.json`` and exits between a reader's look for the summary and its
    look for the runner: the run is what that summary says, never ``failed (runner lost)`` (seen: a
    run that ended ``ok`` shown lost by ``accelctl status`` at load 11)."""
    real_gone = store.runner_gone

    def gone_after_writing(path, info):  # the runner's last act, then its end, in that window
        store.write_summary(path, {"status": "ok", "workload": "tiny", "target": "cpu", "stats": {}})
        return real_gone(path, info)

    monkeypatch.setattr(store, "runner_gone", gone_after_writing)
    rec = store.read_run(lost)
    assert rec.status == "ok", rec.status
    assert rec.summary["status"] == "ok"


def test_keeping_a_lost_run_reads_each_of_its_event_files_once(lost, monkeypatch):
    reads: list[str] = []
    real = boundedfile.read_regular

    def counted(path, *args, **kwargs):
        reads.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(boundedfile, "read_regular", counted)
    assert lostrun.keep(lost)
    assert reads.count(store.EVENTS_FILE) == 1 and reads.count("rank0.jsonl") == 1, reads
    kept = json.loads((lost / store.SUMMARY_FILE).read_text())
    assert kept["failure"]["reason"] == "runner_lost" and kept["stats"]["step_time"]["count"] == 8


SPECIAL = {
    "fifo": (os.mkfifo, "is a FIFO"),
    "/dev/zero": (lambda p: p.symlink_to("/dev/zero"), "is a symbolic link"),
}


@pytest.mark.parametrize("kind", list(SPECIAL))
@pytest.mark.parametrize("name", ["events.jsonl", "rank0.jsonl", "runner.json", "plan.json", "job.json",
                                  "workload.wl", "summary.json", "worker.log"])
def test_a_lost_run_with_a_special_file_is_unreadable_at_once(lost, name, kind):
    make, reason = SPECIAL[kind]
    (lost / name).unlink(missing_ok=True)
    make(lost / name)
    (rec,) = listed(lost.parent).values()
    assert rec.status == f"unreadable: {name} {reason}" and rec.unreadable == f"{name} {reason}"
    assert name == "summary.json" or not (lost / store.SUMMARY_FILE).exists(), "a reader wrote an unreadable run"


def test_keeping_never_waits_for_another_keepers_lock(lost):
    fd = os.open(lost / store.RUNNER_FILE, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another owner keeping the lost run's result
        assert not lostrun.keep(lost)
        (rec,) = listed(lost.parent).values()
        assert rec.status == "failed (runner lost)" and rec.summary["stats"]["step_time"]["count"] == 8
        assert not (lost / store.SUMMARY_FILE).exists(), "written under another's lock"
    finally:
        os.close(fd)
    assert lostrun.keep(lost) and (lost / store.SUMMARY_FILE).is_file()


def test_a_lost_runners_job_that_never_began_is_not_started(lost):
    """A queued job of a shared worker whose runner was killed first: inputs and runner.json, no
    events."""
    for p in lost.glob("rank*.jsonl"):
        p.unlink()
    (lost / store.EVENTS_FILE).write_text("")
    (rec,) = listed(lost.parent).values()
    assert rec.status == "not started (runner lost)"
    assert "before this run's job started" in rec.summary["failure"]["message"]
    code, out, err = cli_any(["runs", "--runs-dir", str(lost.parent), "--json"])
    assert code == 0 and json.loads(out)["result"]["runs"][0]["status"] == "not started (runner lost)"


def cli_any(argv: list[str], timeout_s: float = 120) -> tuple[int, str, str]:
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                        timeout=timeout_s, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert "Traceback" not in cp.stderr and cp.returncode != 70, cp.stderr[-3000:]
    return cp.returncode, cp.stdout, cp.stderr


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "nul"])
def test_resume_never_reads_a_special_workload_file(lost, tmp_path, kind):
    """A resumable run (a complete checkpoint) whose spec.json names, as its workload file, a
    FIFO, /dev/zero or a path with a NUL: refused with the reason, at once."""
    from accelctl.contract import checkpoint as layout

    job = json.loads((lost / store.JOB_FILE).read_text())
    job["checkpoint"]["every"], job["events_dir"] = 1, str(lost)
    (lost / store.JOB_FILE).write_text(json.dumps(job))
    step = layout.step_dir(lost / "checkpoints", 1)
    step.mkdir(parents=True)
    (step / layout.MARKER).write_text("{}")
    special = {"fifo": tmp_path / "w.wl", "/dev/zero": Path("/dev/zero"), "nul": "a\0b.wl"}[kind]
    if kind == "fifo":
        os.mkfifo(special)
    spec = json.loads((lost / store.SPEC_FILE).read_text())
    (lost / store.SPEC_FILE).write_text(json.dumps({**spec, "path": str(special)}))
    code, out, err = cli_any(["run", "--resume", lost.name, "--runs-dir", str(lost.parent)], timeout_s=HANG_S)
    why = {"fifo": "it is a FIFO", "/dev/zero": "it is a character device", "nul": "not a possible file name"}[kind]
    assert code == 1 and f"cannot resume run {lost.name}: cannot read its workload file" in err and why in err, err


# --------------------------------------------------------------------------- wrong shapes


@pytest.fixture
def store_of_two(tmp_path) -> Path:
    for name in (GOOD, BROKEN):
        shutil.copytree(FIXTURES / name, tmp_path / name)
    return tmp_path


def _edit(name: str, change):
    def apply(run_dir: Path) -> None:
        path = run_dir / name
        data = json.loads(path.read_text()) if path.exists() else {}
        result = change(data)
        path.write_text(result if isinstance(result, str) else json.dumps(data))
    return apply


def _lost_runner(change):
    """No summary; a runner.json of this machine, edited by ``change``."""
    def apply(run_dir: Path) -> None:
        (run_dir / store.SUMMARY_FILE).unlink()
        store.write_runner(run_dir, "1:1", [])
        _edit(store.RUNNER_FILE, change)(run_dir)
    return apply


def _set(path: str, value):
    def change(data: dict) -> None:
        *parents, last = path.split(".")
        for key in parents:
            data = data.setdefault(key, {})
        data[last] = value
    return change


SHAPES = {
    "failure a string": (_edit("summary.json", _set("failure", "boom")),
                         "summary.json: failure must be an object (got a string)"),
    "status a number": (_edit("summary.json", _set("status", 7)),
                        "summary.json: status must be one of ok, failed, stopped, not_started (got 7)"),
    "status missing": (_edit("summary.json", lambda d: d.pop("status") and None), "summary.json: status is missing"),
    "zero median": (_edit("summary.json", _set("stats.step_time.median", 0)),
                    "summary.json: stats.step_time.median must be a finite number above 0 (got 0)"),
    "negative median": (_edit("summary.json", _set("stats.step_time.median", -1e6)),
                        "summary.json: stats.step_time.median must be a finite number above 0 (got -1000000.0)"),
    "NaN start": (_edit("summary.json", lambda d: json.dumps({**d, "started_unix_s": float("nan")})),
                  "summary.json: started_unix_s must be a finite number of at least 0 (got nan)"),
    "infinite repeat": (_edit("summary.json", lambda d: json.dumps(d).replace('"kept": [', '"kept": [1e999, ')),
                        "summary.json: stats.repeats.kept[0] must be a finite number above 0 (got inf)"),
    "huge world": (_edit("summary.json", _set("world_size", 10**30)),
                   "summary.json: world_size must be an integer of at least 0 (got an integer of 31 digits)"),
    "int past the parser's limit": (_edit("summary.json", lambda d: '{"status": "ok", "n": ' + "9" * 5000 + "}"),
                                    "summary.json is not JSON (Exceeds the limit"),
    "stats a list": (_edit("summary.json", _set("stats", [1])),
                     "summary.json: stats must be an object (got a list)"),
    "a nested list": (_edit("summary.json", lambda d: "[" * 100_000 + "]" * 100_000),
                      "summary.json is not"),
    "pgids of text": (_lost_runner(_set("pgids", ["x"])),
                      "runner.json: pgids[0] must be an integer from 1 to 2147483647 (got a string)"),
    "pgids infinite": (_lost_runner(lambda d: json.dumps(d).replace('"pgids": []', '"pgids": [1e999]')),
                       "runner.json: pgids[0] must be an integer from 1 to 2147483647 (got inf)"),
    "pgids negative": (_lost_runner(_set("pgids", [-5])),
                       "runner.json: pgids[0] must be an integer from 1 to 2147483647 (got -5)"),
    "pgids huge": (_lost_runner(_set("pgids", [2**70])),
                   "runner.json: pgids[0] must be an integer from 1 to 2147483647 (got an integer of 22 digits)"),
    "runner a number": (_lost_runner(_set("runner", 5)), "runner.json: runner must be a string (got 5)"),
    "runner missing": (_lost_runner(lambda d: d.pop("runner") and None), "runner.json: runner is missing"),
    "runner.json a list": (_lost_runner(lambda d: "[1, 2]"), "runner.json is not a JSON object"),
    "runner.json not UTF-8": (lambda p: (_lost_runner(lambda d: None)(p),
                                         (p / store.RUNNER_FILE).write_bytes(b'{"runner": "\xff"}')),
                              "runner.json is not UTF-8 text"),
    "plan launches a string": (_edit("plan.json", _set("launches", "x")),
                               "plan.json: launches must be a list (got a string)"),
    "plan argv of numbers": (_edit("plan.json", _set("launches", [{"name": "w", "argv": [1]}])),
                             "plan.json: launches[0].argv[0] must be a string (got 1)"),
    "job checkpoint a number": (_edit("job.json", _set("checkpoint", 1)),
                                "job.json: checkpoint must be an object (got 1)"),
    "job every text": (_edit("job.json", _set("checkpoint.every", "x")),
                       "job.json: checkpoint.every must be an integer (got a string)"),
    "job measure NaN": (_edit("job.json", lambda d: json.dumps({"measure": {"steps": float("nan")}})),
                        "job.json: measure.steps must be an integer (got nan)"),
    "spec targets a string": (_edit("spec.json", _set("targets", "big")),
                              "spec.json: targets must be a list (got a string)"),
    "series index text": (_edit("series.json", lambda d: '{"id": "s", "index": "x", "of": 2}'),
                          "series.json: index must be an integer of at least 1 (got a string)"),
}


@pytest.mark.parametrize("case", list(SHAPES))
def test_store_files_of_the_wrong_shape_are_unreadable_everywhere(store_of_two, capsys, monkeypatch, case):
    monkeypatch.setenv("COLUMNS", "250")
    change, reason = SHAPES[case]
    change(store_of_two / BROKEN)
    status = f"unreadable: {reason}"
    code, out, err = cli(capsys, "runs", "--runs-dir", str(store_of_two), "--json")
    runs = {r["id"]: r["status"] for r in json.loads(out)["result"]["runs"]}
    assert code == 0 and runs[GOOD] == "ok" and runs[BROKEN].startswith(status), runs[BROKEN]
    code, out, err = cli(capsys, "runs", "--runs-dir", str(store_of_two), "--wide")
    assert code == 0 and "unreadable: " in out
    code, out, err = cli(capsys, "report", BROKEN, "--runs-dir", str(store_of_two), "--format", "csv")
    assert code == 1 and f"run {BROKEN} is {status}" in err
    code, out, err = cli(capsys, "compare", GOOD, BROKEN, "--runs-dir", str(store_of_two))
    assert code == 2 and f"B ({BROKEN}) is {status}" in err
    code, out, err = cli(capsys, "run", "--resume", BROKEN, "--runs-dir", str(store_of_two))
    assert code == 1 and f"cannot resume run {BROKEN}: it is {status}" in err


#: a measured step's step_time_s as hand-edited, and how the reader names it
STEP_TIMES = {"0": "must be a finite number above 0 (got 0)", "0.0": "must be a finite number above 0 (got 0.0)",
              "-0.0": "must be a finite number above 0 (got -0.0)",
              "-1000000.0": "must be a finite number above 0 (got -1000000.0)",
              "NaN": "must be a finite number above 0 (got nan)", "Infinity": "must be a finite number above 0 (got inf)",
              "-Infinity": "must be a finite number above 0 (got -inf)", '"fast"': "must be a finite number above 0 "
              "(got a string)", "true": "must be a finite number above 0 (got a boolean)", "null": "is missing"}


@pytest.mark.parametrize("value", list(STEP_TIMES))
def test_a_hand_edited_step_time_is_unreadable_never_zero(store_of_two, capsys, value):
    events = store_of_two / GOOD / store.EVENTS_FILE
    lines = events.read_text().splitlines()
    n, line = next((i, ln) for i, ln in enumerate(lines) if '"measure"' in ln and '"step"' in ln)
    data = json.loads(line)
    data["step_time_s"] = "HERE"
    lines[n] = json.dumps(data).replace('"HERE"', value)
    events.write_text("\n".join(lines) + "\n")
    why = f"unreadable: events.jsonl line {n + 1}: step.step_time_s {STEP_TIMES[value]}"
    code, out, err = cli(capsys, "report", GOOD, "--runs-dir", str(store_of_two), "--format", "csv")
    assert code == 1 and "µs" not in out and f"run {GOOD} is {why}" in err
    code, out, err = cli(capsys, "compare", GOOD, BROKEN, "--runs-dir", str(store_of_two))
    assert code == 2 and f"A ({GOOD}) is {why}" in err
    code, out, err = cli(capsys, "report", "--runs-dir", str(store_of_two), "--format", "csv")  # the others stay
    assert code == 0 and BROKEN in out and GOOD not in out and f"run {GOOD} is {why}" in err


# --------------------------------------------------------------------------- a run folder removed mid-run


@pytest.mark.parametrize("whole", [True, False], ids=["the folder", "its files (rm -rf cut short)"])
def test_a_run_folder_removed_mid_run_ends_the_run_naming_it(tmp_path, make_plan, whole):
    handle = runner.launch(make_plan("hang"), source_text=None, spec_json=None, runs_root=tmp_path / "runs")
    for ev in handle.events():
        if getattr(ev, "kind", "") == "step":
            break
    if whole:
        shutil.rmtree(handle.run_dir)
    else:  # what rm -rf leaves when a writer puts a file back meanwhile: the folder, without events.jsonl
        for p in handle.run_dir.iterdir():
            p.unlink()
        (handle.run_dir / "late").write_text("")
    result = handle.wait(timeout=30)
    assert result.status == "failed" and result.summary["failure"]["reason"] == "store_error"
    assert result.summary["failure"]["message"] == (f"run store: the run folder {handle.run_dir} was removed "
                                                    "while the run ran")
    assert not whole or not handle.run_dir.exists(), "the run folder was recreated"
    for pid in handle.pids:
        assert procgroup.live_members(pid) == []


# --------------------------------------------------------------------------- real workers (slow)


def _reap(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=30)


@pytest.mark.slow
def test_a_run_folder_removed_mid_run_is_not_recreated_by_a_checkpoint_save(tmp_path):
    """The real worker saving a checkpoint every step: the folder removed after the first one."""
    from test_supervision import SOLO_WL, read_until_measure, run_processes, start_cli, wait_gone

    wl = tmp_path / "ckpt.wl"
    wl.write_text(SOLO_WL.replace("target cpu", "checkpoint { every = 1 steps  keep = 1 }\n  target cpu"))
    runs = tmp_path / "runs"
    proc = start_cli(wl, "solo", runs)
    try:
        read_until_measure(proc)
        (run_dir,) = list(runs.iterdir())
        deadline = time.monotonic() + 60
        while not list((run_dir / "checkpoints").glob("step-*")) and time.monotonic() < deadline:
            time.sleep(0.05)
        t0 = time.monotonic()
        while run_dir.exists() and time.monotonic() - t0 < 30:  # as rm -rf, again while a save writes into it
            shutil.rmtree(run_dir, ignore_errors=True)
        out = proc.communicate(timeout=60)[0]
    finally:
        _reap(proc)
    took = time.monotonic() - t0
    left, _ = wait_gone(run_dir, time.monotonic())
    time.sleep(2.0)  # a late checkpoint save would recreate it now
    print(f"run folder removed mid-run: accelctl exited {proc.returncode} {took:.2f} s later")
    assert proc.returncode == 1, out[-3000:]
    assert f"run store: the run folder {run_dir} was removed while the run ran" in out
    assert "Traceback" not in out and "crashed" not in out
    assert not run_dir.exists(), f"recreated: {sorted(p.name for p in run_dir.rglob('*'))}"
    assert left == [] and run_processes(run_dir) == []
    assert took < 30


@pytest.mark.slow
def test_sigkill_of_a_shared_worker_runner_leaves_the_job_never_started_as_not_started(tmp_path):
    """Two workloads in one worker (as workloads/bloomz.wl): the runner SIGKILLed in job one; job
    two never began -- listed ``not started (runner lost)``, never ``failed (runner lost)``."""
    from test_shared_worker import start_long_then_never
    from test_supervision import read_until_measure, run_processes, wait_gone

    proc, runs = start_long_then_never(tmp_path)
    try:
        read_until_measure(proc)
        os.kill(supervisor_of(proc), signal.SIGKILL)  # the runner: the supervisor ``accelctl run`` views
        proc.wait(timeout=30)
    finally:
        _reap(proc)
    dirs = sorted(runs.iterdir())
    for d in dirs:
        left, _ = wait_gone(d, time.monotonic())
        assert left == [], f"left running after the runner's SIGKILL: {left}"
    code, out, err = cli_any(["runs", "--json", "--runs-dir", str(runs)])
    status = {r["workload"]: r["status"] for r in json.loads(out)["result"]["runs"]}
    assert status == {"long_one": "failed (runner lost)", "never": "not started (runner lost)"}, status
    never = next(d for d in dirs if "-never-" in d.name)
    assert not (never / store.SUMMARY_FILE).exists(), "listing the runs wrote the lost run's result"
    code, out, err = cli_any(["runs", "gc", "--older-than", "1d", "--runs-dir", str(runs)])
    assert code == 0 and "wrote the result of 2 lost run(s)" in err, err
    summary = json.loads((never / store.SUMMARY_FILE).read_text())
    assert summary["status"] == "not_started" and summary["stats"]["step_time"] is None
    assert not run_processes(never)
