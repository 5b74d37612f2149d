"""A kubernetes plan run end to end against a loopback stand-in of the API server, the
training operator and the kubelet (``k8s_loopback.py``: each replica a local process with
the operator's variables; not Kubernetes).  Real: the rendered manifest, the kubernetes
client, the scheduler followed by accelctl's runner, two torchrun agents meeting at the master's
address with the static rendezvous and training a real model, the events coming back
through the run folder.  Stopping the run deletes the job and leaves no process.  The job
(namespace/name, uid, condition, master's exit code) lands in ``scheduler.json`` and the run
store's summary."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from accelctl.api import launch, plan, validate_text
from accelctl.contract import scheduler
from accelctl.contract.events import RunStarted, StepMetrics, read_events
from accelctl.engines.kubernetes_scheduler import KubernetesScheduler
from accelctl.run import store
from accelctl.run.supervision.scheduled import ScheduledJob

pytest.importorskip("kubernetes")

from k8s_loopback import LoopbackCluster, kubelet_expand  # noqa: E402  (tests/engines is on sys.path: rootdir conftest)

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = """
workload tiny_k8s {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 4)
  dataset synthetic(seq_len = 32)
  batch { micro = 4  accumulation = 1 }
  optimizer adamw { lr = 0.001 }
  measure { warmup = 1  steps = STEPS }
  engine kubernetes { image = "loopback/accelctl:1"  volume_claim = "runs"  volume_path = VOLUME }
  target t { device = cpu  devices = 1  nodes = 2  threads = 1  precision = fp32  engine = kubernetes }
}
"""


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    c = LoopbackCluster(tmp_path, claims={"runs": tmp_path})  # the PVC runs: the folder the plans mount
    cfg = tmp_path / "kubeconfig"
    cfg.write_text(c.kubeconfig())
    monkeypatch.setenv("KUBECONFIG", str(cfg))
    yield c
    left = c.close()
    assert left == [], f"pods still running after the test: {left}"


def make_plan(volume: Path, steps: int):
    text = TEMPLATE.replace("STEPS", str(steps)).replace("VOLUME", json.dumps(str(volume)))
    specs, diags = validate_text(text)
    assert not diags, diags
    return specs[0], plan(specs[0], "t")


@pytest.mark.parametrize("text,expected", [
    ("--node-rank=$(RANK) --nnodes=$(NNODES)", "--node-rank=3 --nnodes=$(NNODES)"),  # an undefined name: as written
    ("$(RANK)$(RANK)", "33"),
    ("$$(RANK)", "$(RANK)"),        # an escaped $ before a reference
    ("$$$(RANK)", "$3"),
    ("cost $5 and $", "cost $5 and $"),  # $ before anything else, and at the end: kept
    ("$(RANK", "$(RANK"),           # no closing parenthesis: kept
    ("$()", "$()"),
    ("$(A$(RANK))", "$(A$(RANK))"),  # the name runs to the first ')': "A$(RANK", undefined
])
def test_the_stand_in_expands_as_the_kubelet_does(text, expected):
    """The loopback's own expansion, against the kubelet's (expansion/expand.go) by hand."""
    assert kubelet_expand(text, {"RANK": "3"}) == expected


def test_api_start_blocker_passes_against_a_cluster_that_answers(cluster, tmp_path):
    from accelctl.api import start_blocker

    _, p = make_plan(tmp_path, 2)
    assert start_blocker(p, tmp_path / "runs") is None
    assert "on the shared volume" in start_blocker(p, Path("/elsewhere"))


@pytest.mark.slow
def test_two_pods_train_together_and_events_come_back(cluster, tmp_path):
    _, p = make_plan(tmp_path, 6)
    t0 = time.monotonic()
    handle = launch(p, source_text=None, spec_json=None, runs_root=tmp_path / "runs")
    first_step = None
    for ev in handle.events():
        if isinstance(ev, StepMetrics) and first_step is None:
            first_step = time.monotonic() - t0
    result = handle.wait(timeout=300)
    wall = time.monotonic() - t0
    log = (handle.run_dir / "worker.log").read_text(errors="replace")
    assert result.status == "ok", (result.summary, log)
    namespace, name = (handle.run_dir / "kubernetes_job").read_text().strip().split("/")
    assert namespace == "default" and name.startswith("tiny-k8s-t-")
    assert "Running" in log and "Succeeded" in log
    pods = sorted(p.name for p in cluster.all_pods())
    assert pods == [f"{name}-master-0", f"{name}-worker-0"]
    assert all(p.proc.returncode == 0 for p in cluster.all_pods())
    # the job as the API server named it, its final condition and the master's exit code
    uid = cluster.jobs[(namespace, name)].body["metadata"]["uid"]
    assert uid
    rec = store.read_run(handle.run_dir)
    assert rec.summary["scheduler"] == {"scheduler": "kubernetes", "job_id": name, "state": "Succeeded",
                                        "exit_code": 0, "handle": f"kubernetes://default/{name}",
                                        "app_state": "SUCCEEDED"}, rec.summary
    assert rec.scheduler.short() == f"kubernetes {name} Succeeded"
    events = list(read_events(handle.run_dir / "events.jsonl"))
    assert {e.rank for e in events if isinstance(e, StepMetrics)} == {0, 1}
    started = [e for e in events if isinstance(e, RunStarted)]
    assert started and started[0].world_size == 2
    # the master pod's log (torchrun's and the worker's output) was streamed into the run's log
    master_log = (tmp_path / f"{name}-master-0.log").read_text(errors="replace")
    assert master_log.strip() and master_log.strip().splitlines()[-1] in log
    print(f"\nkubernetes (loopback) 2x1 DDP: submit -> first step {first_step:.1f} s, whole run {wall:.1f} s")


@pytest.mark.slow
def test_stopping_the_run_deletes_the_job_and_leaves_nothing(cluster, tmp_path):
    _, p = make_plan(tmp_path, 100000)
    handle = launch(p, source_text=None, spec_json=None, runs_root=tmp_path / "runs")
    for ev in handle.events():
        if isinstance(ev, StepMetrics):
            break
    pods = cluster.all_pods()
    assert len(pods) == 2 and all(p.proc.poll() is None for p in pods)
    t0 = time.monotonic()
    handle.stop()
    result = handle.wait(timeout=120)
    stopped = time.monotonic() - t0
    assert result.status == "stopped"
    assert cluster.jobs == {}  # deleted
    assert all(p.proc.poll() is not None for p in pods)
    assert ("DELETE" in {m for m, _ in cluster.requests})
    log = (handle.run_dir / "worker.log").read_text(errors="replace")
    assert "cancelled (Deleted)" in log, log[-2000:]
    assert store.read_run(handle.run_dir).summary["scheduler"]["state"] == "Deleted"
    print(f"\nkubernetes (loopback) cancel: stop -> job deleted, pods gone, runner done in {stopped:.1f} s")


@pytest.mark.slow
def test_a_failing_pod_fails_the_run_with_its_exit_code(cluster, tmp_path):
    """A pod whose worker cannot start (its job.json is missing) fails the job; the submitter
    exits with the master's code, having streamed the master's last words."""
    _, p = make_plan(tmp_path, 4)
    run_dir = tmp_path / "runs" / "manual"
    run_dir.mkdir(parents=True)
    manifest = run_dir / "pytorchjob.json"
    job = json.loads(next(f.content for f in p.files if f.path == "pytorchjob.json"))
    # the master alone (which of two failing pods the operator sees first is a race)
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]
    args = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["args"]
    args[args.index("--nnodes=2")] = "--nnodes=1"
    manifest.write_text(json.dumps(job))
    job_run = ScheduledJob(KubernetesScheduler(), dict(p.request, manifest=job), run_dir, os.environ,
                           run_dir / "worker.log")
    code = job_run.wait(timeout=300)
    out = (run_dir / "worker.log").read_text(errors="replace")
    assert "Failed (FAILED)" in out, out
    (master,) = [p for p in cluster.all_pods() if p.rtype == "master"]
    assert master.proc.returncode not in (None, 0) and code == master.proc.returncode
    assert "job.json" in out  # the master's log, streamed, names what was missing
    job_record = scheduler.read(run_dir)
    assert (job_record.state, job_record.exit_code) == ("Failed", master.proc.returncode), job_record
    assert job_record.handle.startswith("kubernetes://default/tiny-k8s-t-") and job_record.app_state == "FAILED"


def test_a_job_deleted_elsewhere_ends_the_supervisors_follow(cluster, tmp_path):
    """Someone deletes the job (kubectl delete): the follow loop says so and ends the launch with
    1 instead of polling a job that no longer exists."""
    _, p = make_plan(tmp_path, 4)
    job = json.loads(next(f.content for f in p.files if f.path == "pytorchjob.json"))
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        c = replica["template"]["spec"]["containers"][0]
        c["command"], c["args"] = ["python", "-c", "import time; time.sleep(120)"], []
    run_dir = tmp_path / "runs" / "manual"
    run_dir.mkdir(parents=True)
    job_run = ScheduledJob(KubernetesScheduler(), dict(p.request, manifest=job), run_dir, os.environ,
                           run_dir / "worker.log")
    deadline = time.monotonic() + 60
    while not cluster.jobs and time.monotonic() < deadline:
        time.sleep(0.1)
    ((ns, name), job_obj), = cluster.jobs.items()
    # the record follows the job: created, then running (the pods sleep)
    while (scheduler.read(run_dir) is None or scheduler.read(run_dir).state != "Running") \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    assert scheduler.read(run_dir) == scheduler.SchedulerJob("kubernetes", name, "Running", None, "",
                                                             f"kubernetes://{ns}/{name}", "RUNNING")
    job_obj.delete(lambda: cluster.jobs.pop((ns, name), None))
    assert job_run.wait(timeout=60) == 1
    out = (run_dir / "worker.log").read_text(errors="replace")
    assert f"kubernetes://{ns}/{name} is gone" in out, out
    assert scheduler.read(run_dir).state == "Deleted"


@pytest.mark.slow
def test_a_detached_runs_job_outlives_its_sigkilled_supervisor_and_is_cancelled_from_a_fresh_process(cluster, tmp_path):
    """``run --detach``; the supervisor SIGKILLed while the pods train; ``status`` from another
    process asks the API server (still Running); ``cancel`` from a fresh one deletes the job by
    its handle: no job, no pod left."""
    import signal
    import subprocess
    import sys

    wl = tmp_path / "k8s.wl"
    wl.write_text(TEMPLATE.replace("STEPS", "100000").replace("VOLUME", json.dumps(str(tmp_path))))
    runs = tmp_path / "runs"
    env = dict(os.environ, PYTHONPATH=str(REPO))

    def cli(*argv):
        return subprocess.run([sys.executable, "-m", "accelctl.cli", *argv, "--runs-dir", str(runs)], cwd=REPO,
                              env=env, capture_output=True, text=True, timeout=180)

    started = cli("run", str(wl), "-t", "t", "--detach")
    run_id = started.stdout.strip()
    assert store.is_run_id(run_id), started.stderr
    run_dir = runs / run_id
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        now = json.loads(cli("status", run_id, "--json").stdout)["result"]["runs"][0]
        if now["step"] >= 2:
            break
        time.sleep(0.5)
    assert now["step"] >= 2 and " Running (RUNNING)" in now["scheduler"], now
    os.kill(now["supervisor_pid"], signal.SIGKILL)
    time.sleep(1)
    pods = cluster.all_pods()
    assert len(cluster.jobs) == 1 and all(p.proc.poll() is None for p in pods)  # the job goes on
    assert " Running (RUNNING)" in json.loads(cli("status", run_id, "--json").stdout)["result"]["runs"][0]["scheduler"]
    done = cli("cancel", run_id)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert cluster.jobs == {} and all(p.proc.poll() is not None for p in pods)
    stored = scheduler.read(run_dir)
    assert (stored.state, stored.app_state) == ("Deleted", "CANCELLED"), stored
