"""Checkpoint and resume, for real: ``accelctl run`` killed with SIGKILL after a checkpoint,
then ``accelctl run --resume RUN_ID``, against an uninterrupted run of the same workload
and seed -- every step after the checkpoint has exactly the same loss (float equality).

Paths: one CPU process (the runner and the worker's process group killed: no summary left,
the run ``incomplete``), 2-rank torchrun DDP over gloo (the launch's process group killed:
torchrun and both ranks; the runner records the run ``failed``), DeepSpeed ZeRO-2 (slow).
Atomicity: a worker killed in the middle of a save (its files written, the completion
marker not) resumes from the checkpoint before.  Refusals: completed run, changed workload,
no checkpoint block, no complete checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from viewed import supervisor_of

from accelctl.contract import checkpoint as layout
from accelctl.contract.events import CheckpointSaved, RunResumed, StepMetrics, read_events
from accelctl.errors import RunError
from accelctl.run.supervision.resume import live_processes, prepare_resume, resume_prior_events
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}

CPU_WORKLOAD = """
workload ck {
  seed = 11
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 2)
  batch { micro = 2 }
  measure { warmup = 2 steps  steps = 80 steps }
  checkpoint { every = 5 steps  keep = 2 }
  target cpu { device = cpu  threads = 1 }
}
"""

DDP_WORKLOAD = """
workload ck_ddp {
  seed = 7
  task pretrain { objective = mlm }
  model bert(layers = 2, hidden = 64, heads = 4, vocab = 1000)
  dataset synthetic(seq_len = 64 tokens)
  batch { micro = 4  global = 8 }
  measure { warmup = 2 steps  steps = 30 steps }
  checkpoint { every = 4 steps  keep = 2 }
  target cpu { devices = 2  parallel = ddp  threads = 1 }
}
"""

ZERO_WORKLOAD = """
workload ck_zero {
  seed = 3
  task pretrain { objective = mlm }
  model bert(layers = 2, hidden = 64, heads = 4, vocab = 1000)
  dataset synthetic(seq_len = 64 tokens)
  batch { micro = 4  global = 8 }
  measure { warmup = 1 steps  steps = 20 steps }
  checkpoint { every = 3 steps  keep = 1 }
  target cpu { devices = 2  parallel = zero(stage = 2)  threads = 1 }
}
"""


def cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=ENV)


def only_run(runs: Path) -> Path:
    (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
    return run_dir


def losses(events, rank: int = 0, after: int = 0) -> dict[int, float]:
    return {e.step: e.loss for e in events if isinstance(e, StepMetrics) and e.rank == rank and e.step > after}


def reference_run(workload: Path, runs: Path) -> list:
    cp = cli("run", str(workload), "--headless", "--runs-dir", str(runs))
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    return read_events(only_run(runs) / "events.jsonl")


def run_and_kill_after_checkpoint(workload: Path, runs: Path, kill_runner: bool) -> tuple[Path, int]:
    """Start ``accelctl run``; once a checkpoint is complete, SIGKILL the process group of every
    process of the run (the launch: torchrun and its ranks, or the worker) and, with
    ``kill_runner``, the runner's too.  Returns the run folder and the newest checkpoint's step."""
    runner = subprocess.Popen([sys.executable, "-m", "accelctl.cli", "run", str(workload), "--headless",
                               "--runs-dir", str(runs)], cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            dirs = [p for p in runs.iterdir() if p.is_dir()] if runs.exists() else []
            if dirs and any(layout.complete(dirs[0] / "checkpoints")):
                break
            assert runner.poll() is None, "the run ended before its first checkpoint"
            time.sleep(0.01)
        else:
            pytest.fail("no checkpoint within 300 s")
        run_dir = dirs[0]
        groups = {os.getpgid(pid) for pid in live_processes(run_dir / "job.json")}
        assert groups, "no process of the run found"
        # the runner: the supervisor ``accelctl run`` views, the leader of a session (and group) of its own
        for pgid in groups | ({runner.pid, supervisor_of(runner)} if kill_runner else set()):
            os.killpg(pgid, signal.SIGKILL)
        runner.wait(timeout=120)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
    deadline = time.monotonic() + 30
    while live_processes(run_dir / "job.json") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not live_processes(run_dir / "job.json")
    step, _ = layout.latest(run_dir / "checkpoints")
    return run_dir, step


def assert_resumed_exactly(run_dir: Path, runs: Path, killed_at: int, reference: list, world: int,
                           total: int) -> dict:
    lines_before = (run_dir / "events.jsonl").read_text().count("\n")
    events_before = len(read_events(run_dir / "events.jsonl"))
    cp = cli("run", "--resume", run_dir.name, "--headless", "--runs-dir", str(runs))
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert f"resuming run {run_dir.name} after step {killed_at}" in cp.stdout
    assert f"resumed from the checkpoint at step {killed_at}" in cp.stdout
    assert f"resumed: after the checkpoint of step {killed_at}" in cp.stdout  # the summary table
    events = read_events(run_dir / "events.jsonl")
    # the earlier attempt's lines are kept, the resumed attempt's appended after them
    assert (run_dir / "events.jsonl").read_text().count("\n") > lines_before
    after = events[events_before:]
    assert sorted(e.rank for e in after if isinstance(e, RunResumed)) == list(range(world))
    for rank in range(world):
        want = losses(reference, rank, after=killed_at)
        got = losses(after, rank)
        assert sorted(got) == list(range(killed_at + 1, total + 1))
        assert got == want, {s: (got[s], want[s]) for s in got if got[s] != want[s]}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "ok"
    assert [r["step"] for r in summary["resumed"]] == [killed_at]
    assert summary["stats"]["step_time"]["count"] + summary["stats"]["warmup_steps"] == total
    assert summary["results"]["final_loss"] == losses(reference)[total]
    assert (run_dir / "attempts" / "1" / "rank0.jsonl").exists()
    return summary


@pytest.mark.slow
def test_cpu_run_killed_after_a_checkpoint_resumes_with_identical_losses(tmp_path):
    workload = tmp_path / "ck.wl"
    workload.write_text(CPU_WORKLOAD)
    reference = reference_run(workload, tmp_path / "ref")
    runs = tmp_path / "runs"
    run_dir, step = run_and_kill_after_checkpoint(workload, runs, kill_runner=True)
    assert not (run_dir / "summary.json").exists()  # runner killed too: the run is incomplete
    assert step % 5 == 0 and step < 82

    # refused while the workload differs from the one the run stored, by its hash
    workload.write_text(CPU_WORKLOAD.replace("steps = 80", "steps = 81"))
    cp = cli("run", "--resume", run_dir.name, "--headless", "--runs-dir", str(runs))
    assert cp.returncode == 1 and "changed since the run started" in cp.stderr, cp.stderr
    workload.write_text(CPU_WORKLOAD)

    assert_resumed_exactly(run_dir, runs, step, reference, world=1, total=82)

    # a completed run is not resumed
    cp = cli("run", "--resume", run_dir.name, "--headless", "--runs-dir", str(runs))
    assert cp.returncode == 1 and "it completed (status ok)" in cp.stderr, cp.stderr


@pytest.mark.slow
def test_torchrun_two_ranks_killed_after_a_checkpoint_resume_with_identical_losses(tmp_path):
    workload = tmp_path / "ck_ddp.wl"
    workload.write_text(DDP_WORKLOAD)
    reference = reference_run(workload, tmp_path / "ref")
    assert losses(reference, 0) == losses(reference, 1)  # the all-reduced loss, on both ranks
    runs = tmp_path / "runs"
    run_dir, step = run_and_kill_after_checkpoint(workload, runs, kill_runner=False)
    killed = json.loads((run_dir / "summary.json").read_text())
    assert killed["status"] == "failed"  # the launch died by SIGKILL
    assert step % 4 == 0 and step < 32
    assert sorted(f.name for f in layout.step_dir(run_dir / "checkpoints", step).iterdir()) == [
        layout.MARKER, "rank0.pt", "rank1.pt", layout.STATE_FILE]
    assert_resumed_exactly(run_dir, runs, step, reference, world=2, total=32)


@pytest.mark.slow
def test_deepspeed_zero2_checkpoint_save_and_resume_with_identical_losses(tmp_path):
    pytest.importorskip("deepspeed")
    workload = tmp_path / "ck_zero.wl"
    workload.write_text(ZERO_WORKLOAD)
    reference = reference_run(workload, tmp_path / "ref")
    runs = tmp_path / "runs"
    run_dir, step = run_and_kill_after_checkpoint(workload, runs, kill_runner=False)
    files = {f.name for f in layout.step_dir(run_dir / "checkpoints", step).iterdir()}
    assert {"rank0.pt", "rank1.pt", layout.MARKER} <= files
    assert any("optim_states" in f for f in files), files  # DeepSpeed's own ZeRO shards
    assert_resumed_exactly(run_dir, runs, step, reference, world=2, total=21)


# -- atomicity: a save cut short leaves the previous checkpoint the one to resume from ------

@pytest.mark.slow
def test_a_worker_killed_in_the_middle_of_a_save_resumes_from_the_checkpoint_before(tmp_path):

    from accelctl.api import load, plan
    from accelctl.contract.job import DebugJob, WorkerJob

    workload = tmp_path / "ck.wl"
    workload.write_text(CPU_WORKLOAD.replace("steps = 80", "steps = 13"))  # 2 + 13 steps: the last one saves
    (spec,) = load(workload)
    base = plan(spec, "cpu").job

    def run(name: str, job: WorkerJob) -> tuple[int, list]:
        folder = tmp_path / name
        folder.mkdir(exist_ok=True)
        job = replace(job, run_id=name, events_dir=str(folder))
        (folder / "job.json").write_text(job.to_json())
        cp = subprocess.run([sys.executable, "-m", "accelctl.worker", str(folder / "job.json")], cwd=ROOT, env=ENV,
                            capture_output=True, text=True, timeout=300)
        return cp.returncode, read_events(folder / "rank0.jsonl")

    # killed in the middle of the save of the last step, after its loss: every step ran without a
    # break, so this run's losses are also the reference
    rc, reference = run("cut", replace(base, debug=DebugJob(kill_in_checkpoint_at_step=15)))
    assert rc == -signal.SIGKILL
    assert sorted(losses(reference)) == list(range(1, 16)) and not [e for e in reference if isinstance(e, RunResumed)]
    folder = tmp_path / "cut" / "checkpoints"
    # step 15's files are all there, synced and renamed, but not its marker: not a checkpoint
    assert {f.name for f in (folder / "step-00000015").iterdir()} == {"state.pt", "rank0.pt"}
    assert [s for s, _ in layout.complete(folder)] == [5, 10]
    assert [e.step for e in reference if isinstance(e, CheckpointSaved)] == [5, 10]

    rc, events = run("cut", base)  # the same job again: it finds step 10 and goes on from there
    assert rc == 0
    (resumed,) = [e for e in events if isinstance(e, RunResumed)]
    assert resumed.step == 10
    after = events[events.index(resumed):]
    assert losses(after) == losses(reference, after=10) and sorted(losses(after)) == list(range(11, 16))
    # keep = 2: the two newest complete checkpoints, and the cut save replaced by a whole one
    assert [s for s, _ in layout.complete(folder)] == [10, 15]


def test_a_run_whose_rank_dies_in_the_middle_of_a_save_leaves_no_cut_save(tmp_path):
    """A rank killed in its part of a save (by its launcher, or kill -9) cannot remove the save's
    folder: the runner does, once every process of the run is gone."""

    from accelctl.api import load, plan
    from accelctl.contract.job import DebugJob
    from accelctl.run.supervision.runner import launch

    workload = tmp_path / "ck.wl"
    workload.write_text(CPU_WORKLOAD.replace("steps = 80", "steps = 8"))  # 2 + 8 steps: step 10 saves
    (spec,) = load(workload)
    p = plan(spec, "cpu")
    p = replace(p, job=replace(p.job, debug=DebugJob(kill_in_checkpoint_at_step=10)))
    result = launch(p, source_text=workload.read_text(), spec_json=None, runs_root=tmp_path / "runs").wait(300)
    assert result.status == "failed", result.summary
    folder = result.run_dir / "checkpoints"
    assert sorted(c.name for c in folder.iterdir()) == ["step-00000005"]  # step 10's rank0.pt and state.pt gone
    assert [s for s, _ in layout.complete(folder)] == [5]


# -- refusals ----------------------------------------------------------------------------------

def stored_run(tmp_path: Path, text: str) -> Path:
    """A run folder as ``accelctl run`` writes it before starting anything (real plan and store)."""
    from accelctl.api import load, plan
    from accelctl.run import store

    workload = tmp_path / "w.wl"
    workload.write_text(text)
    (spec,) = load(workload)
    p = plan(spec, "cpu")
    run_dir = store.new_run_dir(p.workload, p.target, tmp_path / "runs")
    store.write_inputs(run_dir, p, source_text=text, spec_json=spec.to_json(), events_dir=run_dir)
    return run_dir


def test_resume_refuses_a_run_without_a_checkpoint_block(tmp_path):
    run_dir = stored_run(tmp_path, CPU_WORKLOAD.replace("checkpoint { every = 5 steps  keep = 2 }", ""))
    with pytest.raises(RunError, match="run without checkpoints"):
        prepare_resume(run_dir.name, tmp_path / "runs")


def test_resume_refuses_a_run_with_no_complete_checkpoint(tmp_path):
    run_dir = stored_run(tmp_path, CPU_WORKLOAD)
    (run_dir / "checkpoints" / "step-00000005").mkdir(parents=True)  # a save cut short
    with pytest.raises(RunError, match="no complete checkpoint"):
        prepare_resume(run_dir.name, tmp_path / "runs")
    cp = cli("run", "--resume", run_dir.name, "--runs-dir", str(tmp_path / "runs"), timeout=60)
    assert cp.returncode == 1 and "cannot resume run" in cp.stderr and "Traceback" not in cp.stderr


def test_resume_refuses_an_unknown_run_and_a_missing_workload_file(tmp_path):
    cp = cli("run", "--resume", "nope", "--runs-dir", str(tmp_path / "runs"), timeout=60)
    # an unknown run id is a usage error, as in report and compare (accelctl.exitcodes.USAGE)
    assert cp.returncode == 2 and "no run 'nope'" in cp.stderr and "Traceback" not in cp.stderr
    run_dir = stored_run(tmp_path, CPU_WORKLOAD)
    (run_dir / "checkpoints" / "step-00000005").mkdir(parents=True)
    layout.mark_complete(run_dir / "checkpoints" / "step-00000005", {"step": 5})
    shutil.move(tmp_path / "w.wl", tmp_path / "moved.wl")
    with pytest.raises(RunError, match="cannot read its workload file"):
        prepare_resume(run_dir.name, tmp_path / "runs")
    point = prepare_resume(run_dir.name, tmp_path / "runs", tmp_path / "moved.wl")  # named: checked, accepted
    assert point.step == 5 and point.run_dir == run_dir


def test_prior_events_count_each_step_once_across_attempts():
    def step(n, rank=0, t=0.0):
        return StepMetrics(step=n, phase="measure", step_time_s=0.1, rank=rank, loss=float(n), time_unix_s=t or n)

    # attempt 1: steps 1-7 (checkpoint at 4); attempt 2 resumed at 4, steps 5-9 (checkpoint at 8)
    events = [step(n) for n in range(1, 8)] + [RunResumed(step=4, path="x", time_unix_s=20.0)]
    events += [step(n, t=20.0 + n) for n in range(5, 10)]
    kept = resume_prior_events(events, 8)
    assert [e.step for e in kept if isinstance(e, StepMetrics)] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [e.time_unix_s for e in kept if isinstance(e, StepMetrics)][4:] == [25.0, 26.0, 27.0, 28.0]


def test_plan_carries_the_checkpoint_and_warns_when_none_would_be_saved(tmp_path):
    from accelctl.api import load, plan
    from accelctl.workload.types import CheckpointSpec

    workload = tmp_path / "w.wl"
    workload.write_text(CPU_WORKLOAD.replace("every = 5 steps  keep = 2", 'every = 500 steps  keep = 2  dir = "ck"'))
    (spec,) = load(workload)
    p = plan(spec, "cpu")
    assert p.job.checkpoint == CheckpointSpec(every=500, keep=2, dir=str(tmp_path / "ck"))  # next to the workload
    assert "checkpoint every 500 steps: this run takes 82 steps and saves no checkpoint" in p.warnings
    assert not plan(load(ROOT / "workloads" / "ddp_cpu.wl")[0], "cpu").job.checkpoint.every  # none by default


@pytest.mark.parametrize("how", ["run folder writable by others", "run folder of another user",
                                 "checkpoint folder writable by its group", "step folder writable by others"])
def test_resume_refuses_a_folder_others_could_have_written(tmp_path, how):
    """A checkpoint is loaded only from where only this user could have put it; nothing in the
    folder is moved by the refusal (no attempt archived; a folder of another's not even claimed)."""
    run_dir = stored_run(tmp_path, CPU_WORKLOAD)
    step = layout.step_dir(run_dir / "checkpoints", 5)
    step.mkdir(parents=True)
    layout.mark_complete(step, {"step": 5})
    assert stat.S_IMODE(run_dir.stat().st_mode) & 0o022 == 0  # as the store makes it, whatever the umask
    if how == "run folder of another user":
        if os.geteuid() != 0:
            pytest.skip("not run: giving a folder to another user needs root")
        os.chown(run_dir, 65534, 65534)
    else:
        folder = {"run folder writable by others": run_dir, "checkpoint folder writable by its group":
                  run_dir / "checkpoints", "step folder writable by others": step}[how]
        os.chmod(folder, 0o770 if "group" in how else 0o777)
    before = sorted(p.name for p in run_dir.iterdir())
    with pytest.raises(RunError, match="not this user's alone"):
        prepare_resume(run_dir.name, tmp_path / "runs")
    after = sorted(p.name for p in run_dir.iterdir() if p.name != "owner.lock")
    assert after == before and ("owner.lock" not in os.listdir(run_dir) or "checkpoint" in how or "step" in how)


def test_the_store_makes_run_folders_no_one_else_can_write_whatever_the_umask(tmp_path):
    from accelctl.run import store

    old = os.umask(0o002)
    try:
        run_dir = store.new_run_dir("w", "cpu", tmp_path / "a" / "runs")
    finally:
        os.umask(old)
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o755
    # and the store it made, with what was missing above it: the stored estimate fit lives there
    assert [stat.S_IMODE(p.stat().st_mode) for p in (run_dir.parent, run_dir.parent.parent)] == [0o755, 0o755]


def test_a_run_writes_no_file_or_folder_others_can_write_whatever_the_umask(tmp_path):
    """Under a umask of 000, every file and folder of a real run (its plan, job, runner.json,
    events, log, summary) is still its user's alone to write: ``run --resume`` runs them."""
    workload = tmp_path / "w.wl"
    workload.write_text(CPU_WORKLOAD.replace("steps = 80 steps", "steps = 6 steps"))
    done = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(workload), "--runs-dir",
                           str(tmp_path / "runs")], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120,
                          umask=0)
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    written = [run_dir, *run_dir.rglob("*")]
    assert {p.name for p in written} >= {"plan.json", "job.json", "runner.json", "events.jsonl", "worker.log",
                                         "summary.json", "workload.wl"}
    assert [(p.name, oct(stat.S_IMODE(p.stat().st_mode))) for p in written if p.stat().st_mode & 0o022] == []


@pytest.mark.parametrize("umask", [0o000, 0o077])
def test_the_store_writes_a_run_folder_no_one_else_can_write_and_keeps_a_private_umask(tmp_path, umask):
    """What the store writes is never writable by group or others; a umask of 077 still makes
    it private (nothing is made more readable than the umask allows)."""
    old = os.umask(umask)
    try:
        run_dir = stored_run(tmp_path, CPU_WORKLOAD)
    finally:
        os.umask(old)
    for path in [run_dir.parent, run_dir, *run_dir.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o022 == 0 and mode & umask == 0, (path.name, oct(mode))


def test_a_detached_run_makes_its_store_and_console_no_one_else_can_write_whatever_the_umask(tmp_path):
    """``run --detach`` into a store not there yet, under a umask of 000: the store, its consoles
    folder and the console file are made as a run's own folder is (the store a 0777 folder
    would let anyone put another run folder in a run's place)."""
    workload = tmp_path / "w.wl"
    workload.write_text(CPU_WORKLOAD.replace("steps = 80 steps", "steps = 4 steps"))
    runs = tmp_path / "new" / "runs"
    done = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(workload), "--detach", "--runs-dir",
                           str(runs)], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120, umask=0)
    assert done.returncode == 0, done.stderr
    run_dir = runs / done.stdout.strip()
    deadline = time.monotonic() + 120
    while not (run_dir / "summary.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    written = [tmp_path / "new", runs, *runs.rglob("*")]
    assert any(p.suffix == ".console" for p in written)
    assert [(str(p.relative_to(tmp_path)), oct(stat.S_IMODE(p.stat().st_mode))) for p in written
            if p.stat().st_mode & 0o022] == []


def test_resume_refuses_a_plan_or_job_others_could_have_written(tmp_path):
    """A folder of a run from before (its files written under a umask of 002): the plan and job
    it would run again are refused unread."""
    for name in ("plan.json", "job.json"):
        (tmp_path / name).mkdir()
        run_dir = stored_run(tmp_path / name, CPU_WORKLOAD)
        step = layout.step_dir(run_dir / "checkpoints", 5)
        step.mkdir(parents=True)
        layout.mark_complete(step, {"step": 5})
        os.chmod(run_dir / name, 0o664)
        with pytest.raises(RunError, match=f"its {name} is not this user's alone"):
            prepare_resume(run_dir.name, tmp_path / name / "runs")


def test_a_checkpoint_marker_that_is_a_fifo_or_a_link_is_no_checkpoint_and_never_a_wait(tmp_path):
    import os

    step = layout.step_dir(tmp_path / "checkpoints", 5)
    step.mkdir(parents=True)
    os.mkfifo(step / layout.MARKER)
    assert layout.read_marker(step) == {}
    (step / layout.MARKER).unlink()
    (step / layout.MARKER).symlink_to("/dev/zero")
    assert layout.read_marker(step) == {}
