"""A Slurm handle names its cluster (``slurm://<cluster>/<job>``): the job's own controller is
asked, on the real local cluster (``slurm_cluster``, conftest.py; ClusterName ``accelctltest``,
no slurmdbd).  The local cluster's handles are asked without ``-M`` (which, without slurmdbd,
fails even for the local name: checked here for real); another cluster's go through ``-M``,
and without slurmdbd that is one clear error -- never the local controller answering, or
cancelling, a job of the same number."""

from __future__ import annotations

import time

import pytest

from accelctl.engines.scheduler import AppHandle, AppState
from accelctl.engines.slurm_scheduler import SlurmScheduler, cluster_name
from accelctl.errors import RunError
from accelctl.run.store import scheduled_job

pytestmark = pytest.mark.slow


@pytest.fixture
def local_job(slurm_cluster):
    """A job queued on the local cluster (its id)."""
    r = slurm_cluster.run("sbatch", "--parsable", "--wrap", "sleep 120")
    assert r.returncode == 0, r.stderr
    job_id = r.stdout.strip()
    yield job_id
    slurm_cluster.run("scancel", job_id)


def test_without_slurmdbd_minus_m_cannot_reach_even_the_local_cluster(slurm_cluster):
    r = slurm_cluster.run("squeue", "-M", "accelctltest", "-h")
    assert r.returncode == 1 and "Problem talking to database" in r.stderr, r


def test_the_local_clusters_handle_is_asked_without_minus_m(slurm_cluster, local_job):
    assert cluster_name(slurm_cluster.env) == "accelctltest"
    sched = SlurmScheduler()
    handle = AppHandle("slurm", "accelctltest", local_job)
    now = sched.describe(handle)
    assert now is not None and now.state in (AppState.PENDING, AppState.RUNNING), now
    sched.cancel(handle)
    # the job goes through COMPLETING (its processes ending: RUNNING to us) before CANCELLED
    deadline = time.monotonic() + 60
    while (now := sched.describe(handle)).state is AppState.RUNNING and time.monotonic() < deadline:
        time.sleep(0.2)
    assert now.state is AppState.CANCELLED, now


def test_another_clusters_job_is_one_clear_error_and_the_local_job_of_that_number_is_untouched(
        slurm_cluster, local_job, tmp_path):
    sched = SlurmScheduler()
    elsewhere = AppHandle("slurm", "other", local_job)  # the same number, on a cluster that is not this one
    with pytest.raises(RuntimeError) as exc:
        sched.describe(elsewhere)
    said = str(exc.value)
    assert "'other' cannot be reached from here (this host's is 'accelctltest')" in said and "slurmdbd" in said
    with pytest.raises(RunError) as cancelled:  # what `accelctl cancel RUN` does with the stored handle
        scheduled_job.cancel(tmp_path, sched, elsewhere)
    message = str(cancelled.value)
    assert cancelled.value.exit_code == 1 and len(message.splitlines()) == 1, message
    assert f"slurm://other/{local_job} could not be cancelled from here" in message and "slurmdbd" in message
    # the local controller was not asked to cancel its own job of that number
    assert slurm_cluster.run("squeue", "-h", "-j", local_job, "-o", "%T").stdout.strip() in ("PENDING", "RUNNING")
    # `accelctl status`: the scheduler could not be asked, and says why
    (run_dir := tmp_path / "r").mkdir()
    from accelctl.engines.scheduler import Described, record

    record(run_dir, elsewhere, Described(AppState.RUNNING, "RUNNING"))
    handle, now, why = scheduled_job.describe(run_dir)
    assert handle == elsewhere and now is None and "cannot be reached from here" in why
