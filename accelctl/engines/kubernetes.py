"""Kubernetes: a Kubeflow Training Operator v1 ``PyTorchJob`` (``kubeflow.org/v1``).

v1 because training operator 1.x serves it on most clusters and its SDK (``kubeflow-training``,
pinned) validates it offline; Trainer v2's ``TrainJob`` needs a cluster-side runtime.  ``wrap``
renders ``pytorchjob.json`` (a ``Master`` and ``nodes - 1`` ``Worker`` replicas, container
``pytorch``) whose command is the backend's per-node launch as an argv list: ``$(NAME)`` is
Kubernetes' own expansion, every other ``$`` is escaped ``$$``.  The run folder lives on a shared
volume (``volume_claim``, mounted at ``volume_path`` in the pods and where accelctl runs): the pods
read the job and append ``rank<N>.jsonl`` there; without one the plan is refused.  The run's
supervisor submits it (``accelctl.engines.kubernetes_scheduler``); the plan keeps the launch and
the job as data (``Plan.request``).
"""

from __future__ import annotations

import functools
import json
import posixpath
import re
import shlex
from collections.abc import Callable
from pathlib import Path

from accelctl.backends.base import Built
from accelctl.backends.findings import CheckResult
from accelctl.contract import envnames, launchers
from accelctl.contract.placeholders import placeholder_in
from accelctl.contract.plan import FREE_PORT, RUN_DIR, GeneratedFile, Launch, Plan
from accelctl.engines.aws_batch import efa_adapters
from accelctl.engines import kubernetes_settings
from accelctl.engines.base import Engine, engine_refusal
from accelctl.families import FAMILIES as DEVICE_FAMILIES
from accelctl.catalog import DEVICES
from accelctl.workload.types import TargetSpec, WorkloadSpec
from accelctl.frozen import replace

MANIFEST = "pytorchjob.json"
#: what the supervisor's submission amounts to (the API call it makes, as kubectl would)
SUBMIT = ("kubectl", "create", "-f", f"{RUN_DIR}/{MANIFEST}")
API_VERSION = "kubeflow.org/v1"
KIND = "PyTorchJob"
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
#: the container and port names the training operator looks for
CONTAINER = "pytorch"
PORT_NAME = "pytorchjob-port"
MASTER_PORT = 23456
#: the code of an engine kubernetes setting that is missing or cannot work
CODE = kubernetes_settings.ROW.code
#: the variable the submitter fills with the run folder (on the shared volume)
RUN_DIR_ENV = "ACCELCTL_RUN_DIR"
RUN_VOLUME = "accelctl-run"
SHM_VOLUME = "dshm"
#: device family (catalog adapter) -> the extended resource its device plugin registers
EFA_RESOURCE = "vpc.amazonaws.com/efa"
#: the launch heads a pod runs -> the container command (the image's python, ``accelctl.contract.launchers``)
HEADS = {head: launchers.command(head, "python") for head in ("torchrun", "deepspeed")}
#: the heads whose per-node command is a torchrun agent (the others: DeepSpeed's runner)
TORCHRUN_HEADS = ("torchrun",)
RESTART_POLICIES = {"never": "Never", "on_failure": "OnFailure", "always": "Always", "exit_code": "ExitCode"}
CLEAN_POD_POLICIES = {"none": "None", "running": "Running", "all": "All"}
#: the operator's variables the per-node command reads, and the stand-ins the plan check uses
OPERATOR_VARS = {"RANK": "0", "MASTER_ADDR": "master-0", "MASTER_PORT": str(MASTER_PORT)}

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
DNS_LABEL = re.compile(_DNS_LABEL)
DNS_SUBDOMAIN = re.compile(rf"(?=.{{1,253}}$){_DNS_LABEL}(\.{_DNS_LABEL})*")
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_KEY = re.compile(rf"((?=[^/]{{1,253}}/){_DNS_LABEL}(\.{_DNS_LABEL})*/)?{_LABEL_NAME}")
LABEL_VALUE = re.compile(rf"({_LABEL_NAME})?")
#: settings that name Kubernetes objects, and the syntax the API server accepts for them
NAMES = {"namespace": DNS_LABEL, "service_account": DNS_SUBDOMAIN, "priority_class": DNS_SUBDOMAIN,
         "volume_claim": DNS_SUBDOMAIN}


_refuse = functools.partial(engine_refusal, CODE, "kubernetes")


def escape(text: str) -> str:
    """``text`` as Kubernetes passes it on literally: ``$`` -> ``$$`` (no ``$(VAR)`` expansion)."""
    return text.replace("$", "$$")


def placed(text: str) -> str:
    """A plan string for the container: escaped, then ``{run_dir}`` -> ``$(ACCELCTL_RUN_DIR)``."""
    return escape(text).replace(RUN_DIR, f"$({RUN_DIR_ENV})")


def job_name(spec: WorkloadSpec, target: TargetSpec) -> str:
    """A DNS-1035 label of at most 40 characters (the submitter appends ``-<8 hex>`` per run;
    pod and service names add ``-master-0``)."""
    name = re.sub(r"[^a-z0-9-]+", "-", f"{spec.name}-{target.name}".lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)[:40].rstrip("-")
    return name if name[:1].isalpha() else f"j-{name}"[:40].rstrip("-")


def node_command(argv: tuple[str, ...] | list[str], nodes: int, devices: int,
                 ref: Callable[[str], str] = lambda name: f"$({name})",
                 word: Callable[[str], str] = lambda text: placed(text)) -> list[str]:
    """The per-node argv of the backend's launch ``argv``, with the operator's variables in
    place of what a rendezvous on one machine had: ``ref(NAME)`` for each (``$(NAME)`` in the
    manifest, a node's stand-in value in ``node_plan``) and ``word`` for the plan's own words
    (escaped for the manifest, as they are for ``node_plan``)."""
    argv = list(argv)
    head = argv[0]
    if head in TORCHRUN_HEADS:
        kept = [a for a in argv[1:] if a != "--standalone" and not a.startswith((
            "--nnodes", "--node_rank", "--node-rank", "--rdzv", "--master_addr", "--master-addr", "--master_port",
            "--master-port", "--nproc_per_node", "--nproc-per-node"))]
        return [*HEADS[head], f"--nnodes={nodes}", f"--nproc-per-node={devices}",
                f"--node-rank={ref('RANK')}", f"--master-addr={ref('MASTER_ADDR')}",
                f"--master-port={ref('MASTER_PORT')}", *(word(a) for a in kept)]
    # deepspeed: --master_addr/--master_port/--no_ssh/--node_rank from the operator
    out, skip = [], False
    for a in argv[1:]:
        if skip:
            skip = False
        elif a in ("--master_addr", "--master_port", "--node_rank"):
            skip = True
        elif a != "--no_ssh" and not a.startswith(("--master_addr=", "--master_port=", "--node_rank=")):
            out.append(word(a))
    return [*HEADS[head], "--master_addr", ref("MASTER_ADDR"), "--no_ssh", "--node_rank", ref("RANK"),
            "--master_port", ref("MASTER_PORT"), *out]


def _settings(spec: WorkloadSpec, target: TargetSpec, s: dict) -> None:
    """Refuse (E549, at the setting) what the API server or the run could not take."""
    if not s.get("image"):
        raise _refuse(spec, target, "image", f"engine kubernetes needs the container image the pods of target "
                      f"{target.name} run", 'set engine kubernetes { image = "REGISTRY/IMAGE:TAG" } (an image '
                      "with python, torch and accelctl's run extras)")
    if re.search(r"\s", s["image"]):
        raise _refuse(spec, target, "image", f"image {s['image']!r} has white space: not an image reference",
                      "write REGISTRY/NAME:TAG or NAME@sha256:DIGEST")
    if not s.get("volume_claim"):
        raise _refuse(spec, target, "volume_claim", "engine kubernetes needs a shared volume for the run folder: "
                      "without one the ranks' events cannot come back to accelctl",
                      'set volume_claim = "PVC" and volume_path = "/PATH" (the PVC mounted at the same path here '
                      "and in the pods; run with --runs-dir under it)")
    for key, pattern in NAMES.items():
        if s.get(key) is not None and not pattern.fullmatch(str(s[key])):
            raise _refuse(spec, target, key, f"engine kubernetes {key} {str(s[key])!r} is not a Kubernetes name",
                          "lower-case letters, digits and '-' (and '.' between labels), starting and ending "
                          "with a letter or digit")
    path = s.get("volume_path")
    if not path or not path.startswith("/") or ":" in path or "\n" in path or posixpath.normpath(path) != path \
            or path in ("/", "/dev/shm") or placeholder_in(path):
        raise _refuse(spec, target, "volume_path" if path else "volume_claim",
                      f"engine kubernetes volume_path {path!r} is not an absolute folder the volume can be "
                      "mounted at" if path else "engine kubernetes volume_claim needs volume_path",
                      'an absolute, normalised path other than / and /dev/shm without ":" or a placeholder '
                      '({run_dir}...), e.g. "/shared"')
    for item in s.get("node_selector") or []:
        key, eq, value = item.partition("=")
        if not eq or not LABEL_KEY.fullmatch(key) or not LABEL_VALUE.fullmatch(value):
            raise _refuse(spec, target, "node_selector", f"node_selector entry {item!r} is not LABEL=VALUE",
                          'e.g. node_selector = ["node.kubernetes.io/instance-type=p5.48xlarge"]')


def _resources(spec: WorkloadSpec, target: TargetSpec, s: dict) -> tuple[dict, int]:
    """(resource limits of one node's pod, EFA adapters asked for)."""
    limits: dict[str, str] = {}
    family = DEVICE_FAMILIES[DEVICES[target.device].adapter]
    if family.k8s_resource:
        limits[family.k8s_resource] = str(target.devices)
    elif not family.host:
        raise _refuse(spec, target, "device", f"Kubernetes has no resource accelctl knows for {family.name} devices "
                      f"({target.device}): a pod could not ask for them", "run this target with another engine")
    adapters = efa_adapters(target.instance) if target.instance else 0
    efa = s.get("efa", adapters > 0 and target.nodes > 1)
    if efa and not adapters:
        raise _refuse(spec, target, "efa", f"efa = on but instance {target.instance or '(none)'} has no EFA adapter "
                      "in the catalog", "set efa = off, or pick an instance with EFA")
    if efa:
        limits[EFA_RESOURCE] = str(adapters)
    if s.get("cpu"):
        limits["cpu"] = str(int(s["cpu"]))
    if s.get("memory"):
        limits["memory"] = f"{max(1, int(s['memory']) // 2**20)}Mi"
    return limits, adapters if efa else 0


def manifest(spec: WorkloadSpec, target: TargetSpec, launch: Launch, s: dict) -> dict:
    """The PyTorchJob as a dict (what ``pytorchjob.json`` holds)."""
    limits, _ = _resources(spec, target, s)
    env = [{"name": RUN_DIR_ENV, "value": RUN_DIR},  # first: the values below refer to it
           {"name": envnames.EVENTS_DIR, "value": f"$({RUN_DIR_ENV})"}]
    env += [{"name": k, "value": placed(v)} for k, v in sorted(launch.env.items()) if k != envnames.EVENTS_DIR]
    mounts = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}, {"name": RUN_VOLUME, "mountPath": s["volume_path"]}]
    shm: dict = {"medium": "Memory"}
    if s.get("shm_size"):
        shm["sizeLimit"] = f"{max(1, int(s['shm_size']) // 2**20)}Mi"
    command = node_command(launch.argv, target.nodes, target.devices)
    container = {"name": CONTAINER, "image": s["image"], "command": command[:3], "args": command[3:], "env": env,
                 "ports": [{"name": PORT_NAME, "containerPort": MASTER_PORT, "protocol": "TCP"}],
                 "resources": {"limits": limits, "requests": dict(limits)}, "volumeMounts": mounts}
    if not limits:
        del container["resources"]
    pod: dict = {"containers": [container],
                 "volumes": [{"name": SHM_VOLUME, "emptyDir": shm},
                             {"name": RUN_VOLUME, "persistentVolumeClaim": {"claimName": s["volume_claim"]}}]}
    if s.get("service_account"):
        pod["serviceAccountName"] = s["service_account"]
    if s.get("priority_class"):
        pod["priorityClassName"] = s["priority_class"]
    if s.get("node_selector"):
        pod["nodeSelector"] = dict(item.split("=", 1) for item in s["node_selector"])
    restart = RESTART_POLICIES[s.get("restart_policy", "never")]

    def replica(n: int) -> dict:
        return {"replicas": n, "restartPolicy": restart, "template": {"spec": pod}}

    replicas = {"Master": replica(1)}
    if target.nodes > 1:
        replicas["Worker"] = replica(target.nodes - 1)
    run_policy: dict = {"cleanPodPolicy": CLEAN_POD_POLICIES[s.get("clean_pod_policy", "running")]}
    if s.get("backoff_limit") is not None:
        run_policy["backoffLimit"] = int(s["backoff_limit"])
    if s.get("active_deadline"):
        run_policy["activeDeadlineSeconds"] = max(1, round(s["active_deadline"]))
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": job_name(spec, target), "namespace": s.get("namespace", "default"),
                         "labels": {"app.kubernetes.io/managed-by": "accelctl"},
                         "annotations": {"accelctl/workload": spec.name, "accelctl/target": target.name}},
            "spec": {"nprocPerNode": str(target.devices), "runPolicy": run_policy, "pytorchReplicaSpecs": replicas}}


def render(job: dict) -> str:
    return json.dumps(job, indent=2, ensure_ascii=False) + "\n"


class KubernetesEngine(Engine):
    row = kubernetes_settings.ROW
    backends = ("torchrun", "xla_neuron", "deepspeed")

    def wrap(self, spec, target, built, job, settings):
        s = dict(settings.settings)
        _settings(spec, target, s)
        placeable = [la for la in built.launches if la.argv and la.argv[0] in HEADS]
        if len(built.launches) != 1 or not placeable:
            names = ", ".join(la.name for la in built.launches)
            raise _refuse(spec, target, "image", f"engine kubernetes places one torchrun or deepspeed launch per "
                          f"node; the backend built {len(built.launches)} ({names})",
                          "a neuron_parallel_compile pass is not placed on Kubernetes yet: turn it off for this "
                          "target" if len(built.launches) > 1 else "")
        (launch,) = placeable
        texts = [*launch.argv, *launch.env.values()]
        if any(FREE_PORT in t or "{optimum_habana}" in t for t in texts):
            raise _refuse(spec, target, "image", "the backend's launch uses a value picked on this machine "
                          "({free_port} or {optimum_habana}), which a pod cannot know", "")
        job_dict = manifest(spec, target, launch, s)
        submit = Launch("submit", SUBMIT, {}, processes=0)
        # what the scheduler submits, and each pod's launch before the manifest's escaping
        request = {"manifest": job_dict, "node": {"argv": list(launch.argv), "env": dict(launch.env),
                                                  "nodes": target.nodes, "devices": target.devices}}
        limits = job_dict["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0].get(
            "resources", {}).get("limits", {})
        notes = [*built.notes,
                 (f"Kubernetes: PyTorchJob ({API_VERSION}) in namespace {job_dict['metadata']['namespace']}: 1 master"
                  + (f" + {target.nodes - 1} worker(s)" if target.nodes > 1 else "")
                  + f", {target.devices} process(es) per pod, resources "
                  + (", ".join(f"{k}={v}" for k, v in limits.items()) or "none")),
                 (f"run folder on PVC {s['volume_claim']} at {s['volume_path']} (mounted at the same path here: "
                  f"run with --runs-dir under {s['volume_path']}); the ranks' events come back through it"),
                 ("submit: the run's supervisor creates the job (named for the run, ACCELCTL_RUN_DIR filled in), "
                  "follows its conditions and the master's log, deletes it on stop; accelctl cancel RUN from "
                  "anywhere")]
        out = GeneratedFile(MANIFEST, render(job_dict), role=f"Kubeflow {KIND} ({API_VERSION})")
        return Built([submit], [*built.files, out], notes, list(built.warnings), request)

    def node_plan(self, plan: Plan) -> Plan:
        """Each pod's launch with the operator's variables at stand-in values (``RANK`` = the
        node, ``MASTER_ADDR`` = ``master-0``), built from the plan's request (the backend's
        launch), never read back from the manifest: what the backend's check reads."""
        node = (plan.request or {})["node"]
        head = node["argv"][0]
        env = {envnames.EVENTS_DIR: RUN_DIR, **{k: v for k, v in node["env"].items() if k != envnames.EVENTS_DIR}}

        def launch(rank: int) -> Launch:
            values = {**OPERATOR_VARS, "RANK": str(rank)}
            argv = node_command(node["argv"], node["nodes"], node["devices"], values.__getitem__, str)
            return Launch(f"node{rank}", (head, *argv[3:]), env, processes=node["devices"])

        return replace(plan, launches=tuple(launch(r) for r in range(node["nodes"])), request=None,
                       files=tuple(f for f in plan.files if f.path != MANIFEST))

    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        """The manifest against the training operator's own SDK models (offline), then a
        server-side dry run where a kubeconfig exists (not run otherwise)."""
        from accelctl.engines import kubernetes_check

        job = json.loads(next(f.content for f in plan.files if f.path == MANIFEST))
        return [kubernetes_check.sdk_check(job), kubernetes_check.server_dry_run(job, GROUP, VERSION, PLURAL)]

    def start_blocker(self, plan: Plan, runs_root: Path) -> str | None:
        """The runs folder must be on the shared volume, and a cluster must answer."""
        from accelctl.engines import kubernetes_check

        mount, _ = run_volume(plan)
        if Path(mount) not in (runs_root, *runs_root.parents):
            return (f"the runs folder {runs_root} is not on the shared volume the pods mount at {mount}: mount the "
                    f"PVC at {mount} here too and run with --runs-dir {mount}/runs")
        return kubernetes_check.cluster_missing()

    def sh_preflight(self, plan: Plan) -> list[str]:
        """What the script checks before it writes anything, as ``start_blocker`` does for
        ``accelctl run``: ``$run_dir`` is a folder on the volume (the manifest's
        ``ACCELCTL_RUN_DIR`` is ``$run_dir``: the pods read the job there), without ``.``/``..``
        (the volume's path must lead to it) or ``$`` (the kubelet's ``$(VAR)``); and ``kubectl``
        is there.  (The script itself refuses what no JSON file can hold as written.)"""
        mount, claim = run_volume(plan)

        def refuse(why: str, *args: str) -> str:
            """printf's format is ours (no value in it); the values are its quoted arguments."""
            return " ".join(["printf", shlex.quote(f"accelctl plan: {why}\\n"), *args, ">&2; exit 1"])

        on = (shlex.quote(mount), shlex.quote(claim))
        return [
            f'case "$run_dir" in {on[0]}/?*) ;; *) '
            + refuse("the run folder %s is not under %s, where the pods mount PVC %s: set RUN_DIR to a folder "
                     "under it (the PVC mounted here at the same path)", '"$run_dir"', *on) + " ;; esac",
            'case "$run_dir" in */.|*/./*|*/..|*/../*) '
            + refuse("the run folder %s has a . or .. in its path: the pods reach it by this path", '"$run_dir"')
            + " ;; esac",
            'case "$run_dir" in *[$]*) '
            + refuse("the run folder %s holds a $, which the kubelet would read as $(VAR) in the pods' "
                     "ACCELCTL_RUN_DIR", '"$run_dir"') + " ;; esac",
            "command -v kubectl >/dev/null || { "
            + refuse("kubectl is not on PATH: the script submits the job with it") + "; }",
        ]


def run_volume(plan: Plan) -> tuple[str, str]:
    """(the path the pods mount the run volume at, its PVC), as the plan's manifest has them."""
    job = json.loads(next(f.content for f in plan.files if f.path == MANIFEST))
    pod = job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    mount = next(m["mountPath"] for m in pod["containers"][0]["volumeMounts"] if m["name"] == RUN_VOLUME)
    claim = next(v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if v["name"] == RUN_VOLUME)
    return mount, claim
