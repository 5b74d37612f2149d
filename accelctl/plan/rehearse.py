"""``--rehearse``: an accelerator target's plan run on this CPU with the stand-in.

Never what the target runs: a cheap dress rehearsal of the same task, data, measure, batch
arithmetic and parallel strategy where it runs on a CPU (sizes fitted to the stand-in and this
machine's cores), with random weights, and marked a rehearsal everywhere it is shown.
``--rehearse --fp8`` (fp8 targets only, else E585): the target's FP8 recipe emulated beside the
baseline precision in one process (``accelctl.worker.fp8_rehearsal``).
"""

from __future__ import annotations


from accelctl.contract.plan import Rehearsal
from accelctl.errors import Diagnostic, PlanError
from accelctl.contract import hostfacts
from accelctl.plan.rehearsal_size import SIZE
from accelctl.catalog import DEVICES
from accelctl.models.parallel_plans import PIPELINE_FAMILIES, PLANS
from accelctl.models.parallel_rules import positions
from accelctl.workload.options import OPTIONS, TargetOptions
from accelctl.language.schema import INFERENCE_STRATEGIES
from accelctl.workload.types import Fp8Recipe, ParallelSpec, PrecisionSpec, TargetSpec, WorkloadSpec
from accelctl.frozen import replace

#: the catalog's host device (the CPU accelctl runs on)
HOST = next(name for name, d in DEVICES.items() if d.host)
#: layouts whose tensor parallel a rehearsal keeps (the worker's, on gloo ranks): tensor, fsdp × tensor
TENSOR_REHEARSED = ("tensor", "fsdp")


def rehearsed_options(options: TargetOptions) -> TargetOptions:
    """The options that still mean something on this CPU (their rows say which); the rest unset."""
    return TargetOptions(**{k: v for k, v in options.written().items() if OPTIONS[k].rehearsed})


def rehearsal_target(spec: WorkloadSpec, target: TargetSpec, fp8: bool = False) -> tuple[TargetSpec, Rehearsal]:
    """``target`` moved onto this CPU: host device, at most one process per core, a precision
    the CPU runs, the parallel layout where it runs here; everything else as written.
    ``fp8``: the FP8 rehearsal (one process, the recipe kept beside a baseline precision)."""
    if fp8:
        return _fp8_rehearsal_target(spec, target)
    changes: list[str] = []
    world = min(target.world_size, max(1, hostfacts.current().cores))
    if target.parallel.strategy in INFERENCE_STRATEGIES and target.parallel.tp > 1:
        world = 1  # tensor-parallel inference: one process per shard, and the stand-in is one shard
    if world != target.world_size:
        changes.append(f"{target.world_size} processes -> {world} (one per core of this machine)")
    precision = target.precision
    if precision.dtype == "fp8" and precision.fp8 is not None and precision.fp8.library == "torchao":
        changes.append("fp8 (torchao float8) emulated on this CPU: the casts and scales of the GPU, "
                       "the matmuls in higher precision")
    elif precision.dtype == "fp8":
        precision = PrecisionSpec(dtype="fp32")
        changes.append("fp8 -> fp32 (Transformer Engine/HPU FP8 does not run on a CPU)")
    elif precision.dtype in ("bf16", "fp16") and not cpu_has_native(precision.dtype):
        changes.append(f"{precision.dtype} -> fp32 (this CPU has no native {precision.dtype})")
        precision = PrecisionSpec(dtype="fp32")
    parallel, world, kept = _tensor_here(spec, target.parallel, world, changes)
    parallel, world, staged = _pipeline_here(spec, parallel, world, target.batch.accumulation, changes)
    parallel = _parallel_here(parallel, world, changes, keep_tp=kept, keep_pp=staged)
    dropped = sorted(k for k in target.options.written() if not OPTIONS[k].rehearsed)
    if dropped:
        changes.append("device options not rehearsed: " + ", ".join(dropped))
    if target.nodes > 1:
        changes.append(f"{target.nodes} nodes -> 1 (engine {target.engine} -> local)")
    moved = replace(
        target, device=HOST, instance="", nodes=1, devices=world, price_per_hour=None, price_from="", memory_bytes=0,
        parallel=parallel, precision=precision, engine="local", backend="",
        batch=replace(target.batch, global_size=None),
        options=rehearsed_options(target.options))
    return moved, Rehearsal(of=target.name, device=target.device, world_size=target.world_size,
                            changes=tuple(changes))


def _tensored(spec: WorkloadSpec, p: ParallelSpec) -> bool:
    """Whether ``p`` is the worker's tensor parallel (not DeepSpeed's ``zero(tp)``, not
    generation) of a training task whose family has a parallelize plan."""
    return p.tp > 1 and p.strategy in TENSOR_REHEARSED and spec.task.training and spec.model.family in PLANS


def rehearsal_tp(spec: WorkloadSpec, p: ParallelSpec, world: int) -> int:
    """The tensor-parallel size a rehearsal of ``p`` runs with ``world`` processes: the largest
    divisor of the target's tp that fits them and the stand-in's heads (and key/value heads);
    1 where none does, or where the layout is not the worker's tensor parallel (DeepSpeed's
    ``zero(tp)``, generation)."""
    if not _tensored(spec, p):
        return 1
    shape = spec.model.stand_in
    heads = int(shape.get("heads", 1) or 1)
    kv = int(shape.get("kv_heads", heads) or heads)
    return max(d for d in range(1, min(p.tp, world) + 1) if p.tp % d == 0 and heads % d == 0 and kv % d == 0)


def _tensor_here(spec: WorkloadSpec, p: ParallelSpec, world: int, changes: list[str]
                 ) -> tuple[ParallelSpec, int, bool]:
    """Tensor parallel (``tensor``, ``fsdp(tp)``) kept on gloo ranks with the stand-in, at the
    ``rehearsal_tp`` it takes here, and the processes a whole number of tp groups; whether kept."""
    tp = rehearsal_tp(spec, p, world)
    if tp == 1:
        if _tensored(spec, p):
            shape = spec.model.stand_in
            changes.append(f"tensor parallel (tp {p.tp}) -> 1: no tp of 2 or more divides the stand-in's "
                           f"{shape.get('heads')} heads and {shape.get('kv_heads', shape.get('heads'))} key/value "
                           f"heads and fits this machine's {world} processes")
            p = replace(p, tp=1, sequence_parallel=False,
                        strategy="fsdp" if p.strategy == "fsdp" else "data" if world > 1 else "none")
        return p, world, False
    if tp != p.tp:
        changes.append(f"tensor parallel tp {p.tp} -> {tp} (the stand-in's {spec.model.stand_in.get('heads')} heads "
                       f"over this machine's {world} processes)")
    if world % tp:
        changes.append(f"{world} processes -> {world - world % tp} (whole tp groups of {tp})")
        world -= world % tp
    sp = p.sequence_parallel
    n, made_of = positions(spec.model.family, spec.model.stand_in, min(spec.dataset.seq_len, SIZE["seq_len"]),
                           spec.dataset.image_size)
    if sp and n % tp:
        changes.append(f"sequence parallel off: the rehearsal's {n} positions ({made_of}) do not divide by tp {tp}")
        sp = False
    return replace(p, tp=tp, sequence_parallel=sp), world, True


def _stage_limits(spec: WorkloadSpec, p: ParallelSpec, world: int, accumulation: int) -> dict[str, int]:
    """What caps a rehearsal's pipeline stages, each with its cap: the target's pp, the
    processes here, the stand-in's layers (a block per stage at least), and for 1F1B the
    rehearsal's micro-batches (one per stage in flight)."""
    layers = int(spec.model.stand_in.get("layers", 1) or 1)
    limits = {f"the target's pp {p.pp}": p.pp, f"this machine's {world} processes": world,
              f"the stand-in's {layers} layers": layers}
    if p.schedule == "one_f_one_b":
        acc = min(accumulation, SIZE["accumulation"])
        limits[f"one_f_one_b's micro-batch per stage in flight (the rehearsal's accumulation {acc})"] = acc
    return limits


def _staged(spec: WorkloadSpec, p: ParallelSpec) -> bool:
    """Whether ``p`` is the worker's pipeline (not DeepSpeed's ``zero(pp)``) of a training
    task whose family has a stage split."""
    return (p.pp > 1 and p.strategy == "pipeline" and spec.task.training
            and spec.model.family in PIPELINE_FAMILIES)


def rehearsal_pp(spec: WorkloadSpec, p: ParallelSpec, world: int, accumulation: int) -> int:
    """The pipeline size a rehearsal of ``p`` runs with ``world`` processes: the most stages,
    up to the target's pp, that the processes hold and the stand-in's layers fill (split as
    ``mesh.stage_layers`` splits the target's), for 1F1B no more than the micro-batches in
    flight; 1 where ``p`` is not ``_staged``."""
    return max(1, min(_stage_limits(spec, p, world, accumulation).values())) if _staged(spec, p) else 1


def _pipeline_here(spec: WorkloadSpec, p: ParallelSpec, world: int, accumulation: int, changes: list[str]
                   ) -> tuple[ParallelSpec, int, bool]:
    """Pipeline parallel kept on gloo ranks with the stand-in, at the ``rehearsal_pp`` it takes
    here, its schedule as written, and the processes a whole number of pipelines; whether kept."""
    if not _staged(spec, p):
        return p, world, False  # flattened by _parallel_here where pp > 1 (DeepSpeed's zero(pp))
    pp = rehearsal_pp(spec, p, world, accumulation)
    why = " and ".join(k for k, v in _stage_limits(spec, p, world, accumulation).items() if v == pp)
    if pp == 1:
        changes.append(f"pipeline parallel (pp {p.pp}) -> 1: no 2 stages fit {why}; schedule {p.schedule} dropped")
        return replace(p, pp=1, strategy="data" if world > 1 else "none"), world, False
    if pp != p.pp:
        changes.append(f"pipeline parallel pp {p.pp} -> {pp} ({why}; schedule {p.schedule} kept)")
    if world % pp:
        changes.append(f"{world} processes -> {world - world % pp} (whole pipelines of {pp} stages)")
        world -= world % pp
    return replace(p, pp=pp), world, True


def _parallel_here(p: ParallelSpec, world: int, changes: list[str], keep_tp: bool = False,
                   keep_pp: bool = False) -> ParallelSpec:
    if (p.pp > 1 and not keep_pp) or (p.tp > 1 and not keep_tp):
        changes.append(f"tensor/pipeline parallel (tp {p.tp}, pp {p.pp}) -> 1: each process holds the whole stand-in")
        p = replace(p, tp=1, pp=1, sequence_parallel=False)
        if p.strategy in ("tensor", "pipeline"):
            p = replace(p, strategy="data" if world > 1 else "none")
    if p.kernel_inject:
        changes.append("DeepSpeed kernel injection off (its kernels are CUDA-only)")
        p = replace(p, kernel_inject=False)
    if p.offload != "none":  # FSDP2 offload (the zero stages have their own keys)
        changes.append("FSDP CPU offload -> none: the shards already live in this CPU's memory "
                       "(torch's CPUOffloadPolicy moves them off a GPU)")
        p = replace(p, offload="none")
    if p.offload_optimizer == "nvme" or p.offload_param == "nvme":
        changes.append("NVMe offload -> none")
        p = replace(p, offload_optimizer="none", offload_param="none")
    return p


def cpu_has_native(dtype: str) -> bool:
    """Whether the CPU the plan is compiled for computes ``dtype`` natively (its host facts)."""
    return hostfacts.current().has_native(dtype)


def fp8_baseline() -> str:
    """The FP8 rehearsal's baseline precision: bf16 where this CPU has it natively (TE's FP8
    runs inside bf16 autocast), else fp32 (emulated bf16 is far slower).
    """
    return "bf16" if cpu_has_native("bf16") else "fp32"


def _fp8_rehearsal_target(spec: WorkloadSpec, target: TargetSpec) -> tuple[TargetSpec, Rehearsal]:
    if target.precision.dtype != "fp8":
        raise PlanError(diagnostics=[Diagnostic(
            "E585", f"--fp8 rehearses an FP8 recipe; target {target.name} has precision {target.precision.dtype}",
            spec.origin_of(target.name, "precision") or spec.origins.get(f"targets.{target.name}"),
            spec.path, "name a target with `precision fp8 { ... }`, or drop --fp8 for a plain rehearsal")])
    recipe = target.precision.fp8 or Fp8Recipe()
    baseline = fp8_baseline()
    changes = [f"fp8 ({recipe.format}, amax_history {recipe.amax_history}, {recipe.amax_algo}, margin "
               f"{recipe.margin}) -> emulated on this CPU, side by side with the same model in {baseline} "
               "(same weights, same batches)"]
    if target.world_size > 1 or target.parallel.strategy != "none":
        changes.append(f"{target.world_size} processes, parallel {target.parallel.strategy} -> 1 process (both arms in it)")
    dropped = sorted(k for k in target.options.written() if not OPTIONS[k].rehearsed)
    if dropped:
        changes.append("device options not rehearsed: " + ", ".join(dropped))
    moved = replace(
        target, device=HOST, instance="", nodes=1, devices=1, price_per_hour=None, price_from="", memory_bytes=0,
        parallel=ParallelSpec(), precision=PrecisionSpec(dtype=baseline, fp8=recipe), engine="local", backend="",
        batch=replace(target.batch, global_size=None),
        options=rehearsed_options(target.options))
    return moved, Rehearsal(of=target.name, device=target.device, world_size=target.world_size,
                            changes=tuple(changes))


def first_fp8_target(spec: WorkloadSpec) -> TargetSpec:
    """The target ``--rehearse --fp8`` stands for when none is named: the first fp8 target."""
    for t in spec.targets:
        if t.precision.dtype == "fp8":
            return t
    raise PlanError(diagnostics=[Diagnostic(
        "E586", f"workload {spec.name} has no target with precision fp8 to rehearse with --fp8",
        spec.origins.get("workload") or next(iter(spec.origins.values()), None), spec.path, "add `precision fp8 { format = hybrid }` to an H100/Gaudi2 target")])
