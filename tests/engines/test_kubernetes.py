"""The kubernetes engine: the PyTorchJob it renders for real targets, validated by the
training operator's own SDK (which rejects a broken one), resources per device family,
workload strings that stay data, positioned E549 refusals, and what happens without a
cluster: the server dry run is NOT RUN, ``accelctl run`` and the submitter stop in one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import check_plan, load, plan, validate_text
from accelctl.engines import kubernetes as k8s
from accelctl.engines.kubernetes_check import DRY_RUN_TOOL, sdk_problems
from accelctl.errors import PlanError

REPO = Path(__file__).resolve().parents[2]

TEMPLATE = """
workload w {
  task pretrain
  model bert(layers = 2, hidden = 64, heads = 4)
  dataset synthetic(seq_len = 32)
  engine kubernetes { BLOCK }
  target gpu { device = h100  instance = p5.48xlarge  devices = 8  nodes = 2  engine = kubernetes }
  target gpu1 { device = h100  devices = 4  engine = kubernetes }
  target trn { device = trn1  instance = trn1.32xlarge  devices = 32  nodes = 4  engine = kubernetes }
  target dl1 { device = gaudi  instance = dl1.24xlarge  devices = 8  nodes = 2  parallel = zero(stage = 1)
               engine = kubernetes }
  target cpu { device = cpu  devices = 2  nodes = 3  engine = kubernetes }
}
"""
BLOCK = 'image = "reg.example/accelctl:1"  volume_claim = "runs"  volume_path = "/shared"'


def make_plan(target: str, block: str = BLOCK):
    specs, diags = validate_text(TEMPLATE.replace("BLOCK", block))
    assert not diags, diags
    return specs[0], plan(specs[0], target)


def job_of(p) -> dict:
    return json.loads(next(f.content for f in p.files if f.path == k8s.MANIFEST))


def container(job: dict, replica: str = "Master") -> dict:
    return job["spec"]["pytorchReplicaSpecs"][replica]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("target,backend,nodes,resources", [
    ("gpu", "torchrun", 2, {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}),
    ("gpu1", "torchrun", 1, {"nvidia.com/gpu": "4"}),
    ("trn", "xla_neuron", 4, {"aws.amazon.com/neuroncore": "32", "vpc.amazonaws.com/efa": "8"}),
    ("dl1", "deepspeed", 2, {"habana.ai/gaudi": "8", "vpc.amazonaws.com/efa": "4"}),
    ("cpu", "torchrun", 3, None),
])
def test_targets_render_a_pytorchjob_the_sdk_accepts(target, backend, nodes, resources):
    pytest.importorskip("kubeflow.training")
    spec, p = make_plan(target)
    assert p.backend == backend and p.engine == "kubernetes"
    job = job_of(p)
    assert (job["apiVersion"], job["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert replicas["Master"]["replicas"] == 1
    assert replicas.get("Worker", {"replicas": 0})["replicas"] == nodes - 1
    assert job["spec"]["nprocPerNode"] == str(spec.target(target).devices)
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "Running"}
    c = container(job)
    assert c["name"] == "pytorch" and c["ports"][0]["name"] == "pytorchjob-port"
    assert c.get("resources") == (None if resources is None else {"limits": resources, "requests": resources})
    volumes = replicas["Master"]["template"]["spec"]["volumes"]
    assert {"name": "dshm", "emptyDir": {"medium": "Memory"}} in volumes
    assert {"name": "accelctl-run", "persistentVolumeClaim": {"claimName": "runs"}} in volumes
    assert {"name": "accelctl-run", "mountPath": "/shared"} in c["volumeMounts"]
    assert c["env"][0] == {"name": "ACCELCTL_RUN_DIR", "value": "{run_dir}"}  # the run folder, filled per run
    assert c["args"][-1] == "$(ACCELCTL_RUN_DIR)/job.json"
    if backend == "deepspeed":
        assert c["command"] == ["python", "-m", "deepspeed.launcher.runner"]
        assert c["args"][:7] == ["--master_addr", "$(MASTER_ADDR)", "--no_ssh", "--node_rank", "$(RANK)",
                                 "--master_port", "$(MASTER_PORT)"]
    else:
        assert c["command"] == ["python", "-m", "torch.distributed.run"]
        assert c["args"][:5] == [f"--nnodes={nodes}", f"--nproc-per-node={spec.target(target).devices}",
                                 "--node-rank=$(RANK)", "--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)"]
        assert "--standalone" not in c["args"]
    assert [ln.argv for ln in p.launches] == [k8s.SUBMIT] and p.request["manifest"] == job_of(p)
    results = {r.tool: r for r in check_plan(p, spec)}
    sdk = next(r for t, r in results.items() if t.startswith("kubeflow-training 1.9.4 SDK"))
    assert sdk.ok is True, sdk.render()
    # the backend's own check reads every pod's launch
    assert all(r.ok is not False for r in results.values()), [r.render() for r in results.values()]


def test_the_sdk_rejects_a_broken_manifest():
    pytest.importorskip("kubeflow.training")
    _, p = make_plan("gpu")
    job = job_of(p)
    assert sdk_problems(job) == []
    no_policy = json.loads(json.dumps(job))
    del no_policy["spec"]["runPolicy"]
    assert sdk_problems(no_policy) == ["Invalid value for `run_policy`, must not be `None`"]
    misplaced = json.loads(json.dumps(job))
    misplaced["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicyy"] = "Never"
    assert sdk_problems(misplaced) == ["spec.pytorchReplicaSpecs.Master.restartPolicyy: not a field of the model "
                                       "(dropped)"]
    no_name = json.loads(json.dumps(job))
    del container(no_name)["name"]
    assert any("name" in m for m in sdk_problems(no_name))


def test_settings_reach_the_manifest():
    block = (BLOCK + '  namespace = "ml-team"  service_account = "trainer"  priority_class = "high"  '
             'node_selector = ["node.kubernetes.io/instance-type=p5.48xlarge", "team=ml"]  restart_policy = on_failure'
             '  backoff_limit = 3  clean_pod_policy = all  active_deadline = 2 h  shm_size = 64 GB  cpu = 96  '
             'memory = 1000 GB  efa = off')
    _, p = make_plan("gpu", block)
    job = job_of(p)
    pod = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    assert job["metadata"]["namespace"] == "ml-team"
    assert pod["serviceAccountName"] == "trainer" and pod["priorityClassName"] == "high"
    assert pod["nodeSelector"] == {"node.kubernetes.io/instance-type": "p5.48xlarge", "team": "ml"}
    assert job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"
    assert job["spec"]["runPolicy"] == {"cleanPodPolicy": "All", "backoffLimit": 3, "activeDeadlineSeconds": 7200}
    assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "61035Mi"}} in pod["volumes"]
    assert pod["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8", "cpu": "96", "memory": "953674Mi"}


HOSTILE = "x\n\"'$(touch /tmp/x)`id`;--privileged"


def test_hostile_strings_stay_data():
    """Free-form settings with a newline, quotes, ``$(...)`` and a leading ``--`` are one JSON
    string each, verbatim; the container command is an argv list, no shell; Kubernetes'
    own ``$(VAR)`` expansion gives every backend string back exactly as written."""
    block = 'image = "nvcr.io/nvidia/pytorch:24.05-py3"  volume_claim = "runs"  volume_path = "/sh$(touch /tmp/x)--\'q"'
    spec, p = make_plan("gpu", block)
    job = job_of(p)
    c = container(job)
    assert c["image"] == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert {"name": "accelctl-run", "mountPath": "/sh$(touch /tmp/x)--'q"} in c["volumeMounts"]
    assert job["metadata"]["annotations"] == {"accelctl/workload": "w", "accelctl/target": "gpu"}
    assert c["command"] == ["python", "-m", "torch.distributed.run"]
    assert not any(a in ("sh", "bash", "-c") for a in c["command"] + c["args"])
    (launch,) = p.launches
    assert launch.argv == ("kubectl", "create", "-f", "{run_dir}/pytorchjob.json")


def test_kubernetes_expansion_gives_plan_strings_back_verbatim():
    """Placed strings expanded as the kubelet does (the loopback stand-in's own expansion)."""
    from k8s_loopback import kubelet_expand

    for text in (HOSTILE, "$(RANK)", "$$(RANK)", "a$", "$(", "{run_dir}/x $(HOME)"):
        placed = k8s.placed(text)
        assert kubelet_expand(placed, {"RANK": "7", "HOME": "/root", "ACCELCTL_RUN_DIR": "/shared/r"}) == \
            text.replace("{run_dir}", "/shared/r")
    # the operator's variables the per-node command does use are expanded
    assert kubelet_expand("--node-rank=$(RANK)", {"RANK": "3"}) == "--node-rank=3"


@pytest.mark.parametrize("target", ["gpu", "dl1"])
def test_the_manifest_rendered_from_the_request_expands_to_each_pods_launch(target):
    """The manifest (made from ``Plan.request``) read back as the kubelet would run it, at the
    node plan's stand-ins, is the node plan's launch, which is built from the request alone."""
    from k8s_loopback import kubelet_expand

    from accelctl.plan.registry import ENGINES

    _, p = make_plan(target)
    c = container(job_of(p))
    nodes = ENGINES["kubernetes"].node_plan(p)
    for rank, launch in enumerate(nodes.launches):
        values = {**k8s.OPERATOR_VARS, "RANK": str(rank), "ACCELCTL_RUN_DIR": "{run_dir}"}
        assert [kubelet_expand(a, values) for a in c["args"]] == list(launch.argv[1:])
        assert tuple(c["command"]) == k8s.HEADS[launch.argv[0]]
    env = {e["name"]: kubelet_expand(e["value"], {"ACCELCTL_RUN_DIR": "{run_dir}"}) for e in c["env"]}
    assert env.pop("ACCELCTL_RUN_DIR") == "{run_dir}" and env == nodes.launches[0].env


def test_the_backends_env_is_escaped_for_kubernetes():
    _, p = make_plan("dl1")
    env = {e["name"]: e["value"] for e in container(job_of(p))["env"]}
    assert env["DS_ENV_FILE"] == "$(ACCELCTL_RUN_DIR)/deepspeed_env"
    assert env["ACCELCTL_EVENTS_DIR"] == "$(ACCELCTL_RUN_DIR)"
    assert list(env)[0] == "ACCELCTL_RUN_DIR"  # defined before the values that refer to it


@pytest.mark.parametrize("block,key", [
    ('volume_claim = "runs"  volume_path = "/shared"', "engine kubernetes {"),  # no image: at the target's engine
    ('image = "i"', "engine kubernetes {"),                                      # no shared volume
    (BLOCK + '  namespace = "ML\\nx"', "namespace"),
    (BLOCK + '  service_account = "$(touch /tmp/x)"', "service_account"),
    (BLOCK + '  priority_class = "--high"', "priority_class"),
    (BLOCK.replace('"runs"', '"runs; rm -rf /"'), "volume_claim"),
    (BLOCK.replace('"/shared"', '"shared"'), "volume_path"),
    (BLOCK.replace('"/shared"', '"/a:b"'), "volume_path"),
    (BLOCK.replace('"/shared"', '"/x\u0085y"'), "volume_path"),  # NEL: a C1 control, a line break to Python
    (BLOCK.replace('"/shared"', '"/x\u009by"'), "volume_path"),  # CSI
    (BLOCK.replace('"/shared"', '"/x\u2028y"'), "volume_path"),  # the line separator
    (BLOCK + '  node_selector = ["team"]', "node_selector"),
    (BLOCK + '  node_selector = ["team=$(touch /tmp/x)"]', "node_selector"),
    (BLOCK.replace('"reg.example/accelctl:1"', '"reg/a b"'), "image"),
])
def test_refusals_are_positioned(block, key):
    """Names refused where they are written (E216/E218 from the schema's typed fields), the
    rest when the engine plans (E549); either way at the setting's line."""
    text = TEMPLATE.replace("BLOCK", block)
    specs, diags = validate_text(text)
    errors = [x for x in diags if x.severity == "error"]
    if errors:
        d = errors[0]
        assert d.code in ("E216", "E218") and len(diags) == 1, diags
    else:
        with pytest.raises(PlanError) as e:
            plan(specs[0], "gpu")
        d = e.value.diagnostics[0]
        assert d.code == "E549"
        # validate reports plan's refusal at the same line, as a warning (issue 23)
        assert (d.code, d.message, d.span) in [(x.code, x.message, x.span) for x in diags], diags
    assert d.span is not None
    line = text.splitlines()[d.span.line - 1]
    assert key in line if key != "engine kubernetes {" else ("engine = kubernetes" in line or key in line), (d, line)


def test_efa_on_an_instance_without_it_is_refused_at_the_setting():
    text = TEMPLATE.replace("BLOCK", BLOCK + "\n  efa = on")
    specs, _ = validate_text(text)
    with pytest.raises(PlanError) as e:
        plan(specs[0], "gpu1")
    d = e.value.diagnostics[0]
    assert d.code == "E549" and "efa = on" in text.splitlines()[d.span.line - 1]


def test_a_neuron_precompile_pass_is_refused():
    text = TEMPLATE.replace("BLOCK", BLOCK).replace("nodes = 4  engine",
                                                    "nodes = 4  neuron_parallel_compile = on  engine")
    specs, diags = validate_text(text)
    assert {(d.code, d.severity) for d in diags} <= {("E549", "warning")}, diags  # plan's refusal, warned (issue 23)
    with pytest.raises(PlanError, match="built 2 .precompile, torchrun.") as e:
        plan(specs[0], "trn")
    assert e.value.diagnostics[0].code == "E549" and "neuron_parallel_compile" in e.value.diagnostics[0].hint


def test_without_a_kubeconfig_the_dry_run_is_not_run(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    spec, p = make_plan("gpu")
    dry = next(r for r in check_plan(p, spec) if r.tool == DRY_RUN_TOOL)
    assert dry.ok is None and "no kubeconfig" in dry.messages[0]
    assert "NOT RUN" in dry.render()


def test_an_unreachable_cluster_is_not_run_either(tmp_path, monkeypatch):
    pytest.importorskip("kubernetes")
    cfg = tmp_path / "config"
    cfg.write_text(KUBECONFIG.format(server="https://127.0.0.1:1"))
    monkeypatch.setenv("KUBECONFIG", str(cfg))
    spec, p = make_plan("gpu")
    dry = next(r for r in check_plan(p, spec) if r.tool == DRY_RUN_TOOL)
    assert dry.ok is None and "does not answer" in dry.messages[0], dry.render()


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: t}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
"""


def _env(tmp_path: Path, kubeconfig: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    env["PYTHONPATH"] = str(REPO)
    env["KUBECONFIG"] = str(tmp_path / "absent")
    if kubeconfig:
        (tmp_path / "config").write_text(kubeconfig)
        env["KUBECONFIG"] = str(tmp_path / "config")
    return env


def _workload(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    wl = tmp_path / "k.wl"
    wl.write_text(TEMPLATE.replace("BLOCK", BLOCK.replace('"/shared"', json.dumps(str(shared)))))
    return wl


def test_accelctl_run_without_a_cluster_fails_before_launch_in_one_line(tmp_path):
    wl = _workload(tmp_path)
    runs = tmp_path / "shared" / "runs"
    r = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-t", "cpu", "--headless",
                        "--runs-dir", str(runs)], cwd=tmp_path, env=_env(tmp_path, None), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.strip().splitlines() == [
        f"accelctl: error: target cpu (engine kubernetes): no Kubernetes cluster configured: no kubeconfig at "
        f"{tmp_path / 'absent'} and not inside a cluster"]
    assert not runs.exists()  # nothing launched, no run folder
    # a runs folder off the shared volume is refused first, saying where the volume is
    r = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(wl), "-t", "cpu", "--headless",
                        "--runs-dir", str(tmp_path / "elsewhere")], cwd=tmp_path, env=_env(tmp_path, None),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "is not on the shared volume" in r.stderr and "Traceback" not in r.stderr


def test_the_scheduler_fails_in_one_line_without_a_cluster(tmp_path, monkeypatch):
    pytest.importorskip("kubernetes")
    from accelctl.engines.kubernetes_scheduler import KubernetesScheduler

    _, p = make_plan("gpu")
    shared = tmp_path / "shared" / "runs" / "r1"
    shared.mkdir(parents=True)
    job = job_of(p)
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["spec"]["containers"][0]["volumeMounts"][1]["mountPath"] = str(tmp_path / "shared")
    request = dict(p.request, manifest=job)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for kubeconfig, words in ((None, "no Kubernetes cluster"), (KUBECONFIG.format(server="https://127.0.0.1:1"),
                                                               "creating pytorchjob w-gpu-")):
        monkeypatch.setenv("KUBECONFIG", _env(tmp_path, kubeconfig)["KUBECONFIG"])
        with pytest.raises(RuntimeError) as exc:
            KubernetesScheduler().submit(request, shared, {})
        assert len(str(exc.value).splitlines()) == 1 and words in str(exc.value), exc.value
    # a run folder off the volume: refused before any cluster is asked
    with pytest.raises(ValueError, match="is not on the shared volume"):
        KubernetesScheduler().submit(request, tmp_path / "other", {})


def test_prepare_names_the_run_and_fills_the_run_folder(tmp_path):
    from accelctl.engines.kubernetes_scheduler import prepare, state_of

    _, p = make_plan("gpu", BLOCK.replace('"/shared"', json.dumps(str(tmp_path))))
    job = prepare(job_of(p), tmp_path / "runs" / "r1")
    assert job["metadata"]["name"].startswith("w-gpu-") and len(job["metadata"]["name"]) == len("w-gpu-") + 8
    for replica in job["spec"]["pytorchReplicaSpecs"].values():
        assert replica["template"]["spec"]["containers"][0]["env"][0]["value"] == str(tmp_path / "runs" / "r1")
    assert state_of({"status": {"conditions": [{"type": "Created", "status": "True"},
                                               {"type": "Running", "status": "False"},
                                               {"type": "Failed", "status": "True"}]}}) == "Failed"
    assert state_of({}) == ""


def test_seed_001_still_plans():
    spec = next(s for s in load(REPO / "workloads" / "bert_1_5b_zero1.wl") if s.name == "bert_1_5b_zero1_8n")
    assert plan(spec, "dl1_8n").engine == "aws_batch"
