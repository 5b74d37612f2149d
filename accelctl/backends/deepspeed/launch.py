"""The ``deepspeed`` launcher around a generated DeepSpeed config: command line(s), hostfile,
environment file (see ``accelctl.backends.deepspeed.backend`` for the decisions).

DeepSpeed's runner starts ``python -u -m accelctl.worker JOB`` per rank (``--module
--no_local_rank``); multi-node launches go through pdsh (or ``launcher = ...``), which exports
only a few variable prefixes to remote nodes, so the plan's environment travels in a
generated ``deepspeed_env`` file that ``DS_ENV_FILE`` points at.
"""

from __future__ import annotations

from typing import Any

from accelctl.backends.base import WORKER, Built, option, process_env
from accelctl.contract import envnames
from accelctl.contract.job import WorkerJob
from accelctl.contract.placeholders import placeholder_in
from accelctl.contract.plan import FREE_PORT, RUN_DIR, GeneratedFile, Launch
from accelctl.errors import Diagnostic, PlanError
from accelctl.families import FAMILIES as DEVICE_FAMILIES
from accelctl.catalog import DEVICES
from accelctl.language.values import is_hostname
from accelctl.workload.types import TargetSpec, WorkloadSpec

#: device family -> DS_ACCELERATOR (the families that have one)
ACCELERATOR = {f.name: f.deepspeed_accelerator for f in DEVICE_FAMILIES.values() if f.deepspeed_accelerator}
HOSTFILE = "hostfile"
ENV_FILE = "deepspeed_env"
#: "0" keeps DeepSpeed's shared-memory all-reduce off in the worker (accelctl.worker.ds_engine)
SHM_ENV = envnames.DS_SHM_COMM
#: DeepSpeed's launcher default, kept where the master is another machine (a multi-node
#: hostfile); a master on this machine gets ``{free_port}`` (the runner picks a free port per
#: run, so two runs at once do not collide); ``engine deepspeed { master_port = .. }`` wins
DEFAULT_MASTER_PORT = 29500
LOCAL_HOSTS = ("localhost", "127.0.0.1")


def adapter_of(target: TargetSpec) -> str:
    return DEVICES[target.device].adapter


def accelerator_of(target: TargetSpec) -> str:
    """DeepSpeed's accelerator for the target's device (``DS_ACCELERATOR``: cpu, cuda, hpu; "" =
    none), from its family's row: what DeepSpeed's own behaviour depends on, whatever the family
    is called (one on torch's CUDA API on other hardware runs the cuda one)."""
    return ACCELERATOR.get(adapter_of(target), "")


def _engine_settings(spec: WorkloadSpec) -> dict[str, Any]:
    eng = spec.engines.get("deepspeed")
    return dict(eng.settings) if eng is not None else {}


def _diag(spec: WorkloadSpec, paths: tuple[str, ...], code: str, message: str, hint: str = "") -> Diagnostic:
    span = next((spec.origins[p] for p in paths if p in spec.origins), None)
    return Diagnostic(code, message, span, spec.path, hint)


def _hosts(spec: WorkloadSpec, target: TargetSpec, settings: dict[str, Any]) -> tuple[list[str] | None, bool]:
    """(hosts for a generated hostfile or None when none is needed, whether they are placeholders)."""
    hosts = settings.get("hosts")
    for key, names in (("hosts", hosts or ()), ("master_addr", [settings.get("master_addr") or "localhost"])):
        bad = next((h for h in names if not is_hostname(h)), None)
        if bad is not None:  # the check pass refuses these (E215); a hostfile line is never written from one
            raise PlanError(diagnostics=[_diag(spec, (f"engines.deepspeed.{key}", "engines.deepspeed.hosts"), "E215",
                                               f"engine deepspeed {key}: {bad!r} is not a host name or IP address",
                                               "a hostfile line and --master_addr take one host name each")])
    held = placeholder_in(settings.get("hostfile") or "")
    if held:  # --hostfile is a word of the launch, a template: the runner would fill it
        raise PlanError(diagnostics=[_diag(spec, ("engines.deepspeed.hostfile",), "E545",
                                           f"engine deepspeed hostfile holds {held}, the plan's placeholder",
                                           "name the hostfile by its path (hosts = [...] generates one in the "
                                           "run folder)")])
    if hosts and settings.get("hostfile"):
        raise PlanError(diagnostics=[_diag(spec, ("engines.deepspeed.hostfile", "engines.deepspeed.hosts"), "E545",
                                           "engine deepspeed sets both hosts and hostfile",
                                           "keep one: hosts = [...] generates the hostfile")])
    if hosts:
        if len(hosts) < target.nodes:
            raise PlanError(diagnostics=[_diag(
                spec, ("engines.deepspeed.hosts",), "E545",
                f"target {target.name} needs {target.nodes} nodes but engine deepspeed lists {len(hosts)} host(s)",
                f"list {target.nodes} hosts (DeepSpeed takes the first --num_nodes of them)")])
        if len(set(hosts)) != len(hosts):
            raise PlanError(diagnostics=[_diag(spec, ("engines.deepspeed.hosts",), "E545",
                                               "engine deepspeed lists a host twice",
                                               "DeepSpeed refuses a hostfile with duplicate hosts")])
        return list(hosts[: target.nodes]), False
    if settings.get("hostfile"):
        return None, False
    if target.nodes > 1:
        return [f"node{i}" for i in range(1, target.nodes + 1)], True
    return None, False


def _launch_env(target: TargetSpec, job: WorkerJob, extra: dict[str, str]) -> dict[str, str]:
    accelerator = accelerator_of(target)
    env = dict(process_env(job), DS_ACCELERATOR=accelerator, **extra)
    if accelerator == "cpu":
        env[SHM_ENV] = "0"
    if DEVICES[target.device].lazy_graphs:
        # Gaudi: SynapseAI's bridge reads its mode at import: the target's lazy_mode (the worker marks steps by it)
        env["PT_HPU_LAZY_MODE"] = "1" if job.device.lazy_mode else "0"
    return env


def build_launch(spec: WorkloadSpec, target: TargetSpec, job: WorkerJob, config: GeneratedFile,
                 config_env: str) -> Built:
    """The launcher command(s), hostfile and env file around one generated DeepSpeed config."""
    settings = _engine_settings(spec)
    hosts, placeholders = _hosts(spec, target, settings)
    env = _launch_env(target, job, {config_env: f"{RUN_DIR}/{config.path}"})
    files, notes, warnings = [config], [], []
    head: list[str] = ["deepspeed"]
    hostfile = settings.get("hostfile")
    if hosts is not None:
        hostfile = f"{RUN_DIR}/{HOSTFILE}"
        files.append(GeneratedFile(HOSTFILE, "".join(f"{h} slots={target.devices}\n" for h in hosts),
                                   role="DeepSpeed hostfile: one line per node, slots = processes per node"))
        if placeholders:
            warnings.append(f"the hostfile lists placeholder hosts node1..node{target.nodes}: set "
                            f"engine deepspeed {{ hosts = [...] }} or edit {RUN_DIR}/{HOSTFILE} before running")
    if hostfile:
        head += [*option("--hostfile", hostfile), "--num_nodes", str(target.nodes)]
    local_only = hosts is not None and len(hosts) == 1 and hosts[0] in LOCAL_HOSTS
    here = local_only or (hostfile is None and target.nodes == 1)  # the master runs on this machine
    port = str(settings["master_port"]) if "master_port" in settings else FREE_PORT if here else str(DEFAULT_MASTER_PORT)
    head += ["--num_gpus", str(target.devices), "--master_port", port]
    master = settings.get("master_addr") or ("127.0.0.1" if local_only else None)
    if master:
        head += option("--master_addr", master)
    if local_only:
        head.append("--no_ssh_check")  # one local host: the launcher's local path, no ssh needed
    if settings.get("launcher"):
        head += ["--launcher", settings["launcher"]]
    tail = ["--module", "--no_local_rank", *WORKER[1:]]
    multi = hostfile is not None and target.nodes > 1
    if multi:
        # remote nodes get only a few exported prefixes: ship the plan's environment in a file
        files.append(GeneratedFile(ENV_FILE, "".join(f"{k}={v}\n" for k, v in sorted(env.items())),
                                   role="environment DeepSpeed exports to every node (DS_ENV_FILE)"))
        env["DS_ENV_FILE"] = f"{RUN_DIR}/{ENV_FILE}"
    if multi and settings.get("ssh") is False:
        if not master:
            master = hosts[0] if hosts else None
            if master is None:
                raise PlanError(diagnostics=[_diag(spec, ("engines.deepspeed.ssh", "engines.deepspeed"), "E545",
                                                   "ssh = off needs the master node's address",
                                                   "set engine deepspeed { master_addr = \"...\" } or hosts")])
            head += option("--master_addr", master)
        launches = [Launch(f"node{i}", tuple(head + ["--no_ssh", "--node_rank", str(i)] + tail), env,
                           processes=target.devices) for i in range(target.nodes)]
        notes.append(f"ssh = off: start launch nodeN on node N ({target.nodes} launches)")
    else:
        launches = [Launch("deepspeed", tuple(head + tail), env, processes=target.world_size)]
    accelerator = accelerator_of(target)
    notes.append(f"{target.world_size} processes ({target.nodes} node(s) x {target.devices}) x {job.threads} "
                 f"thread(s), DS_ACCELERATOR={accelerator}, process group {job.device.comm}")
    if accelerator == "cpu":
        notes.append(f"{SHM_ENV}=0: DeepSpeed's shared-memory all-reduce stays off (its first use is a 70-240 s "
                     "C++ JIT build; gloo carries the all-reduces)")
    return Built(launches, files, notes, warnings)
