"""Supervision that survives its supervisor (issue 11, items 1, 3 and 5), with real processes.

* SIGKILL of ``accelctl run`` leaves no process of the run behind (a cpu worker; torchrun and
  both ranks): the parent-death signal set by the exec prologue and by the worker, and the
  worker's watch of ``ACCELCTL_RUNNER``.
* The next ``accelctl runs`` finds that run and records it ``failed (runner lost)`` with the
  steady-state figures of the steps that completed.
* A rank killed by a signal fails the run, naming the rank and the signal; ``stopped`` is
  kept for a stop the user asked for.
* A run store that cannot be written (ENOSPC on ``/dev/full`` or on a full tmpfs) ends the run
  ``failed`` with that reason: ``wait()`` returns, nothing is left running, no traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from viewed import supervisor_of

from accelctl.contract.envnames import EVENTS_DIR
from accelctl.run import store
from accelctl.run import procgroup
from accelctl.run.supervision import runner

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 60
#: how long a run's processes may outlive a SIGKILLed runner.  Alone they are gone in 0.6 s (ddp)
#: to 2 s (DeepSpeed); a rank blocked in a collective has RUNNER_LOST_GRACE_S, and torchrun gives
#: its ranks up to its 30 s shutdown timeout -- on a loaded 2-core CI machine 10 s was once short.
CLEANUP_S = 30.0

SOLO_WL = """
workload solo {
  task pretrain { objective = mlm }
  model bert(layers = 2, hidden = 64, heads = 4, vocab = 1000)
  dataset synthetic(seq_len = 64 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 4  accumulation = 1  global = 4 }
  measure { warmup = 2 steps  steps = 5000 steps }
  target cpu { threads = 1 }
}
"""


def _workload(tmp_path: Path, kind: str) -> tuple[Path, str]:
    """A long-running workload file: ``solo`` (one cpu worker), ``ddp_cpu`` (torchrun, 2 ranks)
    or ``zero2_cpu`` (the DeepSpeed launcher, 2 ranks)."""
    wl = tmp_path / f"{kind}.wl"
    if kind == "solo":
        wl.write_text(SOLO_WL)
    else:
        wl.write_text((ROOT / "workloads" / "ddp_cpu.wl").read_text().replace("steps = 10 steps", "steps = 5000 steps"))
    return wl, kind


live_members = procgroup.live_members


def run_processes(run_dir: Path) -> list[int]:
    """Every live process of the run: its launches' process groups, and whatever carries its
    events folder in its environment (torchrun puts each rank in a session of its own)."""
    pgids = store.read_json(run_dir / store.RUNNER_FILE).get("pgids") or []
    found = {p for g in pgids for p in live_members(g)} | set(procgroup.carrying(EVENTS_DIR, str(run_dir)))
    return sorted(found)


def start_cli(wl: Path, workload: str, runs: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-w", workload, "--headless",
                             "--runs-dir", str(runs)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def read_until_measure(proc: subprocess.Popen, timeout_s: float = 300, text: str = "[measure]") -> str:
    """The console output up to rank 0's first measured step (the run killed if it never comes),
    or up to the first line holding ``text``."""
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    seen = []
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            seen.append(line)
            if text in line:
                return "".join(seen)
    finally:
        timer.cancel()
    raise AssertionError(f"the output ended before {text!r}:\n" + "".join(seen)[-3000:])


def only_run_dir(runs: Path) -> Path:
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir


def wait_gone(run_dir: Path, t0: float, limit_s: float = CLEANUP_S) -> tuple[list[int], float]:
    """What is left of the run once it is all gone or ``limit_s`` after ``t0``, and when."""
    left = run_processes(run_dir)
    while left and time.monotonic() - t0 < limit_s:
        time.sleep(0.05)
        left = run_processes(run_dir)
    return left, time.monotonic() - t0


def _described(pids: list[int]) -> list[str]:
    """Each pid with its state and command line: what a failure needs to say which one hung."""
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            state, cmd = "gone", ""
        out.append(f"{pid} [{state}] {cmd[:160]}")
    return out


def rank_pid(run_dir: Path, rank: int) -> int:
    """The pid of the worker process of ``rank`` (its RANK in /proc/<pid>/environ)."""
    for pid in run_processes(run_dir):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        ranks = [v for v in env if v.startswith(b"RANK=")] or [b"RANK=0"]  # a single worker: no RANK
        if b"accelctl.worker" in cmd and ranks == [f"RANK={rank}".encode()]:
            return pid
    raise AssertionError(f"no worker process of rank {rank} in {run_processes(run_dir)}")


# --------------------------------------------------------------------------- SIGKILL of the runner


@pytest.mark.slow
@pytest.mark.parametrize("kind, processes", [("solo", 1), ("ddp_cpu", 3), ("zero2_cpu", 4)])
def test_sigkill_of_the_runner_leaves_no_process_and_the_run_is_found_lost(kind, processes, tmp_path):
    """SIGKILL cannot be handled by ``accelctl run``: its launches must end by themselves, and
    the next ``accelctl runs`` must show the run ``failed (runner lost)`` with its partial
    figures instead of ``incomplete`` forever, writing nothing; ``runs gc`` writes it."""
    wl, workload = _workload(tmp_path, kind)
    runs = tmp_path / "runs"
    proc = start_cli(wl, workload, runs)
    try:
        read_until_measure(proc)
        run_dir = only_run_dir(runs)
        # the worker; torchrun and two ranks; deepspeed, its launch.py and two ranks
        assert len(run_processes(run_dir)) >= processes
        t0 = time.monotonic()
        os.kill(supervisor_of(proc), signal.SIGKILL)  # the runner: the supervisor ``accelctl run`` views
        proc.wait(timeout=30)
        left, took = wait_gone(run_dir, t0)
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"{kind}: {len(left)} processes left, {took:.2f} s after SIGKILL of the runner")
    assert left == [], f"still running {CLEANUP_S} s after the runner was SIGKILLed: {_described(left)}"

    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "runs", "--json", "--runs-dir", str(runs)],
                        cwd=ROOT, capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 0, cp.stderr
    (listed,) = json.loads(cp.stdout)["result"]["runs"]
    assert listed["status"] == "failed (runner lost)" and not (run_dir / store.SUMMARY_FILE).exists()
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "runs", "gc", "--older-than", "1d", "--runs-dir",
                         str(runs)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert cp.returncode == 0 and "wrote the result of 1 lost run(s)" in cp.stderr, cp.stderr
    summary = json.loads((run_dir / store.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed" and summary["failure"]["reason"] == "runner_lost"
    assert summary["stats"]["step_time"]["count"] >= 1 and summary["stats"]["step_time"]["median"] > 0
    events = [json.loads(line) for line in (run_dir / store.EVENTS_FILE).read_text().splitlines() if line]
    assert events[-1]["kind"] == "run_failed" and events[-1]["reason"] == "runner_lost"
    # every rank's last words made it into the merged record
    for rank_file in run_dir.glob("rank*.jsonl"):
        last = rank_file.read_text().splitlines()[-1]
        assert last in (run_dir / store.EVENTS_FILE).read_text()


def test_a_run_whose_runner_still_runs_is_not_taken_for_lost(runs, make_plan):
    handle = runner.launch(make_plan("hang"), source_text=None, spec_json=None)
    try:
        rec = store.load_run(handle.run_id)
        assert rec.status == "incomplete" and not (handle.run_dir / store.SUMMARY_FILE).exists()
    finally:
        handle.stop()
        result = handle.wait(timeout=TIMEOUT)
    assert result.status == "stopped"
    assert store.load_run(handle.run_id).status == "stopped"


# --------------------------------------------------------------------------- a rank killed by a signal


def test_a_worker_killed_by_a_signal_fails_the_run_naming_rank_and_signal(runs, make_plan):
    handle = runner.launch(make_plan("hang"), source_text=None, spec_json=None)
    for ev in handle.events():
        if getattr(ev, "kind", "") == "step":
            break
    os.kill(handle.pids[0], signal.SIGKILL)
    result = handle.wait(timeout=TIMEOUT)
    assert result.status == "failed", result.summary["failure"]
    assert result.summary["failure"]["message"].startswith("rank 0 killed by SIGKILL")
    assert result.returncodes == (-signal.SIGKILL,)


@pytest.mark.slow
@pytest.mark.parametrize("kind, rank, sig", [("ddp_cpu", 1, signal.SIGKILL), ("zero2_cpu", 1, signal.SIGKILL),
                                           ("solo", 0, signal.SIGSEGV)])
def test_a_rank_killed_by_a_signal_is_a_failure_not_a_user_stop(kind, rank, sig, tmp_path):
    """torchrun and the DeepSpeed launcher answer a dead rank by stopping the others (SIGTERM):
    they report "stopped", but nobody asked for a stop.  The run is ``failed``, naming the rank
    and the signal, exit 1.  torchrun's report names the rank; the DeepSpeed launcher's names
    only the exit code (-9), so the rank is the one that went silent."""
    wl, workload = _workload(tmp_path, kind)
    runs = tmp_path / "runs"
    proc = start_cli(wl, workload, runs)
    try:
        read_until_measure(proc)
        run_dir = only_run_dir(runs)
        os.kill(rank_pid(run_dir, rank), sig)
        rest = proc.communicate(timeout=180)[0]
    finally:
        if proc.poll() is None:
            proc.kill()
    name = signal.Signals(sig).name
    assert proc.returncode == 1, rest[-3000:]
    summary = json.loads((run_dir / store.SUMMARY_FILE).read_text())
    assert summary["status"] == "failed"
    assert summary["failure"]["rank"] == rank, summary["failure"]
    message = summary["failure"]["message"]
    if kind == "zero2_cpu" and message.startswith(f"rank {rank} went first, without reporting why"):
        # the DeepSpeed launcher polls once a second and reports the first failed rank it meets:
        # when rank 0 failed on the dead peer within that second, it reports rank 0's exit 1, and
        # rank 1's signal is known only if a supervisor tick saw it a zombie before it was reaped
        assert "exits with return code = 1" in message and "return code = -" not in message, message
    else:
        assert message.startswith(f"rank {rank} killed by {name}"), summary["failure"]
    assert f"rank {rank} killed by {name}" in rest  # on the console too
    assert run_processes(run_dir) == []


# --------------------------------------------------------------------------- a run store that cannot be written


def test_a_full_disk_under_events_jsonl_fails_the_run_instead_of_hanging(runs, make_plan, monkeypatch):
    """/dev/full answers every write with ENOSPC: the supervisor must stop the launches and
    end the run with that reason, and ``wait()`` must return."""
    real_new_run_dir = store.new_run_dir

    def run_dir_on_a_full_disk(*args, **kwargs):
        path = real_new_run_dir(*args, **kwargs)
        (path / store.EVENTS_FILE).symlink_to("/dev/full")
        return path

    monkeypatch.setattr(store, "new_run_dir", run_dir_on_a_full_disk)
    handle = runner.launch(make_plan("hang"), source_text=None, spec_json=None)
    result = handle.wait(timeout=TIMEOUT)
    assert result.status == "failed"
    assert result.summary["failure"]["reason"] == "store_error"
    assert result.summary["failure"]["message"] == "run store: No space left on device writing events.jsonl"
    assert json.loads((handle.run_dir / store.SUMMARY_FILE).read_text())["failure"] == result.summary["failure"]
    for pid in handle.pids:
        assert live_members(pid) == []
    # a reader follows no link out of a run folder (issue 22 #2): the test's /dev/full link is named
    assert store.load_run(handle.run_id).status == "unreadable: events.jsonl is a symbolic link"


def _can_mount_tmpfs() -> bool:
    return os.geteuid() == 0 and sys.platform.startswith("linux")


@pytest.fixture
def tiny_fs(tmp_path):
    """A 64 KB tmpfs (root only): a real file system that fills up."""
    if not _can_mount_tmpfs():
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "tiny"
    mnt.mkdir()
    cp = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True, text=True)
    if cp.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {cp.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_a_run_store_that_fills_up_mid_run_ends_the_run_failed(tiny_fs, make_plan):
    """Every file of the run on a 64 KB file system that fills up while the worker steps."""
    plan = make_plan("ok", steps=100_000, repeat=1)
    handle = runner.launch(plan, source_text=None, spec_json=None, runs_root=tiny_fs)
    result = handle.wait(timeout=TIMEOUT)
    assert result.status == "failed"
    assert result.summary["failure"]["reason"] == "store_error"
    assert result.summary["failure"]["message"].startswith("run store: No space left on device writing ")
    for pid in handle.pids:
        assert live_members(pid) == []


@pytest.mark.slow
def test_the_cli_on_a_full_run_store_exits_1_with_one_clear_line(tiny_fs, tmp_path):
    """The real worker fills the store mid-run; then a run on the full store cannot start.  No traceback."""
    wl, workload = _workload(tmp_path, "solo")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "accelctl.cli", "run", str(wl), "-w", workload, "--headless", "--runs-dir", str(tiny_fs)]
    cp = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    out = cp.stdout + cp.stderr
    assert cp.returncode == 1, out[-3000:]
    assert "Traceback" not in out
    assert "run store: No space left on device writing " in out
    assert "crashed" not in out  # the rank that met the full disk is not a second, unexplained failure
    cp = subprocess.run([sys.executable, "-m", "accelctl.cli", "runs", "--json", "--runs-dir", str(tiny_fs)],
                        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    (listed,) = json.loads(cp.stdout)["result"]["runs"]
    assert listed["status"] == "failed"  # its runner ended normally: not "failed (runner lost)"
    assert listed["summary"]["failure"]["message"].startswith("run store: No space left on device writing ")
    # the store is full now: the next run cannot even write its inputs
    cp = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert cp.returncode == 1 and "Traceback" not in cp.stdout + cp.stderr
    (line,) = [ln for ln in cp.stderr.splitlines() if "run store:" in ln]
    assert "No space left on device" in line


def test_a_run_folder_made_read_only_mid_run_still_ends_with_its_reason(tmp_path, make_plan):
    """The run folder remounted read-only (root; a bind mount) while the run goes on: the open
    files still take their lines, the summary cannot be created.  ``wait()`` returns the run
    ``failed`` with that reason instead of an ``ok`` nobody could record."""
    if not _can_mount_tmpfs():
        pytest.skip("a bind mount needs root")
    handle = runner.launch(make_plan("ok", options={"step_sleep": 0.2}), source_text=None, spec_json=None,
                           runs_root=tmp_path / "runs")
    run_dir = str(handle.run_dir)
    for ev in handle.events():
        if getattr(ev, "kind", "") == "step":
            break
    mounted = subprocess.run(["mount", "--bind", run_dir, run_dir], capture_output=True).returncode == 0
    try:
        if not mounted or subprocess.run(["mount", "-o", "remount,ro,bind", run_dir]).returncode != 0:
            handle.stop()
            handle.wait(timeout=TIMEOUT)
            pytest.skip("cannot remount the run folder read-only here")
        result = handle.wait(timeout=TIMEOUT)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", run_dir], check=False)
    assert result.status == "failed"
    assert result.summary["failure"]["message"] == "run store: Read-only file system writing summary.json"
    assert result.summary["stats"]["step_time"]["count"] > 0  # the figures are not lost with the file
    assert not (handle.run_dir / store.SUMMARY_FILE).exists()


TORCHRUN_REPORT = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : 130 (pid: 8211)
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_13:32:57
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -11 (pid: 8212)  (SIGSEGV)
  error_file: <N/A>
  traceback : Signal 11 (SIGSEGV) received by PID 8212
"""


#: the end of worker.log when rank 1 of a DeepSpeed-launcher run was SIGKILLed (deepspeed 0.19.8)
DEEPSPEED_REPORT = """\
[2026-11-23 16:13:49,580] [INFO] [launch.py:245:main] process 2195 spawned with command: ['python', '-u', '-m', \
'accelctl.worker', '/runs/r/job.json']
[2026-11-23 16:13:49,603] [INFO] [launch.py:245:main] process 2196 spawned with command: ['python', '-u', '-m', \
'accelctl.worker', '/runs/r/job.json']
[2026-11-23 16:15:24,103] [INFO] [launch.py:253:sigkill_handler] Killing subprocess 2195
[2026-11-23 16:15:24,116] [INFO] [launch.py:253:sigkill_handler] Killing subprocess 2196
[2026-11-23 16:15:24,116] [ERROR] [launch.py:259:sigkill_handler] ['python', '-u', '-m', 'accelctl.worker', \
'/runs/r/job.json'] exits with return code = -9
"""


def test_crashed_rank_reads_the_root_cause_else_the_silent_rank():
    from accelctl.contract.events import RunFailed, StepMetrics

    def step(rank):
        return StepMetrics(step=0, phase="measure", step_time_s=0.1, rank=rank)

    events = [step(0), step(1), RunFailed(reason="stopped", message="stopped", rank=0)]
    assert runner.crashed_rank(events, 1, TORCHRUN_REPORT)[:2] == (1, "rank 1 killed by SIGSEGV")
    # no launcher report: the one rank that never said why, with the launch's own signal
    assert runner.crashed_rank(events, -9, "")[:2] == (1, "rank 1 killed by SIGKILL")
    assert runner.crashed_rank(events, 7, "")[:2] == (1, "rank 1 ended without reporting why")
    # a signal makes the rank the cause of what its peers report; an unexplained end does not
    assert runner.crashed_rank(events, 1, TORCHRUN_REPORT).cause
    assert not runner.crashed_rank(events, 7, "").cause
    assert runner.crashed_rank([step(0), step(1)], -9, "")[:2] == (None, "")  # which of two: unknown
    # the DeepSpeed launcher names the code of the rank that failed, not the rank: the silent
    # rank with that code, not the code of the launch (ended by the stop that followed)
    assert runner.crashed_rank(events, -2, DEEPSPEED_REPORT)[:2] == (1, "rank 1 killed by SIGKILL")
    assert runner.crashed_rank(events, 1, DEEPSPEED_REPORT)[:2] == (1, "rank 1 killed by SIGKILL")


def test_rank_watch_tells_which_rank_went_first(tmp_path):
    """Two real "ranks" (processes whose command line runs accelctl.worker, RANK in their
    environment) under a launcher process: the one killed first is the one named, even when
    the launcher then kills the other before either could report (both silent)."""
    import subprocess
    import sys
    import time

    from accelctl.run.supervision.rankwatch import RankWatch
    from accelctl.run.supervision.runner import crashed_rank

    fake = tmp_path / "accelctl" / "worker"  # ``python -m accelctl.worker`` that only sleeps
    fake.mkdir(parents=True)
    (tmp_path / "accelctl" / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    (fake / "__main__.py").write_text("import time\ntime.sleep(60)\n")
    launcher = subprocess.Popen(  # like DeepSpeed's: "-m accelctl.worker" also on its own command line
        [sys.executable, "-c",
         "import os, subprocess, sys, time\n"
         "ps = [subprocess.Popen([sys.executable, '-m', 'accelctl.worker', 'job.json'], "
         f"env=dict(os.environ, RANK=str(r), PYTHONPATH={str(tmp_path)!r})) for r in range(2)]\n"
         "print(' '.join(str(p.pid) for p in ps), flush=True)\n"
         "sys.stdin.readline()\n"  # reaps nothing until told: the dead rank stays a zombie meanwhile
         "[p.kill() for p in ps]\n[p.wait() for p in ps]\n"
         "print('[launch.py:1] exits with return code = -9', flush=True)\n", "-m", "accelctl.worker"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(x) for x in launcher.stdout.readline().split()]
        watch = RankWatch()
        deadline = time.monotonic() + 10
        while len(watch._pids) < 2 and time.monotonic() < deadline:  # found as they start
            watch.poll([launcher.pid])
            time.sleep(0.05)
        assert watch.first_gone() == {} and watch._pids == {0: pids[0], 1: pids[1]}, (watch._pids, pids)
        os.kill(pids[1], signal.SIGKILL)
        deadline = time.monotonic() + 10
        while not watch.first_gone() and time.monotonic() < deadline:
            time.sleep(0.05)
            watch.poll([launcher.pid])
        assert watch.first_gone() == {1: -signal.SIGKILL}  # seen as a zombie, its wait status read
        log = launcher.communicate("go\n", timeout=30)[0]
    finally:
        if launcher.poll() is None:
            launcher.kill()
    # both ranks silent (no RunFinished/RunFailed): the one gone first, with the launcher's code
    from accelctl.contract.events import StepMetrics

    events = [StepMetrics(step=1, phase="measure", step_time_s=0.1, rank=r) for r in (0, 1)]
    rank, how, cause = crashed_rank(events, 1, log, watch.first_gone())
    assert rank == 1 and how.startswith("rank 1 killed by SIGKILL") and cause, how
    assert crashed_rank(events, 1, log)[:2] == (None, "")  # without the watch: cannot be told
    # both seen gone in one poll: the one that said nothing (rank 0 reported its peer's death)
    from accelctl.contract.events import RunFailed

    told = [*events, RunFailed(reason="exception", message="gloo: Connection reset by peer", rank=0)]
    assert crashed_rank(told, 1, log, (0, 1))[0] == 1
    assert crashed_rank(events, 1, log, (0, 1))[:2] == (None, "")  # both silent, same poll: cannot be told


# --------------------------------------------------------------------------- a launcher's own teardown


def test_a_launcher_lingering_after_its_ranks_finished_is_not_waited_for(runs, make_plan, tmp_path):
    """Every rank reported RunFinished and exited: the run ends ok then, not when the launcher
    is done tearing itself down (DeepSpeed's: 3.7 s after the last event here), and no process
    of the launch is left -- its children killed while their parent can still reap them."""
    from accelctl.contract.events import RunFinished
    from accelctl.contract.plan import Launch

    fake = tmp_path / "fakepkg" / "accelctl" / "worker"  # ``python -m accelctl.worker``: its line, then exit
    fake.mkdir(parents=True)
    (fake.parent / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("")
    lines = {r: RunFinished(rank=r, steps=1, wall_s=0.1).to_json() for r in range(2)}
    (fake / "__main__.py").write_text(
        "import os, pathlib\n"
        f"lines = {lines!r}\n"
        "r = int(os.environ['RANK'])\n"
        f"pathlib.Path(os.environ[{EVENTS_DIR!r}], f'rank{{r}}.jsonl').write_text(lines[r] + '\\n')\n"
        "import time; time.sleep(1)\n")  # a real rank lives long enough to be found by the runner
    # a launcher like DeepSpeed's: a middle process starts the ranks, polls them, then lingers
    middle = ("import os, subprocess, sys, time\n"
              "ps = [subprocess.Popen([sys.executable, '-m', 'accelctl.worker', 'job.json'], "
              f"cwd={str(fake.parent.parent)!r}, env=dict(os.environ, RANK=str(r))) for r in range(2)]\n"
              "while any(p.poll() is None for p in ps): time.sleep(0.05)\n"
              "time.sleep(120)\n")
    top = f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', {middle!r}]).wait()\n"
    plan = make_plan(launches=(Launch(name="launcher", argv=(sys.executable, "-c", top), processes=2),))
    t0 = time.monotonic()
    handle = runner.launch(plan, source_text=None, spec_json=None)
    try:
        result = handle.wait(timeout=TIMEOUT)
    finally:
        handle.stop()
    took = time.monotonic() - t0
    assert result.status == "ok", result.summary.get("failure")
    assert result.returncodes == (0,)
    assert took < 20, took  # the launcher would have lingered 120 s
    assert not procgroup.group_alive(handle.pids[0])  # nothing left of it, not even a zombie
