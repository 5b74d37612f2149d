"""``plan -f sh`` of a Kubernetes target: the script writes the run folder on the pods' volume and
submits a job whose pods find it there, as the supervisor's own submission does.

The script runs under bash and dash and submits with the real ``kubectl`` (skipped where it is
not installed) to the loopback stand-in (``k8s_loopback.py``): kubectl posts with
``fieldValidation=Strict``, the stand-in decodes each pod template with the kubernetes
client's own ``V1PodTemplateSpec``, validates the pods as the API server does and mounts only
the PVCs that exist, at their own path.  Its pods are read, not started (``run_containers=False``):
the command and environment each would run, expanded as the kubelet expands them, and the
local file each path of theirs is through the pod's mounts.  One slow test starts them: two
pods train together from the script's run folder and their events land there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from accelctl.api import plan, render_plan_sh, validate_text
from accelctl.contract.events import StepMetrics, read_events

pytest.importorskip("kubernetes")

from k8s_loopback import LoopbackCluster, kubelet_expand  # noqa: E402  (tests/engines is on sys.path)

SHELLS = [s for s in ("bash", "dash") if shutil.which(s)]
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed (the script submits with it)")
TEMPLATE = """
workload tiny_k8s {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 4)
  dataset synthetic(seq_len = 32)
  batch { micro = 4  accumulation = 1 }
  optimizer adamw { lr = 0.001 }
  measure { warmup = 1  steps = 3 }
  engine kubernetes { image = "loopback/accelctl:1"  volume_claim = "runs"  volume_path = VOLUME }
  target t { device = cpu  devices = 1  nodes = 2  threads = 1  precision = fp32  engine = kubernetes }
  target ds { device = cpu  devices = 1  nodes = 2  threads = 1  precision = fp32  parallel = zero(stage = 1)
              engine = kubernetes }
}
"""


def make_plan(volume: Path, target: str = "t"):
    specs, diags = validate_text(TEMPLATE.replace("VOLUME", json.dumps(str(volume))))
    assert not diags, diags
    return plan(specs[0], target)


@pytest.fixture
def volume(tmp_path) -> Path:
    out = tmp_path / "shared"  # the PVC "runs": this folder, mounted at this path in the pods
    out.mkdir()
    return out


@pytest.fixture
def loopback(tmp_path, volume, monkeypatch):
    """A loopback cluster with the PVC ``runs`` (``volume``), and the kubeconfig that names it
    (``$KUBECONFIG``: for the script and for the submitter of this process)."""
    made = []

    def make(run_containers: bool = False) -> LoopbackCluster:
        cluster = LoopbackCluster(tmp_path, claims={"runs": volume}, run_containers=run_containers)
        (tmp_path / "kubeconfig").write_text(cluster.kubeconfig())
        monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
        made.append(cluster)
        return cluster

    yield make
    for cluster in made:
        assert cluster.close() == [], "pods still running after the test"


def run_script(tmp_path: Path, shell: str, text: str, run_dir: Path | str, path: str | None = None,
               timeout: float = 120):
    script = tmp_path / "plan.sh"
    script.write_text(text, encoding="utf-8")
    env = {"PATH": path if path is not None else os.environ["PATH"], "RUN_DIR": str(run_dir),
           "KUBECONFIG": str(tmp_path / "kubeconfig"), "HOME": str(tmp_path)}
    return subprocess.run([shutil.which(shell), str(script)], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=timeout)


def pod_view(pod, run_dir: Path, port: str) -> tuple[list[str], dict[str, str]]:
    """A pod's expanded command and its container's environment, run folder and master port
    written as names (each job has its own), for comparing two submissions."""
    def named(text: str) -> str:
        return text.replace(str(run_dir), "<run_dir>").replace(port, "<port>")

    return [named(a) for a in pod.argv], {k: named(v) for k, v in pod.container_env.items()}


@needs_kubectl
@pytest.mark.parametrize("shell,target", [(s, t) for s, t in (("dash", "t"), ("bash", "ds")) if s in SHELLS])
def test_the_scripts_pods_find_their_job_and_files_as_the_supervisors_do(tmp_path, volume, loopback, shell,
                                                                          target):
    from accelctl.engines.kubernetes_scheduler import KubernetesScheduler

    p = make_plan(volume, target)
    cluster = loopback()
    run_dir = volume / "runs" / "by-script"
    r = run_script(tmp_path, shell, render_plan_sh(p), run_dir)
    assert r.returncode == 0, r.stderr
    assert "pytorchjob.kubeflow.org/tiny-k8s-" in r.stdout and "created" in r.stdout
    (job,) = cluster.jobs.values()
    assert cluster.creates == [(job.name, "Strict")]  # kubectl's: the pod templates judged strictly
    assert job.events == [] and len(job.pods) == 2, job.events  # the API server took both pods
    assert not r.stderr.strip(), r.stderr  # no Warning: no field the client's models drop
    for pod in job.pods.values():
        assert pod.env["ACCELCTL_RUN_DIR"] == str(run_dir)
        job_file = next(a for a in pod.argv if a.endswith("/job.json"))
        local = pod.local(job_file)
        assert local is not None, f"{pod.name} reads {job_file}, on no volume it mounts"
        assert local.read_bytes() == (run_dir / "job.json").read_bytes()
        for f in p.files:  # every generated file, on the volume at the path the pod's launch names
            assert pod.local(f"{pod.env['ACCELCTL_RUN_DIR']}/{f.path}").is_file(), f.path
        assert pod.local(pod.env["ACCELCTL_EVENTS_DIR"]) == run_dir  # where the ranks' events go
    # the supervisor's own submission of the same plan: the same pods, in its run folder
    theirs = volume / "runs" / "by-supervisor"
    theirs.mkdir(parents=True)
    KubernetesScheduler().submit(p.request, theirs, {})
    other = next(j for j in cluster.jobs.values() if j is not job)
    for mine, sup in zip(job.pods.values(), other.pods.values()):
        assert pod_view(mine, run_dir, mine.env["MASTER_PORT"]) == \
            pod_view(sup, theirs, sup.env["MASTER_PORT"])


@pytest.mark.parametrize("shell", SHELLS)
def test_a_run_folder_the_pods_cannot_reach_is_refused_before_anything_is_written(tmp_path, volume, shell):
    text = render_plan_sh(make_plan(volume))
    elsewhere = tmp_path / "elsewhere"
    cases = [(elsewhere / "r", f"is not under {volume}, where the pods mount PVC runs"),
             ("run", "is not under"), (f"{volume}x/r", "is not under"),
             (volume / "a" / ".." / "b", "has a . or .."), (f"{volume}/./b", "has a . or .."),
             (volume / 'a"b', "a double quote"), (volume / "a\\b", "a backslash"),
             (volume, "is not under"), (f"{volume}//", "is not under"),
             (volume / "$(HOME)", "$"), (volume / "a\nb", "a control character"),
             (volume / "a\x1bb", "a control character")]
    for run_dir, says in cases:
        r = run_script(tmp_path, shell, text, run_dir)
        assert r.returncode == 1 and says in r.stderr, (run_dir, r.stderr)
        assert r.stderr.startswith("accelctl plan: the run folder ")
        assert list(volume.iterdir()) == [] and not elsewhere.exists(), run_dir
    # kubectl is asked for last, still before anything is written
    r = run_script(tmp_path, shell, text, volume / "r", path=str(tmp_path / "no-bin"))
    assert r.returncode == 1 and "kubectl is not on PATH" in r.stderr and list(volume.iterdir()) == []


@pytest.mark.parametrize("shell", SHELLS)
def test_a_run_folder_given_with_a_trailing_slash_is_that_folder(tmp_path, volume, shell):
    """``RUN_DIR=/vol/r2/``: the job's run id is ``r2`` and its folder ``/vol/r2``, as without it."""
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "kubectl").write_text("#!/bin/sh\nexit 0\n")
    (stub / "kubectl").chmod(0o755)
    r = run_script(tmp_path, shell, render_plan_sh(make_plan(volume)), f"{volume}/r2//",
                   path=f"{stub}:/usr/bin:/bin")
    assert r.returncode == 0, r.stderr
    job = json.loads((volume / "r2" / "job.json").read_text())
    assert job["run_id"] == "r2" and job["events_dir"] == str(volume / "r2")


def test_the_loopback_refuses_what_the_api_server_does(tmp_path, volume, loopback):
    """The stand-in judges by the client's models and the Pod rules, not by accelctl: a field
    the model lacks is refused under Strict and pruned with a warning otherwise, a mount of no
    volume fails the pod's creation, a claim that does not exist leaves the pod Pending."""
    from kubernetes import client

    p = make_plan(volume)
    cluster = loopback()
    from kubernetes import config

    config.load_kube_config(config_file=str(tmp_path / "kubeconfig"))
    api = client.CustomObjectsApi()
    job = json.loads(next(f.content for f in p.files if f.path == "pytorchjob.json"))

    def variant(name: str, change) -> dict:
        out = json.loads(json.dumps(job))
        out["metadata"]["name"] = name
        for replica in out["spec"]["pytorchReplicaSpecs"].values():
            change(replica["template"]["spec"])
        return out

    typo = variant("typo", lambda s: s["containers"][0].update(volumeMount=[]))
    with pytest.raises(client.ApiException) as exc:
        api.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", typo,
                                            field_validation="Strict")
    assert exc.value.status == 400 and 'unknown field \\"spec.pytorchReplicaSpecs.Master.template.spec.' \
                                       'containers[0].volumeMount\\"' in exc.value.body
    api.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", typo)  # Warn: pruned
    kept = cluster.jobs[("default", "typo")].body["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    assert "volumeMount" not in kept["containers"][0] and kept["containers"][0]["volumeMounts"]
    wrong = variant("wrong-type", lambda s: s["containers"][0]["ports"][0].update(containerPort="23456"))
    with pytest.raises(client.ApiException) as exc:
        api.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", wrong)
    assert exc.value.status == 422
    lost = variant("lost-volume", lambda s: s.update(volumes=[v for v in s["volumes"] if v["name"] != "dshm"]))
    api.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", lost)
    events = cluster.jobs[("default", "lost-volume")].events
    assert cluster.jobs[("default", "lost-volume")].pods == {} and len(events) == 2
    assert 'spec.containers[0].volumeMounts[0].name: Not found: "dshm"' in events[0]
    other = variant("no-claim", lambda s: s["volumes"][1]["persistentVolumeClaim"].update(claimName="gone"))
    api.create_namespaced_custom_object("kubeflow.org", "v1", "default", "pytorchjobs", other)
    pods = cluster.jobs[("default", "no-claim")].pods.values()
    assert [pod.pending for pod in pods] == ['0/1 nodes are available: persistentvolumeclaim "gone" not found'] * 2
    assert cluster.jobs[("default", "no-claim")].conditions() == [{"type": "Created", "status": "True"}]


def test_the_submitters_run_folder_reaches_the_pods_as_written(volume):
    """A ``$`` in the run folder's path is the kubelet's ``$(VAR)`` unless written ``$$``."""
    from accelctl.engines.kubernetes_scheduler import prepare

    p = make_plan(volume)
    run_dir = volume / "$(HOME)" / "r$$"
    job = prepare(p.request["manifest"], run_dir)
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        env = replica["template"]["spec"]["containers"][0]["env"]
        defined: dict[str, str] = {"HOME": "/root"}
        for e in env:
            defined[e["name"]] = kubelet_expand(e["value"], defined)
        assert defined["ACCELCTL_RUN_DIR"] == str(run_dir) == defined["ACCELCTL_EVENTS_DIR"]


@pytest.mark.slow
@needs_kubectl
def test_the_scripts_job_trains_on_two_pods_and_its_events_land_in_the_run_folder(tmp_path, volume, loopback):
    p = make_plan(volume)
    cluster = loopback(run_containers=True)
    run_dir = volume / "runs" / "r1"
    r = run_script(tmp_path, "sh", render_plan_sh(p), run_dir)
    assert r.returncode == 0, r.stderr
    (job,) = cluster.jobs.values()
    deadline = time.monotonic() + 300
    while any(pod.poll() is None for pod in job.pods.values()) and time.monotonic() < deadline:
        time.sleep(0.5)
    logs = {pod.name: pod.log.read_text(errors="replace")[-3000:] for pod in job.pods.values()}
    assert [pod.poll() for pod in job.pods.values()] == [0, 0], logs
    assert job.conditions()[-1] == {"type": "Succeeded", "status": "True"}
    steps = {rank: [e for e in read_events(run_dir / f"rank{rank}.jsonl") if isinstance(e, StepMetrics)]
             for rank in (0, 1)}
    assert all(len(s) >= 3 for s in steps.values()), steps
