"""One owner per run folder (issue 22, item 5): ``accelctl run`` and ``accelctl run --resume``
hold an exclusive kernel lock on ``owner.lock`` for as long as they run it.

Real processes throughout: the lock's holder is another process, killed with SIGKILL; the
end-to-end test stops a real training run after a checkpoint, starts two resumes of it at
once (one refused, one new attempt), SIGKILLs the accepted one mid-run and resumes again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_checkpoint_resume import CPU_WORKLOAD, stored_run
from viewed import supervisor_of

from accelctl import exitcodes
from accelctl.contract import checkpoint as layout
from accelctl.contract.events import RunResumed, StepMetrics, read_events
from accelctl.errors import RunError
from accelctl.run.store import ownership
from accelctl.run import procgroup
from accelctl.run.supervision.resume import live_processes

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}

HOLDER = """
import sys, time
from pathlib import Path
from accelctl.run.store.ownership import claim
owner = claim(Path(sys.argv[1]))
if sys.argv[2:] == ["child"]:
    import subprocess
    subprocess.Popen(["sleep", "600"])
print("held", flush=True)
time.sleep(600)
"""


def hold_in_another_process(run_dir: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(run_dir)], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_claim_is_refused_at_once_naming_the_owner(tmp_path):
    first = ownership.claim(tmp_path)
    t0 = time.monotonic()
    with pytest.raises(ownership.RunBusy) as refused:
        ownership.claim(tmp_path)
    assert time.monotonic() - t0 < 2.0
    assert refused.value.pid == os.getpid() and refused.value.exit_code == exitcodes.USAGE
    assert f"run {tmp_path.name} is in use by accelctl pid {os.getpid()}" in str(refused.value)
    assert ownership.held_by(tmp_path) == os.getpid()
    first.release()
    assert ownership.held_by(tmp_path) is False
    ownership.claim(tmp_path).release()  # free again


def test_the_kernel_drops_the_claim_of_an_owner_killed_with_sigkill(tmp_path):
    holder = hold_in_another_process(tmp_path)
    try:
        with pytest.raises(ownership.RunBusy, match=f"pid {holder.pid}"):
            ownership.claim(tmp_path)
    finally:
        holder.kill()  # SIGKILL: no release() runs
        holder.wait()
    assert (tmp_path / ownership.OWNER_FILE).read_text().strip() == str(holder.pid)  # its pid is left...
    owner = ownership.claim(tmp_path)  # ...but not its lock
    assert (tmp_path / ownership.OWNER_FILE).read_text().strip() == str(os.getpid())
    owner.release()


def test_a_special_file_in_place_of_the_lock_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / ownership.OWNER_FILE)
    with pytest.raises(RunError, match="not a regular file"):
        ownership.claim(tmp_path)
    assert ownership.held_by(tmp_path) is False
    other = tmp_path / "other"
    other.mkdir()
    (other / ownership.OWNER_FILE).symlink_to("/dev/zero")
    with pytest.raises(RunError, match="cannot own run other"):
        ownership.claim(other)


def test_launches_do_not_inherit_the_claim(tmp_path):
    """The lock lives in the supervising process only: a child it starts (close-on-exec) holds
    nothing once the parent is gone."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), "child"], cwd=ROOT, env=ENV,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        assert procgroup.live_members(holder.pid)  # the child outlives it, in its group
        ownership.claim(tmp_path).release()  # and holds nothing
    finally:
        os.killpg(holder.pid, signal.SIGKILL)


def test_a_second_resume_prepared_while_the_first_holds_the_run_is_refused_and_moves_nothing(tmp_path):
    """``prepare_resume`` claims the folder before its checks and keeps the claim for the launch:
    a second one meanwhile (here: before the first has started anything) is refused, and the
    folder keeps one new attempt."""
    from accelctl.run.supervision.resume import prepare_resume

    run_dir = stored_run(tmp_path, WORKLOAD)
    layout.step_dir(run_dir / "checkpoints", 5).mkdir(parents=True)
    layout.mark_complete(layout.step_dir(run_dir / "checkpoints", 5), {"step": 5})
    first = prepare_resume(run_dir.name, tmp_path / "runs")
    with pytest.raises(ownership.RunBusy, match=f"pid {os.getpid()}"):
        prepare_resume(run_dir.name, tmp_path / "runs")
    assert sorted(p.name for p in (run_dir / "attempts").iterdir()) == ["1"]
    first.owner.release()
    prepare_resume(run_dir.name, tmp_path / "runs").owner.release()  # free again once given up
    assert sorted(p.name for p in (run_dir / "attempts").iterdir()) == ["1", "2"]


# --------------------------------------------------------------------------- end to end, real runs

WORKLOAD = CPU_WORKLOAD.replace("steps = 80 steps", "steps = 400 steps")


def accelctl(*args: str, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "accelctl.cli", *args], cwd=ROOT, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True, **kw)


def wait_for(what, timeout: float = 180.0, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        if proc is not None and proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"exited {proc.returncode} first:\n{out[-2000:]}\n{err[-2000:]}")
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


def resumed_steps(run_dir: Path) -> list[int]:
    path = run_dir / "events.jsonl"
    return [e.step for e in read_events(path) if isinstance(e, RunResumed)] if path.exists() else []


def gone(run_dir: Path) -> bool:
    return not live_processes(run_dir / "job.json")


@pytest.mark.slow
def test_one_owner_at_a_time_for_run_and_resume(tmp_path):
    workload = tmp_path / "own.wl"
    workload.write_text(WORKLOAD)
    runs = tmp_path / "runs"
    procs: list[subprocess.Popen] = []

    def start(*args: str) -> subprocess.Popen:
        procs.append(accelctl(*args, "--headless", "--runs-dir", str(runs)))
        return procs[-1]

    try:
        original = start("run", str(workload))
        run_dir = wait_for(lambda: next((p for p in runs.iterdir() if layout.complete(p / "checkpoints")), None)
                           if runs.exists() else None, proc=original)

        # 1. a resume while the original run still runs: refused at once, naming the runner
        early = start("run", "--resume", run_dir.name)
        out, err = early.communicate(timeout=120)
        assert early.returncode == exitcodes.USAGE, out + err
        (line,) = err.strip().splitlines()
        assert run_dir.name in line and f"pid {supervisor_of(original)}" in line, line
        assert not (run_dir / "attempts").exists() and not (run_dir / "summary.json").exists()

        os.killpg(original.pid, signal.SIGTERM)
        assert original.wait(timeout=120) == exitcodes.STOPPED
        assert json.loads((run_dir / "summary.json").read_text())["status"] == "stopped"
        assert not (run_dir / ownership.OWNER_FILE).read_text()  # released with the run's end

        # 2. two resumes at once: exactly one is accepted, the other refused without touching the folder
        stopped_at, _ = layout.latest(run_dir / "checkpoints")  # before either could save one of its own
        a, b = start("run", "--resume", run_dir.name), start("run", "--resume", run_dir.name)
        wait_for(lambda: a.poll() is not None or b.poll() is not None, timeout=120)
        loser, winner = (a, b) if a.poll() is not None else (b, a)
        out, err = loser.communicate()
        assert loser.returncode == exitcodes.USAGE, out + err
        assert "Traceback" not in err and "resuming run" not in out
        (line,) = err.strip().splitlines()
        assert run_dir.name in line and f"pid {supervisor_of(winner)}" in line, line
        # mid-run: the accepted resume has saved a checkpoint of its own, and its resume is in the
        # run's record (merged from the rank's file at the supervisor's next tick, not at once)
        wait_for(lambda: layout.latest(run_dir / "checkpoints")[0] > stopped_at, proc=winner)
        wait_for(lambda: resumed_steps(run_dir), proc=winner)
        assert resumed_steps(run_dir) == [stopped_at]
        assert sorted(p.name for p in (run_dir / "attempts").iterdir()) == ["1"]
        assert winner.poll() is None

        # 3. the owner SIGKILLed mid-run: its lock goes with it, a new resume is accepted and completes
        os.kill(supervisor_of(winner), signal.SIGKILL)  # the owner: the supervisor ``accelctl run`` views
        winner.wait(timeout=60)
        wait_for(lambda: gone(run_dir), timeout=60)
        last = start("run", "--resume", run_dir.name)
        out, err = last.communicate(timeout=600)
        assert last.returncode == 0, out[-3000:] + err[-3000:]
        assert f"resuming run {run_dir.name}" in out
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok"
    # the killed attempt's resume and the last one's (from the killed attempt's checkpoint); none refused
    (first, second) = summary["resumed"]
    assert first["step"] == stopped_at < second["step"]
    assert resumed_steps(run_dir) == [stopped_at, second["step"]]
    assert sorted(p.name for p in (run_dir / "attempts").iterdir()) == ["1", "2"]
    steps = [e.step for e in read_events(run_dir / "rank0.jsonl") if isinstance(e, StepMetrics)]
    assert steps[-1] == 402 and steps == sorted(steps)
