"""Targets, precision, parallelism and engines of the check pass, with the cross-field rules.

Each target gets its effective settings (workload values plus its overrides) and is
checked against the catalog: device capabilities (fp8, HPU graphs, CNN training on
Neuron), instance size, batch arithmetic, parallel layout.
"""

from __future__ import annotations

from typing import Any

from accelctl.dsl import ast
from accelctl.errors import Span, did_you_mean
from accelctl.families import FAMILIES as DEVICE_FAMILIES
from accelctl.hostinfo import CPU_16BIT_HINT
from accelctl.models import parallel_rules
from accelctl.language import schema as S
from accelctl.catalog import DEVICES, INSTANCES, holder
from accelctl.language.check_blocks import check_measure, check_optimize, check_optimizer, optimize_values
from accelctl.language.check_common import Origins, call_kwargs, items_by_key, plain_block, typed_entries
from accelctl.models.catalog import FAMILIES
from accelctl.workload.options import TargetOptions
from accelctl.language.stack import check_stack
from accelctl.language.stack import resolve as resolve_stack
from accelctl.workload.types import (
    BatchSpec,
    EngineSpec,
    Fp8Recipe,
    MeasureSpec,
    ModelSpec,
    OptimizeSpec,
    ParallelSpec,
    PrecisionSpec,
    TargetSpec,
    TaskSpec,
)
from accelctl.language.values import Ctx

#: a target option that only some device families take -> those families (from their rows)
FAMILIES_OF_OPTION: dict[str, tuple[str, ...]] = {
    opt: tuple(f.name for f in DEVICE_FAMILIES.values() if opt in f.options)
    for f in DEVICE_FAMILIES.values() for opt in f.options}

FP8_DEVICES = tuple(d.name for d in DEVICES.values() if d.fp8)
#: where fp8 plans, by family (FP8 hardware of a family with an FP8 backend): "h100, l4, l40s (CUDA)"
FP8_WHERE = " or ".join(f"{', '.join(d for d in FP8_DEVICES if DEVICES[d].adapter == fam)} ({f.sdk_title or f.name})"
                        for fam, f in DEVICE_FAMILIES.items()
                        if f.fp8_built and any(DEVICES[d].adapter == fam for d in FP8_DEVICES))


def check_precision(it: ast.Item | None, ctx: Ctx, origins: Origins, path: str) -> PrecisionSpec | None:
    """``precision bf16``, ``precision fp8(format = hybrid)`` or ``precision fp8 { ... }``."""
    if it is None:
        return None
    header = it.header if isinstance(it, ast.Block) else it.value
    if not isinstance(header, (ast.Word, ast.Call)):
        ctx.error("E301", "precision must be one of " + ", ".join(S.PRECISIONS), it.span)
        return None
    if header.name not in S.PRECISIONS:
        ctx.error("E203", f"unknown precision '{header.name}'", header.span, did_you_mean(header.name, S.PRECISIONS))
        return None
    origins.add(path, it.span)
    recipe: dict[str, Any] = {}
    if isinstance(header, ast.Call):
        recipe.update(call_kwargs(header, S.FP8_KEYS, ctx, f"{header.name}(...)"))
    if isinstance(it, ast.Block):
        recipe.update(typed_entries(items_by_key(it.items, ctx), S.FP8_KEYS, ctx, "precision", origins, path))
    if recipe and header.name != "fp8":
        ctx.error("E202", f"recipe settings apply to fp8 only, not {header.name}", it.span,
                  "remove them or use precision fp8 { ... }")
        recipe = {}
    delayed = [k for k in S.FP8_DELAYED_SCALING_KEYS if k in recipe]
    if recipe.get("library") == "torchao" and delayed:
        ctx.error("E202", f"{', '.join(delayed)}: delayed-scaling settings of Transformer Engine; torchao's "
                  "float8 scales dynamically", it.span, "remove them, or use library = transformer_engine")
        recipe = {k: v for k, v in recipe.items() if k not in delayed}
    if "recipe" in recipe and recipe.get("library") != "torchao":
        ctx.error("E202", "recipe: a torchao float8 recipe (tensorwise, rowwise); Transformer Engine's scaling is "
                  "delayed", it.span, "add library = torchao, or remove recipe")
        recipe.pop("recipe")
    if recipe.get("recipe") == "rowwise" and recipe.get("format") == "hybrid":
        ctx.error("E202", "format = hybrid with recipe = rowwise: torchao's rowwise recipe casts input, weight and "
                  "gradient to E4M3", it.span, "remove format, or use recipe = tensorwise")
        recipe.pop("format")
    if recipe.get("recipe") == "rowwise":
        recipe["format"] = "e4m3"
    fp8 = Fp8Recipe(**recipe) if header.name == "fp8" else None
    return PrecisionSpec(dtype=header.name, fp8=fp8)


def check_engines(items: list[ast.Item], ctx: Ctx, origins: Origins) -> dict[str, EngineSpec]:
    out: dict[str, EngineSpec] = {}
    for it in items:
        header = it.header if isinstance(it, ast.Block) else it.value
        if not isinstance(header, ast.Word):
            ctx.error("E207", "engine needs a kind", it.span, "write engine slurm { ... }")
            continue
        if header.name not in S.ENGINE_KEYS:
            ctx.error("E508", f"unknown engine '{header.name}'", header.span, did_you_mean(header.name, S.ENGINE_KEYS))
            continue
        if header.name in out:
            ctx.error("E204", f"duplicate engine '{header.name}'", header.span)
            continue
        body = items_by_key(it.items if isinstance(it, ast.Block) else (), ctx)
        settings = typed_entries(body, S.ENGINE_KEYS[header.name], ctx, f"engine {header.name}", origins,
                                 f"engines.{header.name}")
        out[header.name] = EngineSpec(kind=header.name, settings=settings)
    return out


def check_parallel(v: ast.Value, ctx: Ctx) -> ParallelSpec | None:
    name = v.name if isinstance(v, (ast.Word, ast.Call)) else None
    if name is None:
        ctx.error("E301", "parallel must be a strategy like zero(stage = 1)", v.span)
        return None
    name = S.PARALLEL_ALIASES.get(name, name)
    if name not in S.PARALLEL_STRATEGIES:
        ctx.error("E203", f"unknown parallel strategy '{name}'", getattr(v, "name_span", v.span),
                  did_you_mean(name, S.PARALLEL_STRATEGIES))
        return None
    allowed = {k: S.PARALLEL_ARGS[k] for k in S.PARALLEL_STRATEGIES[name]}
    args = call_kwargs(v, allowed, ctx, f"{name}(...)") if isinstance(v, ast.Call) else {}
    stage = args.pop("stage", 0)
    if name == "zero" and not 0 <= stage <= 3:
        span = next(k.span for k in v.kwargs if k.name == "stage")
        ctx.error("E403", f"ZeRO stage {stage} does not exist", span, "ZeRO stages are 0, 1, 2 and 3")
        return None
    p = ParallelSpec(strategy=name, zero_stage=stage, **args)
    if p.offload_optimizer != "none" and p.zero_stage < 1:
        ctx.error("E410", "optimizer offload needs ZeRO stage 1 or more", v.span, "set stage = 1, 2 or 3")
    if p.offload_param != "none" and p.zero_stage != 3:
        ctx.error("E410", "parameter offload needs ZeRO stage 3", v.span, "set stage = 3")
    return p


def _resolve_device(name: str, vals: dict, items: dict, ctx: Ctx, span: Span) -> str | None:
    inst = INSTANCES.get(vals.get("instance", ""))
    if "instance" in vals and inst is None and "device" not in vals:
        ctx.error("E503", f"unknown instance type '{vals['instance']}'", items["instance"].value.span,
                  did_you_mean(vals["instance"], INSTANCES) or "add device = <kind> to use an instance we don't know")
        return None
    device = vals.get("device") or (inst.device if inst else None) or (name if name in DEVICES else None)
    if device is None and "device" in items:
        return None  # the bad device value is already reported
    if device is None:
        close = did_you_mean(name, DEVICES)
        ctx.error("E207", f"target {name} needs a device", span,
                  f"add device = <{'|'.join(sorted(DEVICES))}> or a known instance = ..."
                  + (f"; {close}" if close.startswith("did you mean") else ""))
        return None
    if inst is not None and "device" in vals and inst.device != vals["device"]:
        ctx.error("E507", f"{inst.name} has {inst.device} devices, not {vals['device']}", items["device"].span,
                  f"use device = {inst.device} or another instance type")
    return device


def check_target(it: ast.Item, wl_batch: ast.Item | None, bs: tuple[int, Span] | None,
                 precision: PrecisionSpec | None, gc: bool, task: TaskSpec | None, model: ModelSpec | None,
                 engines: dict[str, EngineSpec], ctx: Ctx, origins: Origins,
                 wl_optimize: OptimizeSpec = OptimizeSpec(), wl_measure: MeasureSpec = MeasureSpec(),
                 wl_stack: dict[str, Any] | None = None) -> TargetSpec | None:
    header = it.header if isinstance(it, ast.Block) else it.value
    if not isinstance(header, ast.Word):
        ctx.error("E207", "target needs a name", it.span, "write target <name> { device = ... }")
        return None
    name = header.name
    pre = f"targets.{name}"
    origins.add(pre, it.span)
    items = items_by_key(it.items if isinstance(it, ast.Block) else (), ctx)
    vals = typed_entries(items, S.TARGET_KEYS, ctx, f"target {name}", origins, pre, extra_ok=S.TARGET_SPECIAL)
    device = _resolve_device(name, vals, items, ctx, header.span)
    if device is None:
        return None
    dev = DEVICES[device]
    inst = INSTANCES.get(vals.get("instance", ""))
    devices = vals.get("devices", inst.devices if inst else 1)
    if inst is not None and devices > inst.devices:
        ctx.error("E504", f"{inst.name} has {inst.devices} {device} devices, not {devices}", items["devices"].span,
                  f"use devices = {inst.devices} per node and raise nodes instead")
    nodes = vals.get("nodes", 1)
    price, price_from = vals.get("price"), ""
    if price is None and inst is not None and inst.price_per_hour is not None:
        price, price_from = inst.price_per_hour * nodes, inst.name
    elif price is None and inst is None and not dev.host and (by := holder(device, devices)) is not None:
        price, price_from = by.price_per_hour * nodes, by.name
    # effective precision, parallel layout and batch
    prec = precision or PrecisionSpec()
    if "precision" in items:
        pi = items["precision"]
        pi = ast.Statement("precision", pi.value, pi.span, pi.key_span) if isinstance(pi, ast.Entry) else pi
        prec = check_precision(pi, ctx, origins, f"{pre}.precision") or prec
    parallel = ParallelSpec()
    if "parallel" in items:
        pv = items["parallel"]
        if isinstance(pv, ast.Entry):
            parallel = check_parallel(pv.value, ctx) or parallel
            origins.add(f"{pre}.parallel", pv.span)
        else:
            ctx.error("E208", "missing '=' after 'parallel'", pv.span, "write parallel = zero(stage = 1)")
    batch = _batch(wl_batch, items.get("batch"), bs, vals, ctx, origins, pre)
    measure = check_measure(items["measure"], ctx, origins, f"{pre}.measure") if "measure" in items else None
    optimizer = (check_optimizer(items["optimizer"], ctx, origins, task, f"{pre}.optimizer")
                 if "optimizer" in items else None)
    options = TargetOptions(**{k: vals[k] for k in S.TARGET_OPTIONS if k in vals})
    optimize = check_optimize(optimize_values(items.get("optimize"), ctx, origins, f"{pre}.optimize"), wl_optimize,
                              model, ctx, origins, f"{pre}.optimize")
    own_stack = check_stack(items["stack"], ctx, origins, f"{pre}.stack") if "stack" in items else {}
    t = TargetSpec(name=name, device=device, instance=vals.get("instance", ""), nodes=nodes, devices=devices,
                   price_per_hour=price, price_from=price_from, memory_bytes=vals.get("memory", dev.memory_bytes), parallel=parallel,
                   precision=prec, batch=batch, gradient_checkpointing=vals.get("gradient_checkpointing", gc),
                   engine=vals.get("engine", "local"), backend=vals.get("backend", ""), options=options,
                   measure=measure, optimizer=optimizer, optimize=optimize,
                   stack=resolve_stack(wl_stack or {}, own_stack, device, ctx, origins, name))
    _rules(t, items, task, model, ctx, it.span, origins)
    _optimize_rules(t, task, measure or wl_measure, ctx, origins)
    return t


def batch_values(blk: ast.Item | None, ctx: Ctx, origins: Origins, path: str) -> dict[str, Any]:
    """The typed entries of a ``batch { ... }`` block (empty when absent)."""
    if blk is None:
        return {}
    if not plain_block(blk, ctx, "batch", "write batch { micro = 8  accumulation = 1 }"):
        return {}
    return typed_entries(items_by_key(blk.items, ctx), S.BATCH_KEYS, ctx, "batch", origins, path)


def _batch(wl_batch: dict[str, Any], tgt_batch, bs, vals, ctx, origins, pre) -> BatchSpec:
    merged = dict(wl_batch)
    if bs is not None:
        merged["micro"] = bs[0]
    merged.update(batch_values(tgt_batch, ctx, origins, f"{pre}.batch"))
    if "micro_batch" in vals:
        merged["micro"] = vals["micro_batch"]
    return BatchSpec(micro=merged.get("micro", 1), accumulation=merged.get("accumulation", 1),
                     global_size=merged.get("global"))


def _where(items: dict, keys: tuple[str, ...], default: Span) -> Span:
    """The span of the first of ``keys`` written in the target, else ``default``."""
    for k in keys:
        if k in items:
            return items[k].span
    return default


def _rules(t: TargetSpec, items: dict, task: TaskSpec | None, model: ModelSpec | None, ctx: Ctx, span: Span,
           origins: Origins):
    """Cross-field rules of one target, each with a fix in its hint."""
    dev = DEVICES[t.device]
    p = t.parallel
    at = (items.get("parallel") or items.get("devices") or ast.Word(t.name, span)).span
    if t.world_size % (p.tp * p.pp):
        ctx.error("E402", f"{t.world_size} devices are not divisible by tensor × pipeline = {p.tp} × {p.pp}", at,
                  "make nodes × devices a multiple of tp × pp")
    elif t.batch.global_size is not None:
        want = t.batch.micro * t.batch.accumulation * t.data_parallel
        if want != t.batch.global_size:
            ctx.error("E401", f"target {t.name}: global batch {t.batch.global_size} ≠ micro × accumulation × data-parallel = "
                      f"{t.batch.micro} × {t.batch.accumulation} × {t.data_parallel} = {want}",
                      _where(items, ("batch", "micro_batch"), origins.get("batch.global", span)),
                      f"set global = {want}, or change micro/accumulation for target {t.name}")
    if model is not None and model.family:
        # the shape this target runs: the stand-in on the host, the real model elsewhere
        shape = model.stand_in if dev.host or not model.real_shape else model.real_shape
        for message, hint in parallel_rules.problems(p, model.family, shape, t.batch.accumulation,
                                                     nxd=dev.nxd_tensor_parallel,
                                                     training=task is None or task.training):
            ctx.error(parallel_rules.CODE, f"target {t.name}: {message}", at, hint)
    if task is not None:
        if task.training and p.strategy in S.INFERENCE_STRATEGIES:
            ctx.error("E411", f"{p.strategy} is for generate/infer tasks", at, "use zero(stage = ...)")
        if not task.training and p.strategy in S.TRAINING_STRATEGIES:
            ctx.error("E411", f"{p.strategy} shards training state; this is a {task.kind} task", at,
                      "use deepspeed_inference(tp = N)")
        if not task.training and p.sequence_parallel:
            ctx.error("E411", f"sequence_parallel splits the activations training keeps for backward; this is a "
                      f"{task.kind} task", at, "remove sequence_parallel")
    if t.precision.dtype == "fp8" and not dev.fp8:
        ctx.error("E501", f"fp8 is not available on {t.device}", items.get("precision", items.get(
            "device", ast.Word(t.name, span))).span,
                  f"fp8 runs on {FP8_WHERE}; set precision = bf16 for target {t.name}")
    for opt, families in FAMILIES_OF_OPTION.items():
        if getattr(t.options, opt) and dev.adapter not in families:
            ctx.error("E505", f"{opt} is for {' and '.join(families)} devices, not {t.device}", items[opt].span,
                      f"remove {opt} from target {t.name}")
    if t.options.xla_use_bf16 and t.precision.dtype != "bf16":
        ctx.error("E243", f"xla_use_bf16 = on is bf16 throughout; target {t.name} runs {t.precision.dtype}",
                  items["xla_use_bf16"].span, f"set precision = bf16 for target {t.name}, or remove xla_use_bf16")
    if (task is not None and model is not None and task.training and not dev.trains_convolutions
            and FAMILIES[model.family].convolutional):
        ctx.error("E506", f"the Neuron SDK cannot train convolutional models ({model.family}) on {t.device}",
                  items.get("device", ast.Word(t.name, span)).span, "use a transformer model or another device")
    if dev.host and t.precision.dtype in ("bf16", "fp16"):
        # point at the precision that applies: the target's own, else the workload's
        where = items["precision"].span if "precision" in items else origins.get("precision", span)
        ctx.warn("W601", f"target {t.name} runs {t.precision.dtype} on a CPU", where, CPU_16BIT_HINT)
    recipe = t.precision.fp8
    # an accelerator with FP8 cores (torchao's float8 elsewhere than a GPU is E520 at the plan)
    if recipe is not None and recipe.library == "torchao" and dev.fp8 and not dev.host and not t.optimize.compile:
        where = items["precision"].span if "precision" in items else origins.get("precision", span)
        ctx.warn("W602", f"target {t.name} runs torchao float8 uncompiled: eager, its casts and amax reductions "
                 "are separate kernels (an H100 measured ViT-H/14 at 0.32x of bf16, 623 ms vs 199 ms)", where,
                 "set optimize { compile = on } (under fsdp(tp = N), where accelctl does not compile yet, "
                 "use bf16, or fsdp without tp)")


def check_sequence_split(targets, model: ModelSpec | None, dataset, ctx: Ctx, origins: Origins) -> None:
    """E416 where sequence parallel cannot split the sequence a target runs evenly over tp
    (after the dataset is known: its seq_len, or a ViT's patches and class token)."""
    if model is None or dataset is None or not model.family:
        return
    for t in targets:
        shape = model.stand_in if DEVICES[t.device].host or not model.real_shape else model.real_shape
        problem = parallel_rules.sequence_problem(t.parallel, model.family, shape, dataset.seq_len, dataset.image_size)
        if problem is not None:
            where = origins.get(f"targets.{t.name}.parallel") or origins.get(f"targets.{t.name}")
            ctx.error(parallel_rules.CODE, f"target {t.name}: {problem[0]}", where, problem[1])


def _optimize_rules(t: TargetSpec, task: TaskSpec | None, measure: MeasureSpec, ctx: Ctx, origins: Origins) -> None:
    """What ``optimize { compile = on }`` needs of the task and the measurement: generation
    compiled needs a static KV cache (E224: a cache that grows every token is a new shape
    every token, a recompilation each), and two warm-up steps (E225: the first warm-up step
    counts FLOPs in eager mode, the second compiles; compilation must not land in a measured
    step)."""
    if not t.optimize.compile or task is None:
        return
    where = origins.get(f"targets.{t.name}.optimize.compile") or origins.get("optimize.compile")
    if task.kind == "generate" and not (task.kv_cache and task.kv_cache_layout == "static"):
        ctx.error("E224", f"compile = on for generation (target {t.name}) needs kv_cache = static", where,
                  "a dynamic KV cache grows by a token each step, a new shape and a recompilation per token: "
                  "write kv_cache = static in task generate, or compile = off")
    if measure.warmup < 2:
        ctx.error("E225", f"compile = on needs 2 warm-up steps or more; target {t.name} warms up {measure.warmup}",
                  where, "the first warm-up step counts FLOPs in eager mode and the second compiles, so that "
                  "compilation stays out of the measured steps: write measure { warmup = 2 steps ... }")


def check_targets(items: list[ast.Item], wl_batch, bs, precision, gc, task, model, engines, ctx: Ctx,
                  origins: Origins, wspan: Span, optimize: OptimizeSpec = OptimizeSpec(),
                  measure: MeasureSpec = MeasureSpec(), stack: dict[str, Any] | None = None) -> tuple[TargetSpec, ...]:
    out: list[TargetSpec] = []
    seen: dict[str, ast.Item] = {}
    for it in items:
        header = it.header if isinstance(it, ast.Block) else it.value
        nm = getattr(header, "name", None)
        if nm in seen:
            ctx.error("E205", f"duplicate target '{nm}'", header.span,
                      f"already defined at line {seen[nm].span.line}; rename one")
            continue
        if nm:
            seen[nm] = it
        t = check_target(it, wl_batch, bs, precision, gc, task, model, engines, ctx, origins, optimize, measure, stack)
        if t is not None:
            out.append(t)
    if not items:
        implicit = ast.Block("target", ast.Word("cpu", wspan), (), wspan, wspan)
        t = check_target(implicit, wl_batch, bs, precision, gc, task, model, engines, ctx, origins, optimize,
                         measure, stack)
        if t is not None:
            out.append(t)
    return tuple(out)
