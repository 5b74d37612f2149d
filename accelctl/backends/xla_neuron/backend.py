"""xla_neuron: torch-xla on AWS Trainium (trn1) and Inferentia2 (inf2) NeuronCores (seed 004).

``torchrun --nproc_per_node=<NeuronCores>``, one process per NeuronCore: the worker joins the
``xla`` process group (``xla://``), feeds batches through ``MpDeviceLoader`` and steps with
``xm.optimizer_step`` (which all-reduces the gradients; no DDP).  Worker side:
``accelctl.worker.devices.XlaAdapter`` and ``accelctl.worker.xla_extras``.  The environment is
data (``NEURON_ENV``, ``FORBIDDEN_ENV``), each entry with its source.  With
``neuron_parallel_compile = on`` a short copy of the job (``PRECOMPILE_JOB``) fills the compile
cache first; compilation is never part of step time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelctl import entrypoints
from accelctl.backends.base import Backend, Built, process_env, refusal
from accelctl.backends.torchrun import check_torchrun_launches
from accelctl.backends.xla_neuron.optimum_plans import SPLITS, generate_launches, through_optimum, training_launches
from accelctl.backends.xla_neuron.optimum_plans import limits as optimum_limits
from accelctl.contract.placeholders import OPTIMUM_NEURON
from accelctl.contract import envnames
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import RUN_DIR, GeneratedFile, Launch, Plan
from accelctl.errors import Diagnostic
from accelctl.catalog import INSTANCES
from accelctl.models.catalog import FAMILIES
from accelctl.workload.types import MeasureSpec, TargetSpec, WorkloadSpec
from accelctl.frozen import replace

if TYPE_CHECKING:  # plan --check's result type: planning (validate's verdict) needs none
    from accelctl.backends.findings import CheckResult

#: the torch-xla release the plan's environment is written for (torch-xla 2.9 needs torch 2.9.0)
TORCH_XLA_VERSION = "2.9"

NEURON_ENV = {
    "PJRT_DEVICE": "NEURON",
    "NEURON_CC_FLAGS": "--auto-cast=none",
    "NEURON_COMPILE_CACHE_URL": "/var/tmp/neuron-compile-cache",
}
#: variables a plan for torch-xla >= 2.6 under torchrun must not set (see module doc)
FORBIDDEN_ENV = ("XLA_USE_BF16", "XLA_DOWNCAST_BF16", "XLA_USE_FP16", "XLA_DOWNCAST_FP16",
                 "NEURONCORE_NUM_DEVICES", "NEURON_RT_VISIBLE_CORES")
#: ``xla_use_bf16 = on`` (seed 004): torch-xla 2.9.0 still reads it; its _XLAC library warns "XLA_USE_BF16
#: will be deprecated after the 2.6 release, please convert your model to bf16 directly" (the string in
#: .venv-xla's _XLAC.cpython-311-x86_64-linux-gnu.so)
XLA_USE_BF16 = "XLA_USE_BF16"
XLA_USE_BF16_NOTE = (
    "bf16: XLA_USE_BF16=1 as seed 004 ran it (xla_use_bf16 = on): torch-xla holds every fp32 tensor -- weights, "
    "gradients, optimizer states -- in bf16, no autocast (half the memory of mixed precision, other numerics); "
    f"torch-xla {TORCH_XLA_VERSION} still reads it but warns \"XLA_USE_BF16 will be deprecated after the 2.6 release, "
    "please convert your model to bf16 directly\", and Neuron drops it after 2.24")
#: instances this small (vCPUs) precompile with one retry: "NEURON_PARALLEL_COMPILE_MAX_RETRIES=1
#: when precompiling on trn1.2xlarge where there's limited host memory and CPU resources"
SMALL_HOST_VCPUS = 8

#: data-loader workers: the vCPUs of one core's share, at most 8 (seed 004: 4 on trn1, 2 on
#: inf2.xlarge, 8 on the larger inf2); without a known instance, this many
MAX_WORKERS, DEFAULT_WORKERS = 8, 2
WORKERS_ENV = envnames.DATALOADER_WORKERS
PRECOMPILE_JOB = "job_precompile.json"
#: steps of the pre-compilation run: enough to meet every graph (the optimizer's first step
#: differs from the next ones: AdamW builds its state), far fewer than the measured run
PRECOMPILE_STEPS = 2
WORKER_MODULE = entrypoints.WORKER


def dataloader_workers(target: TargetSpec) -> tuple[int, str]:
    """Workers per process and why."""
    if target.options.dataloader_workers is not None:
        return target.options.dataloader_workers, "set by the target"
    inst = INSTANCES.get(target.instance)
    if inst is None or not inst.vcpus:
        return DEFAULT_WORKERS, "no instance type named, so no vCPU count; set instance = ... or dataloader_workers"
    share = inst.vcpus // max(1, target.devices)
    n = max(1, min(MAX_WORKERS, share))
    return n, f"{inst.name}: {inst.vcpus} vCPUs / {target.devices} processes = {share}, at most {MAX_WORKERS}"


def precompile_job(job: WorkerJob) -> WorkerJob:
    """The job for ``neuron_parallel_compile``: the same graphs, a few steps, events to the log."""
    m = job.measure
    warmup = min(m.warmup, PRECOMPILE_STEPS)
    return replace(job, measure=MeasureSpec(warmup=warmup, steps=PRECOMPILE_STEPS, repeat=1),
                   device=replace(job.device, precompile=True), events_dir="")


class XlaNeuronBackend(Backend):
    name = "xla_neuron"
    precisions = ("fp32", "bf16")
    strategies = ("none", "data", *SPLITS)
    summary = "torch-xla on Trainium/Inferentia2: torchrun, one process per NeuronCore, xla process group"
    compile_refusal = ("torch-xla traces every step and compiles it with XLA (neuronx-cc on Neuron) already; "
                       "torch.compile on top would compile twice: remove compile (neuron_parallel_compile = on "
                       "pre-compiles the graphs)")
    channels_last_refusal = ("XLA picks the layouts of the graphs it compiles; a torch memory format does not "
                             "reach the device: remove channels_last")

    def unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        out = super().unsupported(spec, target)
        family = FAMILIES.get(spec.model.family)
        if family is not None and family.convolutional and spec.task.training:
            out.append(refusal(spec, target, f"the Neuron SDK cannot train convolutional models "
                               f"({spec.model.family})", "model"))
        if through_optimum(spec, target):
            out += [refusal(spec, target, reason, *settings) for reason, settings in optimum_limits(spec, target)]
            if spec.task.kind == "generate" and target.options.neuron_parallel_compile:
                out.append(refusal(spec, target, "optimum-cli export neuron compiles the model itself: remove "
                                   "neuron_parallel_compile", "neuron_parallel_compile"))
        return out

    def device_rehearsal(self, real: Plan, stand_in: Plan) -> Plan:
        """On torch-xla's XLA CPU device from ``.venv-xla`` (``cpu_rehearsal.rehearsal_plan``)."""
        from accelctl.backends.xla_neuron.cpu_rehearsal import rehearsal_plan

        if any(OPTIMUM_NEURON in " ".join(launch.argv) for launch in real.launches):
            # optimum-neuron's programs need the Neuron SDK: the stand-in rehearses the step, not them
            split = (f"its tensor parallel as accelctl's own plan, tp {stand_in.job.parallel.tp} over gloo ranks"
                     if stand_in.job.parallel.tp > 1 else "the model split undone")
            return replace(stand_in, warnings=(*stand_in.warnings, (
                f"target {real.target} runs optimum-neuron's programs ({', '.join(x.name for x in real.launches)}), "
                f"which need the Neuron SDK: this rehearsal runs accelctl's loop with the stand-in instead, {split}")))
        return rehearsal_plan(real, stand_in)

    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        """torchrun's parser, then the environment and the worker's torch-xla calls against the
        API table of torch-xla ``TORCH_XLA_VERSION`` (``accelctl.backends.xla_neuron.check``)."""
        from accelctl.backends.xla_neuron.check import check_results
        from accelctl.backends.xla_neuron.optimum_check import check_optimum_plan

        if any(OPTIMUM_NEURON in " ".join(launch.argv) for launch in plan.launches):
            return [*check_torchrun_launches(plan), check_optimum_plan(plan)]
        asked = (XLA_USE_BF16,) if spec.target(plan.target).options.xla_use_bf16 else ()
        return [*check_torchrun_launches(plan), *check_results(plan, TORCH_XLA_VERSION, FORBIDDEN_ENV, asked)]

    def build(self, spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Built:
        cores = target.devices
        workers, why = dataloader_workers(target)
        torchrun = ["torchrun"]
        if target.nodes == 1:
            torchrun += ["--standalone", "--nnodes=1"]
        torchrun += [f"--nproc_per_node={cores}"]
        env = dict(process_env(job), **{WORKERS_ENV: str(workers)}, **NEURON_ENV)
        if target.options.xla_use_bf16:
            env[XLA_USE_BF16] = "1"
        if through_optimum(spec, target):
            return self._build_optimum(spec, target, job, torchrun, env)
        torchrun += ["-m", WORKER_MODULE]
        run = Launch("torchrun", (*torchrun, f"{RUN_DIR}/job.json"), env, processes=cores)
        notes = [
            f"{cores} processes, one per NeuronCore, process group xla (init_method xla://), "
            f"MpDeviceLoader, xm.optimizer_step; torch-xla {TORCH_XLA_VERSION} (needs torch 2.9.0)",
            f"{workers} data-loader workers per process ({why})",
            XLA_USE_BF16_NOTE if target.options.xla_use_bf16 else
            ("bf16: torch.autocast('xla', dtype=bfloat16) around the forward, compiler auto-cast off "
             "(NEURON_CC_FLAGS=--auto-cast=none); deliberately not seed 004's XLA_USE_BF16=1, which holds the "
             "weights, gradients and optimizer states in bf16 too (other numerics, half their memory): it is "
             f"deprecated after torch-xla 2.6 and dropped after Neuron 2.24, and the plan targets torch-xla "
             f"{TORCH_XLA_VERSION}, so it is not set (xla_use_bf16 = on sets it)"
             if target.precision.dtype == "bf16" else
             "fp32: compiler auto-cast off (NEURON_CC_FLAGS=--auto-cast=none), else neuronx-cc runs FP32 "
             "matmuls in BF16"),
            "graph compilation is reported apart from step time (compile phase); fixed shapes and a "
            "dropped ragged last batch keep it to the first steps",
        ]
        files: list[GeneratedFile] = []
        launches = [run]
        if target.options.neuron_parallel_compile:
            pre_env = dict(env)
            inst = INSTANCES.get(target.instance)
            if inst is not None and inst.vcpus and inst.vcpus <= SMALL_HOST_VCPUS:
                pre_env["NEURON_PARALLEL_COMPILE_MAX_RETRIES"] = "1"
            pre = Launch("precompile", ("neuron_parallel_compile", *torchrun, f"{RUN_DIR}/{PRECOMPILE_JOB}"),
                         pre_env, processes=cores, wait=True)
            launches.insert(0, pre)
            files.append(GeneratedFile(PRECOMPILE_JOB, precompile_job(job).to_json() + "\n",
                                       role="short job for neuron_parallel_compile (graph extraction only)",
                                       template=False))
            notes.append(f"pre-compilation first: neuron_parallel_compile runs {PRECOMPILE_STEPS} steps with "
                         f"dummy outputs, compiles the graphs in parallel into {NEURON_ENV['NEURON_COMPILE_CACHE_URL']}"
                         ", then the measured run starts (same cache)")
        return Built(launches, files, notes)

    def _build_optimum(self, spec, target, job, torchrun, env) -> Built:
        """optimum-neuron's programs (``optimum_plans``): the export and generation.py, or
        finetune_llama.py under torchrun (behind neuron_parallel_compile when asked)."""
        if spec.task.kind == "generate":
            launches, notes, warnings = generate_launches(spec, target, job, env)
            return Built(launches, [], notes, warnings)
        launches, notes = training_launches(spec, target, job, torchrun, env)
        if target.options.neuron_parallel_compile:
            run = launches[0]
            argv = list(run.argv)
            argv[argv.index("--max_steps") + 1] = str(PRECOMPILE_STEPS)
            launches.insert(0, replace(run, name="precompile", argv=("neuron_parallel_compile", *argv),
                                       wait=True))
            notes.append(f"pre-compilation first: neuron_parallel_compile runs finetune_llama.py for "
                         f"{PRECOMPILE_STEPS} steps and compiles its graphs into the cache")
        return Built(launches, [], notes)
