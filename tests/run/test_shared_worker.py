"""One worker process for the workloads of a file whose stacks match (issue 12), with real
processes: the real CLI, the real worker, real PyTorch and transformers.

* ``accelctl run`` of a two-workload file (cpu target) runs both in ONE worker process: both
  run records name the same worker pid and job list, each summary is its own workload's (its
  steps, its events, status ok), and each run folder's ``worker.log`` holds its own job's output.
* A stop (SIGINT to ``accelctl run``) during job 1 records run 1 ``stopped``, leaves no run
  folder for the job that never started (and says so), and no process behind.
* A job that fails (NaN loss) is recorded failed and the next job runs in the same worker; a
  worker killed during job 1 fails run 1 (crashed) and job 2 runs in a fresh worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_supervision import read_until_measure, run_processes

from accelctl.api import load, plan
from accelctl.contract.events import RunStarted, StepMetrics, read_events
from accelctl.run import store
from accelctl.run.supervision.shared import SharedRuns, groups, signature
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]


def gen_workload(name: str, steps: int, new_tokens: int = 8) -> str:
    return f"""
workload {name} {{
  task generate {{ prompt = "hello there" max_new_tokens = {new_tokens} tokens decoding = greedy kv_cache = on batch_size = 1 }}
  model gpt2(layers = 1, hidden = 32, heads = 2, vocab = 300, max_positions = 128)
  precision fp32
  measure {{ warmup = 1 steps  steps = {steps} steps }}
  target cpu {{ threads = 1  precision = fp32 }}
}}
"""


TRAIN_WL = """
workload tiny_mlm {
  task pretrain { objective = mlm }
  model bert(layers = 1, hidden = 32, heads = 2, vocab = 300)
  dataset synthetic(seq_len = 16 tokens)
  optimizer adamw(lr = 0.001)
  precision fp32
  batch { micro = 2  accumulation = 1  global = 2 }
  measure { warmup = 1 steps  steps = 6 steps }
  target cpu { threads = 1 }
}
"""


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "accelctl.cli", *args]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def run_dirs(runs: Path) -> list[Path]:
    return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.exists() else []


def by_workload(runs: Path) -> dict[str, dict]:
    return {store.read_json(d / "summary.json")["workload"]: store.read_json(d / "summary.json") for d in run_dirs(runs)}


@pytest.mark.slow
def test_two_workloads_of_a_file_run_in_one_worker_each_with_its_own_record(tmp_path):
    wl = tmp_path / "two.wl"
    wl.write_text(gen_workload("first", steps=3) + TRAIN_WL)
    runs = tmp_path / "runs"
    cp = subprocess.run(cli("run", str(wl), "--headless", "--runs-dir", str(runs)), cwd=ROOT, env=env(),
                        capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "one worker process runs workloads first, tiny_mlm" in cp.stdout
    summaries = by_workload(runs)
    assert set(summaries) == {"first", "tiny_mlm"}
    first, second = summaries["first"], summaries["tiny_mlm"]
    assert first["status"] == second["status"] == "ok"
    pids = {s["launches"][0]["pid"] for s in (first, second)}
    assert len(pids) == 1 and None not in pids, "both runs name the one worker process"
    assert first["launches"][0]["jobs_file"] == second["launches"][0]["jobs_file"]
    assert first["launches"][0]["returncode"] == second["launches"][0]["returncode"] == 0
    # each summary is its own workload's: its task, its steps, its own events only
    assert (first["task"], second["task"]) == ("generate", "pretrain")
    assert first["stats"]["step_time"]["count"] == 3 and second["stats"]["step_time"]["count"] == 6
    assert first["results"]["new_tokens"] == 8
    for d in run_dirs(runs):
        events = read_events(d / "events.jsonl")
        started = [e for e in events if isinstance(e, RunStarted)]
        assert len(started) == 1 and started[0].workload == store.read_json(d / "summary.json")["workload"]
        assert started[0].run_id == d.name
        assert len([e for e in events if isinstance(e, StepMetrics)]) in (1 + 3, 1 + 6)
        assert not run_processes(d)
    # the second job did not pay the worker's start-up again: its setup is a fraction of the first's
    assert second["timings"]["setup_s"] < first["timings"]["setup_s"] / 2


def start_long_then_never(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    """``accelctl run`` of two workloads sharing a worker: ``long_one`` (5,000 steps), then ``never``."""
    wl = tmp_path / "long.wl"
    wl.write_text(gen_workload("long_one", steps=5000) + gen_workload("never", steps=2))
    runs = tmp_path / "runs"
    proc = subprocess.Popen(cli("run", str(wl), "--headless", "--runs-dir", str(runs)), cwd=ROOT, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, runs


@pytest.mark.slow
def test_a_stop_during_job_one_records_it_stopped_and_leaves_no_process(tmp_path):
    proc, runs = start_long_then_never(tmp_path)
    try:
        read_until_measure(proc)
        (run_dir,) = run_dirs(runs)[:1]
        worker = store.read_json(run_dir / "runner.json")["pgids"]
        assert worker, "the shared worker is recorded in runner.json"
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out[-3000:]
    assert "workload never not run: the run before it was stopped" in out
    dirs = run_dirs(runs)
    assert [d.name.split("-")[2] for d in dirs] == ["long_one"], "the job never started leaves no run folder"
    summary = store.read_json(dirs[0] / "summary.json")
    assert summary["status"] == "stopped" and summary["failure"]["reason"] == "stopped"
    assert summary["stopped_by"] == "user"
    assert not run_processes(dirs[0]), "no process of the run is left"
    assert took < 60


def _plans(text: str, tmp_path: Path):
    wl = tmp_path / "w.wl"
    wl.write_text(text)
    return [plan(spec, "cpu") for spec in load(wl)]


def test_plans_of_one_stack_share_a_worker_and_others_do_not(tmp_path):
    a, b = _plans(gen_workload("a", 2) + TRAIN_WL, tmp_path)
    assert signature(a) is not None and signature(a) == signature(b)
    assert groups([a, b]) == [[0, 1]]
    assert groups([a, None, b]) == [[0], [1], [2]]  # a repeat series (None) runs alone, and splits the file
    other = replace(b, launches=(replace(b.launches[0], env={**b.launches[0].env,
                                                             "OMP_NUM_THREADS": "2"}),))
    assert groups([a, other]) == [[0], [1]]
    ddp = _plans((ROOT / "workloads" / "ddp_cpu.wl").read_text(), tmp_path)[0]
    assert signature(ddp) is None  # torchrun: a launcher of several processes


def _with_nan(p, step: int):
    job = replace(p.job, debug=replace(p.job.debug, inject_nan_at_step=step))
    return replace(p, job=job)


@pytest.mark.slow
def test_a_failed_job_is_recorded_and_the_next_runs_in_the_same_worker(tmp_path):
    train, gen = _plans(TRAIN_WL + gen_workload("after", 2), tmp_path)
    shared = SharedRuns([_with_nan(train, 2), gen], source_text=None, spec_jsons=[None, None], runs_root=tmp_path / "r")
    try:
        r1 = shared.start().wait(timeout=300)
        r2 = shared.start().wait(timeout=300)
    finally:
        assert shared.close() == []
    assert r1.status == "failed" and r1.summary["failure"]["reason"] == "nan_loss"
    assert r1.returncodes == (3,)
    assert r2.status == "ok" and r2.summary["stats"]["step_time"]["count"] == 2
    assert r1.summary["launches"][0]["pid"] == r2.summary["launches"][0]["pid"]
    assert not run_processes(r1.run_dir) and not run_processes(r2.run_dir)


@pytest.mark.slow
def test_a_worker_killed_in_job_one_fails_it_and_job_two_runs_in_a_fresh_worker(tmp_path):
    long, gen = _plans(gen_workload("long_one", 5000) + gen_workload("after", 2), tmp_path)
    shared = SharedRuns([long, gen], source_text=None, spec_jsons=[None, None], runs_root=tmp_path / "r")
    try:
        h1 = shared.start()
        deadline = time.monotonic() + 300
        for ev in h1.events():
            if isinstance(ev, StepMetrics) or time.monotonic() > deadline:
                break
        first_pid = h1.pids[0]
        os.kill(first_pid, signal.SIGKILL)
        r1 = h1.wait(timeout=120)
        r2 = shared.start().wait(timeout=300)
    finally:
        assert shared.close() == []
    assert r1.status == "failed" and r1.summary["failure"]["reason"] == "crashed"
    assert "SIGKILL" in r1.summary["failure"]["message"]
    assert r2.status == "ok"
    assert r2.summary["launches"][0]["pid"] != first_pid
    assert (r2.run_dir / "jobs.json").exists(), "the fresh worker's job list lives in the run it starts with"
    assert not run_processes(r1.run_dir) and not run_processes(r2.run_dir)
