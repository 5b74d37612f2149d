"""AWS Batch multi-node parallel jobs.

``wrap`` renders the RegisterJobDefinition (type ``multinode``, one node range ``0:`` running the
container entrypoint) and SubmitJob request bodies as generated files, and keeps them, with each
node's launch, as data in the plan (``Plan.request``).  The run's supervisor submits them
(``accelctl.engines.batch_scheduler``); in the container every node runs
``accelctl.engines.batch_entrypoint``, which starts DeepSpeed's per-node launch.  What a node runs
travels in the job definition's ``ACCELCTL_BATCH_NODE``, so the image needs accelctl and its run
extras, nothing per workload.  The AWS facts the rendering relies on, and the Gaudi device-name
assumption the plan's notes state: docs/internals/run-and-engines.md.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING

from accelctl import entrypoints
from accelctl.backends.base import Built
from accelctl.backends.deepspeed.launch import DEFAULT_MASTER_PORT, HOSTFILE
from accelctl.contract.plan import FREE_PORT, RUN_DIR, GeneratedFile, Launch, Plan
from accelctl.engines import batch_settings
from accelctl.engines.base import Engine
from accelctl.engines.batch_entrypoint import NODE_ENV, node_argv
from accelctl.errors import Diagnostic, PlanError
from accelctl.families import FAMILIES as DEVICE_FAMILIES
from accelctl.catalog import DEVICES, INSTANCES
from accelctl.workload.types import TargetSpec, WorkloadSpec
from accelctl.frozen import replace

if TYPE_CHECKING:  # plan --check's result type: planning (validate's verdict) needs none
    from accelctl.backends.findings import CheckResult

JOB_DEFINITION_FILE = "batch_job_definition.json"
SUBMIT_FILE = "batch_submit_job.json"
ENTRYPOINT = ("python", "-m", entrypoints.BATCH_ENTRYPOINT)
#: what the supervisor's submission amounts to (after RegisterJobDefinition), as the AWS CLI would
SUBMIT = ("aws", "batch", "submit-job", "--cli-input-json", f"file://{RUN_DIR}/{SUBMIT_FILE}")
#: the code of an aws_batch engine setting that is missing or cannot work
CODE = batch_settings.ROW.code
#: the share of an instance's memory a job asks for (Batch reserves some for its agent)
RESERVE = 0.9


def _name(text: str) -> str:
    """A Batch name: letters, digits, hyphens, underscores, at most 128."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", text)[:128]


def efa_adapters(instance: str) -> int:
    m = re.search(r"(\d+)x\d+ Gbps EFA", INSTANCES[instance].network) if instance in INSTANCES else None
    return int(m.group(1)) if m else 0


def _refuse(spec: WorkloadSpec, target: TargetSpec, key: str, message: str, hint: str) -> PlanError:
    span = (spec.origins.get(f"engines.aws_batch.{key}") or spec.origins.get(f"targets.{target.name}.engine")
            or spec.origins.get(f"targets.{target.name}"))
    return PlanError(diagnostics=[Diagnostic(CODE, message, span, spec.path, hint)])


def accelerator(target: TargetSpec) -> tuple[list[dict], list[dict]]:
    """(resourceRequirements, linuxParameters.devices) for the target's accelerators on one node."""
    family = DEVICE_FAMILIES[DEVICES[target.device].adapter]
    n = target.devices
    if family.batch_gpu:
        return [{"type": "GPU", "value": str(n)}], []
    files = range(-(-n // family.batch_units_per_file))
    paths = [pattern.format(i=i) for pattern in family.batch_device_files for i in files]
    return [], [{"hostPath": p, "containerPath": p, "permissions": ["READ", "WRITE", "MKNOD"]} for p in paths]


class AwsBatchEngine(Engine):
    row = batch_settings.ROW
    backends = ("deepspeed",)

    def wrap(self, spec, target, built, job, settings):
        s = dict(settings.settings)
        family = DEVICE_FAMILIES[DEVICES[target.device].adapter]
        if not (family.host or family.batch_gpu or family.batch_device_files):
            raise _refuse(spec, target, "device", f"AWS Batch cannot give a container {family.name} devices "
                          f"({target.device}): no AWS instance has them", "run this target with another engine")
        inst = INSTANCES.get(target.instance)
        if inst is not None and not family.host and inst.cloud != "aws":
            raise _refuse(spec, target, "device", f"AWS Batch runs AWS instances; {inst.name} is "
                          f"{inst.cloud or 'an owned server'}'s", "run this target with another engine, or name an "
                          "AWS instance")
        if len(built.launches) != 1:
            raise _refuse(spec, target, "job_definition", f"engine aws_batch places one deepspeed launch per node, "
                          f"the backend gave {len(built.launches)}", "leave engine deepspeed { ssh } unset")
        for key in ("job_queue", "image"):
            if not s.get(key):
                raise _refuse(spec, target, key, f"engine aws_batch needs {key}",
                              f'set engine aws_batch {{ {key} = "..." }}')
        vcpus = s.get("vcpus") or (INSTANCES[target.instance].vcpus if target.instance in INSTANCES else 0)
        mem_gib = INSTANCES[target.instance].memory_gib if target.instance in INSTANCES else 0
        memory_mib = (int(s["memory"]) // 2**20 if s.get("memory")
                      else int(mem_gib * 1024 * RESERVE) if mem_gib else 0)
        if not vcpus or not memory_mib:
            raise _refuse(spec, target, "vcpus" if not vcpus else "memory",
                          f"engine aws_batch cannot size a node of target {target.name} (instance "
                          f"{target.instance or 'none'} is not in the catalog)",
                          "set engine aws_batch { vcpus = N  memory = N GB }")
        adapters = efa_adapters(target.instance)
        efa = s.get("efa", adapters > 0 and target.nodes > 1)
        if efa and not adapters:
            raise _refuse(spec, target, "efa", f"efa = on but instance {target.instance or '(none)'} has no EFA "
                          "adapter in the catalog", "set efa = off, or pick an instance with EFA")
        launch = built.launches[0]
        # the hostfile is the main node's to write, from the addresses the nodes report
        files = [f for f in built.files if f.path != HOSTFILE]
        warnings = [w for w in built.warnings if f"{RUN_DIR}/{HOSTFILE}" not in w]
        # each node is its own container: DeepSpeed's default master port is free there (the
        # entrypoint fills {run_dir} only, so a per-run {free_port} becomes that default)
        argv = [a.replace(FREE_PORT, str(DEFAULT_MASTER_PORT)) for a in launch.argv]
        node = {"argv": argv, "slots": target.devices,
                "files": {f.path: f.content for f in files if f.template}, "job": job.to_dict()}
        if any(not f.template for f in files):
            node["data"] = {f.path: f.content for f in files if not f.template}
        # the node fills {run_dir} in its argv, files and environment, never in the job (data)
        env = {**launch.env, NODE_ENV: json.dumps(node, sort_keys=True, separators=(",", ":"))}
        requirements, devices = accelerator(target)
        requirements = [{"type": "VCPU", "value": str(vcpus)}, {"type": "MEMORY", "value": str(memory_mib)},
                        *requirements]
        linux: dict = {"sharedMemorySize": memory_mib // 4}
        container: dict = {"image": s["image"], "command": list(ENTRYPOINT), "resourceRequirements": requirements,
                           "environment": [{"name": k, "value": v} for k, v in sorted(env.items())]}
        if target.instance in INSTANCES and target.instance != "local":
            container["instanceType"] = target.instance
        if efa:
            devices += [{"hostPath": f"/dev/infiniband/uverbs{i}", "containerPath": f"/dev/infiniband/uverbs{i}",
                         "permissions": ["READ", "WRITE", "MKNOD"]} for i in range(adapters)]
            container["ulimits"] = [{"name": "memlock", "softLimit": -1, "hardLimit": -1}]
        if devices:
            linux["devices"] = devices
        container["linuxParameters"] = linux
        if s.get("role_arn"):
            container["jobRoleArn"] = s["role_arn"]
        definition_name = _name(s.get("job_definition") or f"{spec.name}-{target.name}")
        definition: dict = {
            "jobDefinitionName": definition_name, "type": "multinode", "platformCapabilities": ["EC2"],
            "nodeProperties": {"numNodes": target.nodes, "mainNode": 0,
                               "nodeRangeProperties": [{"targetNodes": "0:", "container": container}]},
        }
        if s.get("attempts"):
            definition["retryStrategy"] = {"attempts": int(s["attempts"])}
        submit = {"jobName": _name(f"{spec.name}-{target.name}"), "jobQueue": s["job_queue"],
                  "jobDefinition": definition_name}
        out_files = [
            # as submitted: its {run_dir} is each node's, filled there (batch_entrypoint)
            GeneratedFile(JOB_DEFINITION_FILE, json.dumps(definition, indent=2, sort_keys=True) + "\n",
                          role="AWS Batch RegisterJobDefinition request (multinode)", template=False),
            GeneratedFile(SUBMIT_FILE, json.dumps(submit, indent=2, sort_keys=True) + "\n",
                          role="AWS Batch SubmitJob request (jobDefinition: the registered revision)"),
        ]
        submit_launch = Launch("submit", SUBMIT, {}, processes=0)
        request = {"definition": definition, "submit": submit, "node": {**node, "env": dict(launch.env)}}
        notes = [*built.notes,
                 f"AWS Batch: {target.nodes} node(s) of {target.instance or 'any instance'} ({vcpus} vCPUs, "
                 f"{memory_mib} MiB, /dev/shm {memory_mib // 4} MiB), queue {s['job_queue']}; each node runs "
                 f"{' '.join(ENTRYPOINT)}: the nodes report to the main node over TCP, it writes the hostfile, "
                 "every node starts deepspeed --no_ssh --node_rank N",
                 "the run folder's files travel in the job definition's environment (" + NODE_ENV + ")"]
        if family.batch_device_files:
            notes.append("assumption: accelerators mapped as linuxParameters.devices (" +
                         " + ".join(p.replace("{i}", "<N>") for p in family.batch_device_files) +
                         "); AWS Batch has no resource type for them")
        if efa:
            notes.append(f"EFA: {adapters} adapter(s) mapped (/dev/infiniband/uverbs0..{adapters - 1}), memlock "
                         "unlimited")
        notes.append("submit: the run's supervisor registers the definition, submits the job against that "
                     "revision, follows it and terminates it on stop; accelctl cancel RUN from anywhere")
        return Built([submit_launch], [*files, *out_files], notes, warnings, request)

    def node_plan(self, plan: Plan) -> Plan:
        """The launch each node runs (rank by rank, as the entrypoint rewrites it) beside a
        hostfile of stand-in hosts ``node0..``: what the deepspeed backend's check reads.
        Built from the plan's request (the node's launch), never read back from the definition."""
        request = plan.request or {}
        nodes = request["definition"]["nodeProperties"]["numNodes"]
        node = request["node"]
        argv, env, extra = node["argv"], dict(node["env"]), []
        if nodes > 1:
            hosts = "".join(f"node{i} slots={node['slots']}\n" for i in range(nodes))
            extra = [GeneratedFile(HOSTFILE, hosts, role="stand-in hostfile (written by the main node at run time)")]
            launches = tuple(Launch(f"node{r}", tuple(node_argv(argv, master="node0", rank=r)), env,
                                    processes=node["slots"]) for r in range(nodes))
        else:
            launches = (Launch("deepspeed", tuple(argv), env, processes=node["slots"]),)
        kept = [f for f in plan.files if f.path not in (JOB_DEFINITION_FILE, SUBMIT_FILE)]
        return replace(plan, launches=launches, files=(*kept, *extra), request=None)

    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        """Both requests validated by botocore's own Batch service model (offline)."""
        from accelctl.backends.findings import CheckResult, not_run

        try:
            import botocore.session
            import botocore.validate
        except ImportError:
            return [not_run("botocore (AWS Batch service model)",
                            "botocore is not installed: pip install 'accelctl[aws]'")]
        import botocore

        model = botocore.session.get_session().get_service_model("batch")
        files = {f.path: f.content for f in plan.files}
        out = []
        for op, path in (("RegisterJobDefinition", JOB_DEFINITION_FILE), ("SubmitJob", SUBMIT_FILE)):
            report = validate_request(model, op, json.loads(files[path]))
            out.append(CheckResult(f"botocore {botocore.__version__} batch {op} ({path})", not report,
                                   report.splitlines() or ["valid"]))
        return out


def validate_request(model, operation: str, params: dict) -> str:
    """botocore's ParamValidator report for ``params`` ("" = valid)."""
    import botocore.validate

    report = botocore.validate.ParamValidator().validate(params, model.operation_model(operation).input_shape)
    return report.generate_report() if report.has_errors() else ""
