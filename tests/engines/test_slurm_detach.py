"""A Slurm job whose run outlives the terminal and its supervisor (issue 25, item 2), on the local
two-node cluster (``slurm_cluster``, conftest.py): ``run --detach`` survives a hang-up of the
starting session, ``status`` shows the scheduler's state, ``logs -f`` follows the run, and
``cancel`` from a third process ends the job (queue empty, no process of it left).  A supervisor
killed with SIGKILL cannot cancel its job: ``cancel`` from a fresh process does, by the handle
kept in the run store."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_slurm import TEMPLATE, _processes_of

from accelctl.contract import scheduler as scheduler_file
from accelctl.contract.envnames import EVENTS_DIR
from accelctl.run import store
from accelctl.run import procgroup

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
#: test_slurm's two-node CPU workload, long enough to be cancelled
WORKLOAD = TEMPLATE.replace("BLOCK", 'partition = "debug"').replace("STEPS", "100000")


def env() -> dict[str, str]:  # after the fixture: SLURM_CONF names the test cluster
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def accelctl(*argv: str, runs: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *argv, "--runs-dir", str(runs)], cwd=ROOT,
                          env=env(), capture_output=True, text=True, timeout=timeout)


def status(run_id: str, runs: Path) -> dict:
    done = accelctl("status", run_id, "--json", runs=runs)
    return json.loads(done.stdout)["result"]["runs"][0]


def processes(run_dir: Path) -> list[int]:
    """Every live process carrying the run's events folder (the job's ranks and agents get it
    through sbatch's --export=ALL) or naming the run folder on its command line."""
    return sorted(set(procgroup.carrying(EVENTS_DIR, str(run_dir))) | set(_processes_of(run_dir)))


def start_detached(wl: Path, runs: Path) -> str:
    """``accelctl run --detach`` as the leader of a session of its own, hung up (SIGHUP to its
    whole group) as soon as it printed the run id."""
    starter = subprocess.Popen([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-w", "tiny_slurm", "-t", "t",
                                "--detach", "--runs-dir", str(runs)], cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    run_id = starter.stdout.readline().strip()  # type: ignore[union-attr]
    try:
        os.killpg(starter.pid, signal.SIGHUP)
    except ProcessLookupError:
        pass
    starter.wait(timeout=30)
    assert store.is_run_id(run_id), (run_id, starter.stderr.read())  # type: ignore[union-attr]
    return run_id


def wait_running(run_id: str, runs: Path, step: int = 2, timeout_s: float = 240) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = status(run_id, runs)
        if now["step"] >= step and " RUNNING (RUNNING)" in now["scheduler"]:
            return now
        time.sleep(0.5)
    raise AssertionError(f"run {run_id} not running at step {step} in {timeout_s} s: {now}")


def job_of(run_dir: Path) -> str:
    job = scheduler_file.read(run_dir)
    assert job is not None and job.handle.startswith("slurm://") and job.handle.endswith(f"/{job.job_id}"), job
    return job.job_id


def assert_all_gone(slurm_cluster, run_dir: Path, job_id: str) -> None:
    assert slurm_cluster.run("squeue", "-h", "-j", job_id).stdout.strip() == ""
    assert "JobState=CANCELLED" in slurm_cluster.run("scontrol", "show", "job", "-o", job_id).stdout
    deadline = time.monotonic() + 15
    while processes(run_dir) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes(run_dir) == []
    stored = scheduler_file.read(run_dir)
    assert stored is not None and (stored.state, stored.app_state) == ("CANCELLED", "CANCELLED"), stored


def test_a_detached_two_node_job_survives_a_hangup_is_followed_and_cancelled_from_a_third_process(
        slurm_cluster, tmp_path):
    wl, runs = tmp_path / "tiny.wl", tmp_path / "runs"
    wl.write_text(WORKLOAD, encoding="utf-8")
    run_id = start_detached(wl, runs)
    run_dir = runs / run_id
    now = wait_running(run_id, runs)
    assert now["state"] == "running" and now["supervisor_pid"], now
    job_id = job_of(run_dir)
    assert "NumNodes=2" in slurm_cluster.run("scontrol", "show", "job", "-o", job_id).stdout
    follower = subprocess.Popen([sys.executable, "-m", "accelctl.cli", "logs", run_id, "-f", "--runs-dir", str(runs)],
                                cwd=ROOT, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1)
    done = accelctl("cancel", run_id, runs=runs)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "no process of it is left" in done.stdout
    assert_all_gone(slurm_cluster, run_dir, job_id)
    log = follower.communicate(timeout=60)[0]
    assert follower.returncode == 0, log  # it ended with the run
    assert f"accelctl: submitted slurm://" in log and f"cancelling slurm://" in log, log
    assert json.loads((run_dir / store.SUMMARY_FILE).read_text())["status"] == "stopped"
    assert f"{job_id} CANCELLED (CANCELLED)" in status(run_id, runs)["scheduler"]


def test_the_job_of_a_sigkilled_supervisor_is_cancelled_from_a_fresh_process(slurm_cluster, tmp_path):
    wl, runs = tmp_path / "tiny.wl", tmp_path / "runs"
    wl.write_text(WORKLOAD, encoding="utf-8")
    run_id = start_detached(wl, runs)
    run_dir = runs / run_id
    supervisor = wait_running(run_id, runs)["supervisor_pid"]
    job_id = job_of(run_dir)
    os.kill(supervisor, signal.SIGKILL)
    time.sleep(2)
    # the cluster's job does not die with the process that submitted it
    assert slurm_cluster.run("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip() == "RUNNING"
    assert " RUNNING (RUNNING)" in status(run_id, runs)["scheduler"]
    done = accelctl("cancel", run_id, runs=runs)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert_all_gone(slurm_cluster, run_dir, job_id)
    assert accelctl("cancel", run_id, runs=runs).returncode == 0  # again: nothing left to do, no error
