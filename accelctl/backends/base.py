"""What a backend is: mostly data (which devices, precisions and strategies it takes),
plus one method that turns a target into launch commands and generated files.

The registry (``accelctl.plan.registry``) picks a backend for a target; nothing
outside the registry asks "which backend is this?".
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from accelctl import entrypoints
from accelctl.families import FAMILIES
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import GeneratedFile, Launch, Plan
from accelctl.errors import Diagnostic
from accelctl.catalog import DEVICES
from accelctl.workload.types import TargetSpec, WorkloadSpec

if TYPE_CHECKING:  # a check's result type: imported by the checks (plan --check), not by planning
    from accelctl.backends.findings import CheckResult

WORKER = ("-m", entrypoints.WORKER, "{run_dir}/job.json")

def option(flag: str, value: str) -> list[str]:
    """``flag value`` as argv words, or the one word ``flag=value`` when the value starts with
    '-': text from a workload (a prompt, a Hub id, a path, a column name) that becomes an
    argument is never read as a flag (``--prompt --trust_remote_code`` would be two flags).
    Every backend passes workload text to a command line through this."""
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


#: environment every worker gets: unbuffered output, no tokenizer thread pools
BASE_ENV = {"TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}


def hub_env(job: WorkerJob) -> dict[str, str]:
    """Hub access as the job says: offline is ``HF_HUB_OFFLINE`` / ``HF_DATASETS_OFFLINE`` (the
    local cache and paths only); online leaves the user's ``HF_HOME`` and cache as they are."""
    return {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"} if job.hub == "offline" else {}


def process_env(job: WorkerJob) -> dict[str, str]:
    """BASE_ENV, the job's Hub access and the threads of each process.  Where the device family
    says so (the host CPU), OpenMP's idle threads sleep instead of spinning
    (``OMP_WAIT_POLICY=PASSIVE``)."""
    env = dict(BASE_ENV, **hub_env(job), OMP_NUM_THREADS=str(job.threads))
    if FAMILIES[job.device.adapter].idle_threads_sleep:
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    return env


#: the code of every backend refusal
REFUSED = "E520"
#: why ``optimizer lamb`` is refused on Gaudi: Habana's fused optimizers are reached through
#: optimum-habana, and its 1.21.2 source offers FusedAdamW only (GaudiTrainer.create_optimizer,
#: ``use_fused_adam``); no fused LAMB (checked in .venv-habana: no "Lamb" in optimum/habana)
LAMB_ON_HPU = ("optimizer lamb is not built for Gaudi: optimum-habana offers no fused LAMB (its GaudiTrainer swaps "
               "AdamW for Habana's FusedAdamW only); use adamw on this target")
#: the code of an ``optimize`` setting a backend cannot run (it compiles its own way ...)
OPTIMIZE_REFUSED = "E221"


def refusal(spec: WorkloadSpec, target: TargetSpec, reason: str, *settings: str) -> Diagnostic:
    """A backend's refusal of ``target``: E520 at the first of ``settings`` written for it
    (``WorkloadSpec.origin_of``: the target's own, else the workload's), else at the target's
    header; the reason is the hint."""
    span = spec.origin_of(target.name, *settings) or spec.origins.get(f"targets.{target.name}")
    return Diagnostic(REFUSED, f"no backend can run target {target.name}", span, spec.path, reason)


@dataclass(eq=False)  # compared nowhere: no generated __eq__ to exec on every cold command
class Built:
    """What a backend produces for one target."""

    launches: list[Launch]
    files: list[GeneratedFile] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: what an engine's scheduler submits, as data (``Plan.request``); None for a backend's own
    request: dict | None = None


class Backend:
    name: str = ""
    precisions: tuple[str, ...] = ("fp32", "bf16", "fp16")
    strategies: tuple[str, ...] = ("none",)
    tasks: tuple[str, ...] = ("pretrain", "finetune", "generate", "infer")
    #: one line for ``accelctl plan`` and docs
    summary: str = ""
    #: how the worker runs the model under this backend (a name in ``accelctl.worker.strategy.STRATEGIES``)
    worker_strategy: str = "plain"
    #: ``accelctl doctor`` probes of the tool this backend launches (name -> code printing one
    #: JSON object in a child interpreter); device stacks are probed by their families
    probes: ClassVar[Mapping[str, str]] = {}
    #: why this backend does not run ``optimize { compile = on }`` ("" = it does: the worker
    #: ``torch.compile``s the model it builds, ``accelctl.worker.optimize``)
    compile_refusal: str = ""
    #: why it does not run ``optimize { channels_last = on }`` ("" = it does)
    channels_last_refusal: str = ""
    #: the library its fp8 runs through (``precision fp8 { library = ... }``): "torchao" runs
    #: only torchao's and is training only; "" = the backend's own fp8 (not torchao's)
    fp8_library: str = ""

    @property
    def adapters(self) -> tuple[str, ...]:
        """The device families this backend drives: those whose row lists it (``DeviceFamily.backends``)."""
        return tuple(f.name for f in FAMILIES.values() if self.name in f.backends)

    def selects(self, spec: WorkloadSpec, target: TargetSpec) -> bool:
        """Whether this backend is the natural choice for the target (registry order decides ties)."""
        return DEVICES[target.device].adapter in self.adapters and target.parallel.strategy in self.strategies

    def unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        """Why this backend cannot run the target (empty = it can): ``refusal`` diagnostics,
        each pointing at the setting that is in the way."""
        out = []
        adapter = DEVICES[target.device].adapter
        if adapter not in self.adapters:
            out.append(refusal(spec, target, f"backend {self.name} does not drive {target.device} ({adapter}) devices",
                               "device", "instance"))
        if target.precision.dtype not in self.precisions:
            out.append(refusal(spec, target, f"backend {self.name} does not run {target.precision.dtype}",
                               "precision"))
        if target.parallel.strategy not in self.strategies:
            out.append(refusal(spec, target, f"backend {self.name} does not do {target.parallel.strategy} parallelism",
                               "parallel"))
        if spec.task.kind not in self.tasks:
            out.append(refusal(spec, target, f"backend {self.name} does not do {spec.task.kind} tasks", "task"))
        return out + self.fp8_unsupported(spec, target) + self.optimize_unsupported(spec, target)

    def fp8_unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        """An fp8 library this backend does not run (torchao's float8 is the torchao backends'
        alone, and for training only)."""
        if target.precision.dtype != "fp8" or target.precision.dtype not in self.precisions:
            return []
        library = target.precision.fp8.library if target.precision.fp8 else "transformer_engine"
        if (library == "torchao") != (self.fp8_library == "torchao"):
            return [refusal(spec, target, f"backend {self.name} runs fp8 through {self.fp8_library or 'its own stack'}"
                            f", not {library}", "precision")]
        if library == "torchao" and spec.task.kind not in ("pretrain", "finetune"):
            return [refusal(spec, target, "torchao's float8 (convert_to_float8_training) is for training; "
                            f"task {spec.task.kind} runs in bf16 or fp16", "precision")]
        return []

    def optimize_unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        """The target's ``optimize`` settings this backend cannot run: E221 at the setting."""
        out = []
        for key, why in (("compile", self.compile_refusal), ("channels_last", self.channels_last_refusal)):
            if why and getattr(target.optimize, key):
                out.append(Diagnostic(OPTIMIZE_REFUSED, f"backend {self.name} does not run {key} = on "
                                      f"(target {target.name})", spec.origin_of(target.name, f"optimize.{key}"),
                                      spec.path, why))
        return out

    def processes_per_node(self, target: TargetSpec) -> int:
        return target.devices

    def strategy_for(self, target: TargetSpec) -> str:
        """The worker's execution strategy for ``target`` (``worker_strategy`` unless the
        backend runs some parallel layouts another way)."""
        return self.worker_strategy

    def build(self, spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Built:
        raise NotImplementedError

    def device_rehearsal(self, real: Plan, stand_in: Plan) -> Plan:
        """The rehearsal of ``real`` (one of this backend's plans) through this backend's own
        device code path on this CPU, where it has one and it is installed (``accelctl run
        --rehearse``); ``stand_in`` is the plain CPU rehearsal of the same target.  Backends
        without such a path give ``stand_in``; one whose path is not installed gives it with a
        warning that says so and how to install it."""
        return stand_in

    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        """``plan`` (one of this backend's) checked by the real software it targets, where that
        is installed (``accelctl plan --check``); a tool that is not gives a result with
        ``ok = None``, never a pass.  Backends without a tool to ask give ``[]``.  ``spec`` is
        resolved for the plan's target.  Tools are imported here only, so planning stays light."""
        return []
