"""deepspeed and deepspeed_inference: the ``deepspeed`` launcher, one process per device.

``deepspeed`` (``zero(stage = N)``; cpu, cuda, hpu) writes ``ds_config.json`` and the worker hands
its model and optimizer to ``deepspeed.initialize`` (``accelctl.worker.ds_engine``);
``deepspeed_inference`` (cpu, cuda) writes ``ds_inference.json`` for ``init_inference``.  Hidden
costs avoided: the worker's own optimizer (a ds_config one JIT-builds FusedAdam; ZeRO-Offload
excepted), ``gradient_clipping`` always written (DeepSpeed defaults it to 1.0), no shm all-reduce
on CPU (``ACCELCTL_DS_SHM_COMM=0``).  Launch lines are ``launch``'s, pins ``release``'s; nothing
here imports torch or deepspeed; ``check`` checks plans against DeepSpeed itself.
Design notes: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from accelctl.backends.base import Backend, Built, refusal
from accelctl.backends.deepspeed.launch import accelerator_of, adapter_of, build_launch
from accelctl.backends.gaudi.model_types import model_type_limits
from accelctl.backends.deepspeed.release import (AUTOTP, CONFIG_FILE, DEEPSPEED_VERSION, INFERENCE_FILE,
                                                 TRANSFORMERS_VERSION, installed_version)
from accelctl.contract import envnames
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import GeneratedFile, Plan
from accelctl.errors import Diagnostic
from accelctl.families import FAMILIES as DEVICE_FAMILIES
from accelctl.catalog import DEVICES
from accelctl.workload.types import TargetSpec, WorkloadSpec

if TYPE_CHECKING:  # plan --check's result type: planning (validate's verdict) needs none
    from accelctl.backends.findings import CheckResult

#: ``accelctl doctor``: DeepSpeed's version and the accelerator and process group it picks here
PROBES = {"deepspeed": (
    "import json\nimport deepspeed\nfrom deepspeed.accelerator import get_accelerator as g\na = g()\n"
    "print(json.dumps({'version': deepspeed.__version__, 'accelerator': a.device_name(),"
    " 'comm_backend': a.communication_backend_name()}))"
)}

#: environment the worker reads (accelctl.worker.ds_engine)
CONFIG_ENV, INFERENCE_ENV = envnames.DS_CONFIG, envnames.DS_INFERENCE_CONFIG

#: DeepSpeed logs its own progress every ``steps_per_print`` steps; accelctl's events replace it
STEPS_PER_PRINT = 1_000_000_000

#: the worker's optimizer -> DeepSpeed's optimizer section (used with ZeRO-Offload only).
#: DeepSpeed's "Adam" is AdamW unless ``adam_w_mode`` is false: spelled out to match torch.
DS_OPTIMIZER = {"adamw": ("AdamW", {}), "adam": ("Adam", {"adam_w_mode": False})}
#: client optimizers the worker builds (accelctl.worker.devices: torch.optim's, timm's Lamb)
CLIENT_OPTIMIZERS = ("adamw", "adam", "sgd", "lamb")
#: the worker's optimizer -> DeepSpeed's own, on CUDA: ``"type": "Lamb"`` is DeepSpeed's
#: LAMB on Gaudi under DeepSpeed: the worker's own optimizer handed to deepspeed.initialize, as
#: every client optimizer is (no optimum-habana in this path, so its missing fused LAMB does not
#: matter); Habana's BERT reference (seed 001) ran its own LANS / NVLAMB instead
LAMB_HPU_NOTE = ("optimizer: the worker's timm Lamb (plain torch ops, run by the HPU) handed to deepspeed.initialize; "
                 "deliberately not the seed's: Habana's deepspeed-bert reference runs its own LANS "
                 "(run_bert_1.5b_8x.sh --optimizer=lans; the AWS workshop's launch_train.sh --optimizer=nvlamb), "
                 "which is Model-References code, not a package accelctl can pin")
#: FusedLamb (``deepspeed.ops.lamb``, a CUDA kernel), which it builds from the config section
DS_CUDA_OPTIMIZER = {"lamb": ("Lamb", {})}
#: client optimizers ZeRO runs without ``zero_allow_untested_optimizer`` (DeepSpeed's
#: ``runtime.zero.utils.ZERO_SUPPORTED_OPTIMIZERS``; ds_check compares the two)
ZERO_TESTED = ("adamw", "adam")

#: DeepSpeed's BLOOM kernel-injection container refuses transformers newer than this
#: (``module_inject/containers/bloom.py``); AutoTP of BLOOM breaks past it as well (LAB §5)
BLOOM_LAST_TRANSFORMERS = (4, 43)


def stack_versions(target: TargetSpec) -> tuple[str | None, str, str]:
    """(transformers, deepspeed, where they come from) for a plan of ``target``: a plan is inert
    data, so one for another machine is written for accelctl's pins (``TRANSFORMERS_VERSION``,
    ``DEEPSPEED_VERSION``) or the target's ``stack`` pins; a host CPU plan reads what is installed
    (transformers None: not installed).
    """
    if DEVICES[target.device].host:
        return installed_version("transformers"), installed_version("deepspeed") or DEEPSPEED_VERSION, "installed"
    pins = target.stack.packages
    if "transformers" in pins or "deepspeed" in pins:
        return (pins.get("transformers", TRANSFORMERS_VERSION), pins.get("deepspeed", DEEPSPEED_VERSION),
                "pinned by the target's stack")
    return TRANSFORMERS_VERSION, DEEPSPEED_VERSION, "the release plans for other machines target"


def _major_minor(version: str) -> tuple[int, int]:
    parts = (version.split(".") + ["0"])[:2]
    return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()) or 0)


def _cpu_lacks_fp16(target: TargetSpec) -> bool:
    """DeepSpeed's CPU accelerator offers fp16 only with native fp16 (mkldnn AVX512-FP16/AMX): a
    fact of the machine planned for (its host facts), so asked for the host CPU only."""
    if not DEVICES[target.device].host or target.precision.dtype != "fp16":
        return False
    from accelctl.contract import hostfacts

    return not hostfacts.current().has_native("fp16")


# ----------------------------------------------------------------------------- config files


def ds_config(spec: WorkloadSpec, target: TargetSpec) -> dict[str, Any]:
    """The ``ds_config.json`` of a training target (keys in DeepSpeed's spelling)."""
    p, b = target.parallel, target.batch
    zero: dict[str, Any] = {"stage": p.zero_stage if p.strategy == "zero" else 0}
    if p.offload_optimizer != "none":
        zero["offload_optimizer"] = {"device": p.offload_optimizer}
    if p.offload_param != "none":
        zero["offload_param"] = {"device": p.offload_param}
    cfg: dict[str, Any] = {
        # train_batch_size = micro x accumulation x data-parallel ranks (DeepSpeed asserts it)
        "train_batch_size": b.micro * b.accumulation * target.data_parallel,
        "train_micro_batch_size_per_gpu": b.micro,
        "gradient_accumulation_steps": b.accumulation,
        # always written: DeepSpeed 0.19.8 clips at 1.0 when the key is absent
        "gradient_clipping": float(spec.optimizer.grad_clip),
        "zero_optimization": zero,
        "steps_per_print": STEPS_PER_PRINT,
        "wall_clock_breakdown": False,
    }
    dtype = target.precision.dtype
    if dtype == "bf16":
        cfg["bf16"] = {"enabled": True}
    elif dtype == "fp16":
        cfg["fp16"] = {"enabled": True}  # dynamic loss scaling (loss_scale 0)
    opt = spec.optimizer
    own = (DS_OPTIMIZER.get(opt.name) if p.offload_optimizer != "none" else
           DS_CUDA_OPTIMIZER.get(opt.name) if DEVICE_FAMILIES[adapter_of(target)].deepspeed_fused_optimizers
           else None)
    if own is not None:
        name, extra = own
        cfg["optimizer"] = {"type": name, "params": {"lr": opt.lr, "weight_decay": opt.weight_decay, **extra}}
    if zero["stage"] > 0 and opt.name not in ZERO_TESTED and not (own and p.offload_optimizer != "none"):
        # torch.optim.SGD works under ZeRO; DeepSpeed only asks us to say we know it is untested
        cfg["zero_allow_untested_optimizer"] = True
    return cfg


def inference_config(spec: WorkloadSpec, target: TargetSpec) -> dict[str, Any]:
    """The ``ds_inference.json`` of a generate/infer target (``DeepSpeedInferenceConfig`` keys)."""
    p = target.parallel
    return {
        "tensor_parallel": {"tp_size": p.tp},
        "dtype": target.precision.dtype if target.precision.dtype in ("bf16", "fp16") else "fp32",
        "replace_with_kernel_inject": bool(p.kernel_inject),
    }


def to_json(cfg: dict[str, Any]) -> str:
    return json.dumps(cfg, indent=2) + "\n"


# ----------------------------------------------------------------------------- backends



class DeepSpeedBackend(Backend):
    name = "deepspeed"
    worker_strategy = "deepspeed"
    precisions = ("fp32", "bf16", "fp16")
    #: zero selects it; none/data run as ZeRO stage 0 when the target asks for backend = deepspeed
    strategies = ("zero", "data", "none")
    tasks = ("pretrain", "finetune")
    summary = "DeepSpeed launcher + deepspeed.initialize: ZeRO 0-3 data parallelism, offload"
    compile_refusal = ("the worker compiles the model of its plain strategy only; a DeepSpeed engine compiles "
                       "through its own engine.compile(), which accelctl does not call yet: remove compile")
    probes = PROBES

    def selects(self, spec: WorkloadSpec, target: TargetSpec) -> bool:
        return super().selects(spec, target) and target.parallel.strategy == "zero"

    def unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        out = super().unsupported(spec, target)
        p = target.parallel
        if p.strategy not in self.strategies:  # the base reason says it; the rest would be noise
            return out

        def no(reason: str, *settings: str) -> None:
            out.append(refusal(spec, target, reason, *settings))

        if accelerator_of(target) == "hpu":  # Gaudi's transformers is optimum-habana's pin
            model_type_limits(spec, no)
        if p.tp > 1 or p.pp > 1:
            no(f"backend deepspeed plans ZeRO data parallelism only, not tp = {p.tp} / pp = {p.pp} "
               "(DeepSpeed pipeline/tensor training needs a PipelineModule or Megatron model)", "parallel")
        if spec.optimizer.name not in CLIENT_OPTIMIZERS:
            no(f"optimizer {spec.optimizer.name} is not implemented by the worker "
               f"({', '.join(CLIENT_OPTIMIZERS)})", "optimizer.name", "optimizer")
        if "nvme" in (p.offload_optimizer, p.offload_param):
            no("ZeRO-Infinity nvme offload needs an nvme_path, which a workload cannot set yet; "
               "use offload = cpu", "parallel")
        if p.offload_optimizer != "none" and spec.optimizer.name not in DS_OPTIMIZER:
            no(f"ZeRO-Offload runs DeepSpeedCPUAdam (adam/adamw), not {spec.optimizer.name}", "optimizer", "parallel")
        if _cpu_lacks_fp16(target):
            no("DeepSpeed refuses fp16 on this CPU: CPU_Accelerator.is_fp16_supported() needs "
               "AVX512-FP16/AMX-FP16 ('Type fp16 is not supported on your device'); use fp32 or bf16", "precision")
        return out

    def build(self, spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Built:
        cfg = ds_config(spec, target)
        config = GeneratedFile(CONFIG_FILE, to_json(cfg), role=f"DeepSpeed {DEEPSPEED_VERSION} config "
                                                                 "(deepspeed.initialize)")
        built = build_launch(spec, target, job, config, CONFIG_ENV)
        z = cfg["zero_optimization"]
        precision = next((k for k in ("bf16", "fp16") if k in cfg), "fp32")
        built.notes.insert(0, f"{CONFIG_FILE}: ZeRO stage {z['stage']}, {precision}, train_batch_size "
                              f"{cfg['train_batch_size']} = micro {cfg['train_micro_batch_size_per_gpu']} x "
                              f"accumulation {cfg['gradient_accumulation_steps']} x {target.data_parallel} ranks")
        if accelerator_of(target) == "hpu":
            built.notes.append("Gaudi: DeepSpeed's HPU accelerator needs SynapseAI's habana_frameworks on every "
                               "node (DS_ACCELERATOR=hpu raises without it)")
        if "optimizer" in cfg and target.parallel.offload_optimizer == "none":
            built.notes.append(f"optimizer: DeepSpeed's own {cfg['optimizer']['type']} (ds_config \"optimizer\": "
                               "deepspeed.ops.lamb.FusedLamb, a CUDA kernel JIT-built on first use) in place of the "
                               "worker's timm Lamb")
        elif "optimizer" in cfg:
            built.notes.append(f"ZeRO-Offload: DeepSpeed's {cfg['optimizer']['type']} (DeepSpeedCPUAdam); its "
                               "cpu_adam op is a ~100 s C++ JIT build on first use (cached in "
                               "$TORCH_EXTENSIONS_DIR)")
        elif spec.optimizer.name == "lamb" and accelerator_of(target) == "hpu":
            built.notes.append(LAMB_HPU_NOTE)
        else:
            built.notes.append(f"optimizer: the worker's {'timm' if spec.optimizer.name == 'lamb' else 'torch.optim'} "
                               f"{spec.optimizer.name} handed to "
                               "deepspeed.initialize (a ds_config optimizer would JIT-build FusedAdam, ~110 s on CPU)")
        return built

    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        from accelctl.backends.deepspeed.check import check_results

        return check_results(plan, spec)


class DeepSpeedInferenceBackend(Backend):
    name = "deepspeed_inference"
    worker_strategy = "deepspeed_inference"
    precisions = ("fp32", "bf16", "fp16")
    strategies = ("deepspeed_inference",)
    tasks = ("generate", "infer")
    summary = "DeepSpeed launcher + deepspeed.init_inference: tensor parallel (AutoTP or kernel injection)"
    compile_refusal = ("deepspeed.init_inference replaces the model's modules (AutoTP shards, injected kernels) "
                       "after it is built; accelctl does not compile that model: remove compile")
    probes = PROBES

    def processes_per_node(self, target: TargetSpec) -> int:
        return target.devices

    def unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        out = super().unsupported(spec, target)
        p, family, accelerator = target.parallel, spec.model.family, accelerator_of(target)
        if p.strategy not in self.strategies:
            return out

        def no(reason: str, *settings: str) -> None:
            out.append(refusal(spec, target, reason, *settings))

        if target.world_size != p.tp:
            no(f"deepspeed_inference runs one process per tensor-parallel shard: nodes x devices "
               f"= {target.world_size} must equal tp = {p.tp}", "parallel", "devices")
        if p.kernel_inject and accelerator == "cpu":
            no("kernel injection does not exist on CPU: DeepSpeed's CPU accelerator has no "
               "InferenceBuilder ('This op had not been implemented on CPU backend'); "
               "set kernel_inject = off", "parallel")
        transformers, deepspeed, source = stack_versions(target)
        too_new = (transformers is not None and family == "bloom"
                   and _major_minor(transformers) > BLOOM_LAST_TRANSFORMERS)
        if p.kernel_inject and too_new:
            no(f"DeepSpeed {deepspeed} injects BLOOM kernels only with transformers <= 4.43.4, and "
               f"{transformers} is {source} ('BLOOM inference with DeepSpeed is no longer supported'); pin "
               "transformers = \"4.43.4\" in the target's stack { packages { } }", "stack.packages.transformers",
               "parallel")
        if p.tp > 1 and not p.kernel_inject:
            if not AUTOTP.get(family, True):
                no(f"DeepSpeed AutoTP cannot shard {family} ('AutoTP not supported for model. Please use "
                   "kernel injection'); use tp = 1, or kernel_inject = on on a GPU", "parallel", "model")
            elif too_new and accelerator == "cpu":
                no(f"AutoTP of BLOOM fails with transformers {transformers} and DeepSpeed {deepspeed}: the alibi "
                   "tensor is not sharded, so generate stops with 'The expanded size of the tensor ... must match'; "
                   "use tp = 1 (or transformers <= 4.43.4)", "parallel")
        if _cpu_lacks_fp16(target):
            no("DeepSpeed inference lists fp16 on CPU only with AVX512-FP16/AMX-FP16 "
               "(CPU_Accelerator.supported_dtypes); use fp32 or bf16", "precision")
        return out

    def build(self, spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Built:
        cfg = inference_config(spec, target)
        config = GeneratedFile(INFERENCE_FILE, to_json(cfg), role=f"DeepSpeed {DEEPSPEED_VERSION} inference "
                                                                  "config (deepspeed.init_inference)")
        built = build_launch(spec, target, job, config, INFERENCE_ENV)
        how = "kernel injection" if cfg["replace_with_kernel_inject"] else "AutoTP" if target.parallel.tp > 1 \
            else "no sharding"
        built.notes.insert(0, f"{INFERENCE_FILE}: tp_size {target.parallel.tp} ({how}), dtype {cfg['dtype']}")
        transformers = stack_versions(target)[0]
        if (spec.model.family == "bloom" and target.parallel.tp > 1 and not target.parallel.kernel_inject
                and accelerator_of(target) != "cpu" and transformers
                and _major_minor(transformers) > BLOOM_LAST_TRANSFORMERS):
            built.warnings.append(f"AutoTP of BLOOM failed on CPU with transformers {transformers} (alibi not "
                                  f"sharded); not verified on {target.device}")
        return built

    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        from accelctl.backends.deepspeed.check import check_results

        return check_results(plan, spec)
