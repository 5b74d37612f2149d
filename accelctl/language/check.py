"""The check pass: AST -> frozen, typed WorkloadSpecs, or every diagnostic at once.

``check(file)`` walks each workload, coerces every value through the schema tables
(``accelctl.language.schema``), resolves each target's effective settings
(``accelctl.language.targets``) and runs the cross-field rules.  It never stops at the
first problem: all diagnostics of a file are collected, then raised together.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from accelctl.dsl import ast
from accelctl.dsl.lexemes import value_problems
from accelctl.errors import Diagnostic, Span, WorkloadError, attach_source, did_you_mean
from accelctl.language import schema as S
from accelctl.language import values as V
from accelctl.language import check_shape as CS
from accelctl.language.check_blocks import check_measure, check_optimize, check_optimizer, optimize_values
from accelctl.language.check_common import Origins, call_kwargs, items_by_key, plain_block, single_string_arg, typed_entries
from accelctl.language.check_dataset import check_dataset, resolve_dataset
from accelctl.models.catalog import (FAMILIES, KNOWN_MODELS, WRITTEN, MAX_SIZE, OPTIONAL, real_architecture, shape_problems,
                                  stand_in_for)
from accelctl.language.stack import check_stack
from accelctl.language.targets import (batch_values, check_engines, check_precision, check_sequence_split,
                                   check_targets)
from accelctl.workload.types import (
    CheckpointSpec,
    ModelSpec,
    OptimizeSpec,
    TaskSpec,
    TrackSpec,
    WorkloadSpec,
)
from accelctl.language.values import BAD, Ctx


# ------------------------------------------------------------------------ blocks

def check_task(it: ast.Item | None, ctx: Ctx, origins: Origins, wspan: Span) -> TaskSpec | None:
    if it is None:
        ctx.error("E207", "missing task", wspan, "add e.g. 'task pretrain { ... }' or 'task generate { ... }'")
        return None
    header = it.header if isinstance(it, ast.Block) else it.value
    if not isinstance(header, ast.Word):
        span = header.span if header is not None else it.span
        ctx.error("E207", "task needs a kind", span, "write task pretrain|finetune|generate|infer { ... }")
        return None
    kind = header.name
    if kind not in S.TASK_KINDS:
        ctx.error("E203", f"unknown task '{kind}'", header.span, did_you_mean(kind, S.TASK_KINDS))
        return None
    origins.add("task", it.span)
    items = items_by_key(it.items if isinstance(it, ast.Block) else (), ctx)
    for key, entry in items.items():
        spec = S.TASK_KEYS.get(key)
        if spec is not None and kind not in spec[1] and isinstance(entry, ast.Entry):
            if key in S.GENERATION_KEYS:
                ctx.error("E405", f"generation setting '{key}' on a {kind} task", entry.key_span,
                          "generation settings belong to 'task generate'; remove it or change the task")
            else:
                ctx.error("E406", f"'{key}' does not apply to a {kind} task", entry.key_span,
                          f"'{key}' is for {'/'.join(spec[1])} tasks")
    table = {k: t for k, (t, kinds) in S.TASK_KEYS.items() if kind in kinds}
    ok = {k: v for k, v in items.items() if k in table or k not in S.TASK_KEYS}
    vals = typed_entries(ok, table, ctx, f"task {kind}", origins, "task")
    if kind == "generate" and "max_new_tokens" not in vals and "max_new_tokens" not in items:
        ctx.error("E207", "task generate needs max_new_tokens", header.span, "add max_new_tokens = 100")
    if kind == "generate" and "prompt" not in items:
        vals.setdefault("prompt", "DeepSpeed is a machine learning framework")
    vals.pop("batch_size", None)
    if "kv_cache" in vals:  # "dynamic", "static" or "" (off)
        layout = vals.pop("kv_cache")
        vals.update(kv_cache=bool(layout), kv_cache_layout=layout or "dynamic")
    return TaskSpec(kind=kind, **vals)


def batch_size_of(task_item: ast.Item | None, ctx: Ctx) -> tuple[int, Span] | None:
    """``task ... { batch_size = N }``: shorthand for the micro-batch of inference tasks."""
    if not isinstance(task_item, ast.Block):
        return None
    for e in task_item.items:
        if isinstance(e, ast.Entry) and e.key == "batch_size":
            v = S.TASK_KEYS["batch_size"][0].coerce(e.value, Ctx(ctx.path), "batch_size")
            return (v, e.span) if v is not BAD else None
    return None


@functools.lru_cache(maxsize=None)
def _shape_table(family: str) -> dict[str, V.VType]:
    """The value types of an architecture's size arguments (built once per family)."""
    table = {k: (V.boolean() if isinstance(d, bool) else V.number(positive=True, hi=1e4) if isinstance(d, float)
                 else V.integer(1, MAX_SIZE)) for k, d in FAMILIES[family].shape.items()}
    table.update({k: V.boolean() if k == "attn_bias" else V.integer(1, MAX_SIZE) for k in OPTIONAL.get(family, ())})
    return table


def check_shape(call: ast.Call | ast.Word, ctx: Ctx, what: str) -> tuple[str, dict[str, Any]] | None:
    """``family(layers = 2, hidden = 64, ...)`` -> (family, shape with defaults)."""
    fam = FAMILIES.get(call.name)
    if fam is None or fam.from_module:
        span = call.name_span if isinstance(call, ast.Call) else call.span
        ctx.error("E211", f"unknown model architecture '{call.name}' in {what}", span,
                  "the transformers family is read from a model's own config.json (config = \"path\")"
                  if fam is not None else did_you_mean(call.name, WRITTEN))
        return None
    shape = dict(fam.shape)
    if isinstance(call, ast.Call):
        table = _shape_table(fam.name)
        shape.update(call_kwargs(call, table, ctx, f"{call.name}(...)"))
        for message, hint in shape_problems(shape):
            ctx.error("E407", message, call.span, hint)
    return fam.name, shape


def check_model(it: ast.Item | None, task: TaskSpec | None, ctx: Ctx, origins: Origins,
                wspan: Span, base: Path) -> ModelSpec | None:
    if it is None:
        ctx.error("E207", "missing model", wspan, 'add e.g. model hf("bert-large-uncased") { stand_in = bert() }')
        return None
    origins.add("model", it.span)
    header = it.header if isinstance(it, ast.Block) else it.value
    items = items_by_key(it.items if isinstance(it, ast.Block) else (), ctx)
    opts = typed_entries(items, S.MODEL_KEYS, ctx, "model", origins, "model", extra_ok=("stand_in", "shape"))
    stand_in = None
    if "stand_in" in items:
        si = items["stand_in"]
        if isinstance(si, ast.Entry) and isinstance(si.value, (ast.Call, ast.Word)):
            stand_in = check_shape(si.value, ctx, "stand_in")
        else:
            ctx.error("E301", "stand_in must be an architecture like bloom(layers = 2, hidden = 64, heads = 4)",
                      si.span)
    source, ref, family, real_shape, full_shape, params = "arch", "", opts.get("family"), {}, {}, 0.0
    module_stand_in = None
    if isinstance(header, ast.Call) and header.name in ("hf", "local"):
        source = header.name
        ref = single_string_arg(header, ctx, "Hub id" if source == "hf" else "model path")
        if ref is None:
            return None  # reported (E214/E304); guessing the architecture of no id would only add noise
        known = KNOWN_MODELS.get(ref)
        if known is not None:
            real_shape, params = dict(known.shape), known.params
            if family and family != known.family:
                ctx.error("E409", f"{ref} is a {known.family} model, not {family}", items["family"].span)
            family = known.family
        written = CS.written_shape(items, ctx, check_shape)
        reported = ctx.errors
        got = written or (None if known and "config" not in items
                          else CS.from_config(source, ref, opts, items, ctx, base, header.span))
        if got is None and ctx.errors > reported and not family and stand_in is None:
            return None  # its config.json is reported (E426): no architecture to guess, nothing more to say
        if got is not None:
            if family and family != got[0]:
                where = items["family"].span if "family" in items else header.span
                ctx.error("E409", f"{ref} is a {got[0]} model, not {family}", where)
            family, real_shape, params = got[0], got[1], 0.0
            if FAMILIES[family].from_module:  # the counts, and the stand-in, are the module's own
                real_shape = dict(real_shape)
                module_stand_in, params = real_shape.pop("stand_in"), float(real_shape["params"])
        if source == "local" and ref and not (base / ref).expanduser().exists() and stand_in is None:
            ctx.error("E413", f"model path does not exist: {ref}", header.span,
                      "give the right path, or a stand_in = <arch>(...) to run without the weights")
            return None
    elif isinstance(header, (ast.Call, ast.Word)):
        CS.misplaced(items, header, ctx)
        got = check_shape(header, ctx, "model")
        if got is None:
            return None
        family, full_shape = got
        # the real shape is what was written, unwritten sizes at the real models' usual values
        written = {k.name: full_shape[k.name] for k in getattr(header, "kwargs", ()) if k.name in full_shape}
        real_shape = real_architecture(family, written)
    else:
        ctx.error("E207", "model needs a source", it.span,
                  'write model hf("<hub id>"), model local("<path>") or model <arch>(layers = ..)')
        return None
    if stand_in is not None:
        if family and stand_in[0] != family:
            ctx.error("E409", f"stand_in is a {stand_in[0]} but the model is a {family}", items["stand_in"].span,
                      f"use {family}(...) as the stand-in")
        family = family or stand_in[0]
    if not family:
        ctx.error("E213", f"cannot tell the architecture of {ref!r}", header.span,
                  "add family = <bloom|bert|t5|vit|...> or a stand_in = <arch>(...)")
        return None
    shape = (stand_in[1] if stand_in else full_shape if source == "arch" else module_stand_in
             if module_stand_in is not None else stand_in_for(family, real_shape))
    if task is not None and task.kind not in FAMILIES[family].tasks:
        ctx.error("E408", f"a {family} model cannot do task {task.kind}", it.span,
                  f"{family} supports: {', '.join(FAMILIES[family].tasks)}")
    return ModelSpec(source=source, family=family, ref=ref, stand_in=shape, real_shape=real_shape, params=params,
                     weights=opts.get("weights", "auto"), gradient_checkpointing=opts.get("gradient_checkpointing"))


def check_checkpoint(it: ast.Item | None, ctx: Ctx, origins: Origins, task: TaskSpec | None) -> CheckpointSpec:
    """``checkpoint { every = N steps  keep = K  dir = "path" }`` (training tasks only)."""
    if it is None:
        return CheckpointSpec()
    if not plain_block(it, ctx, "checkpoint", "write checkpoint { every = 100 steps }"):
        return CheckpointSpec()
    if task is not None and not task.training:
        ctx.error("E235", f"checkpoint does not apply to a {task.kind} task", it.kind_span,
                  "checkpoints hold training state (weights, optimizer, data position): remove the block")
    items = items_by_key(it.items, ctx)
    vals = typed_entries(items, S.CHECKPOINT_KEYS, ctx, "checkpoint", origins, "checkpoint")
    if "every" not in items:
        ctx.error("E236", "checkpoint needs every = N steps", it.kind_span, "add every = 100 steps")
    elif "every" in vals:
        origins.add("checkpoint", it.span)
    return CheckpointSpec(**vals)


def check_track(it: ast.Item | None, ctx: Ctx, origins: Origins) -> TrackSpec:
    """``track { mlflow = "URI"  wandb = "project"  experiment = "name"  tensorboard = on }``:
    each value checked where it is written (E592 URI, E593 project); a block that names no
    tracker is E592 too."""
    if it is None:
        return TrackSpec()
    if not plain_block(it, ctx, "track", 'write track { mlflow = "sqlite:///mlflow.db" }'):
        return TrackSpec()
    items = items_by_key(it.items, ctx)
    vals = typed_entries(items, S.TRACK_KEYS, ctx, "track", origins, "track")
    spec = TrackSpec(**vals)
    if not spec.enabled and not any(k in items for k in ("mlflow", "wandb", "tensorboard")):
        ctx.error("E592", "track names no tracker to log to", it.kind_span,
                  'add mlflow = "sqlite:///mlflow.db", wandb = "project" or tensorboard = on')
    elif spec.enabled:
        origins.add("track", it.span)
    return spec


# ------------------------------------------------------------------------ workload

def check_workload(w: ast.Workload, ctx: Ctx, base: Path) -> WorkloadSpec | None:
    origins = Origins()
    items = items_by_key(w.items, ctx, multi=("target", "engine"))
    for key, it in list(items.items()):
        if key in S.WORKLOAD_BLOCKS or key in S.WORKLOAD_KEYS:
            if isinstance(it, ast.Entry) and key in ("precision", "task", "optimizer"):
                items[key] = ast.Statement(key, it.value, it.span, it.key_span)
            continue
        from accelctl.language.glued import glued_hint  # here: only a misspelt block or key needs it

        if isinstance(it, ast.Block):
            ctx.error("E201", f"unknown block '{key}'", it.kind_span,
                      (glued_hint(key) if it.header is None else None) or did_you_mean(key, S.WORKLOAD_BLOCKS))
        else:
            ctx.error("E202", f"unknown key '{key}' in workload {w.name}", it.key_span,
                      glued_hint(key) or did_you_mean(key, [*S.WORKLOAD_KEYS, *S.WORKLOAD_BLOCKS])
                      or f"settings: {', '.join(S.WORKLOAD_KEYS)}; blocks: {', '.join(S.WORKLOAD_BLOCKS)}")
        del items[key]
    plain = {k: v for k, v in items.items() if k in S.WORKLOAD_KEYS}
    top = typed_entries(plain, S.WORKLOAD_KEYS, ctx, f"workload {w.name}", origins, "workload")
    task = check_task(items.get("task"), ctx, origins, w.name_span)
    model = check_model(items.get("model"), task, ctx, origins, w.name_span, base)
    dataset = check_dataset(items.get("dataset"), ctx, origins, base)
    dataset = resolve_dataset(dataset, task, model, ctx, origins)
    measure = check_measure(items.get("measure"), ctx, origins)
    optimizer = check_optimizer(items.get("optimizer"), ctx, origins, task)
    checkpoint = check_checkpoint(items.get("checkpoint"), ctx, origins, task)
    optimize = check_optimize(optimize_values(items.get("optimize"), ctx, origins, "optimize"), OptimizeSpec(),
                              model, ctx, origins, "optimize")
    track = check_track(items.get("track"), ctx, origins)
    precision = check_precision(items.get("precision"), ctx, origins, "precision")
    engines = check_engines(items.get("engine", []), ctx, origins)
    stack = check_stack(items["stack"], ctx, origins, "stack") if "stack" in items else {}
    gc = top.get("gradient_checkpointing", False)
    if model is not None and model.gradient_checkpointing is not None:  # the model block's wins
        gc = model.gradient_checkpointing
    bs = batch_size_of(items.get("task"), ctx)
    wl_batch = batch_values(items.get("batch"), ctx, origins, "batch")
    if bs is not None and "micro" in wl_batch:
        ctx.error("E204", "batch size set twice: task batch_size and batch micro", bs[1], "keep one of them")
    targets = check_targets(items.get("target", []), wl_batch, bs, precision, gc, task, model,
                            engines, ctx, origins, w.span, optimize, measure, stack)
    CS.refuse_unshaped(model, targets, items.get("model"), ctx)
    check_sequence_split(targets, model, dataset, ctx, origins)
    if task is None or model is None:
        return None
    return WorkloadSpec(name=w.name, path=ctx.path, task=task, model=model, dataset=dataset, measure=measure,
                        optimizer=optimizer, targets=targets, engines=engines, checkpoint=checkpoint, track=track,
                        description=top.get("description", ""), seed=top.get("seed", 0), origins=dict(origins))


def check_all(file: ast.File) -> tuple[tuple[WorkloadSpec, ...], list[Diagnostic]]:
    """Check every workload of a file; return the specs and all diagnostics (errors and warnings)."""
    return _check_all(file)


def _check_all(file: ast.File) -> tuple[tuple[WorkloadSpec, ...], list[Diagnostic]]:
    ctx = Ctx(file.path)
    base = Path(file.path).resolve().parent if file.path != "<input>" else Path.cwd()
    specs = []
    if not file.workloads:
        ctx.error("E212", "no workload in this file", Span.point(1, 1), "start with: workload <name> { ... }")
    problems = () if file.lexed else value_problems(file.workloads)  # an AST made elsewhere: its values
    for code, message, span in problems:
        ctx.error(code, message, span or Span.point(1, 1),
                  "a workload file cannot hold this: names are letters, digits, '_', '-', '.'; numbers are finite")
    seen: dict[str, ast.Workload] = {}
    for w in file.workloads if not problems else ():
        if w.name in seen:
            ctx.error("E206", f"duplicate workload '{w.name}'", w.name_span,
                      f"already defined at line {seen[w.name].span.line}; rename one")
            continue
        seen[w.name] = w
        spec = check_workload(w, ctx, base)
        if spec is not None:
            specs.append(spec)
    diags = attach_source(sorted(ctx.diags, key=_order) + ctx.not_shown(), file.text)
    return tuple(specs), diags


def _order(d: Diagnostic) -> tuple:
    return (d.span.line, d.span.column) if d.span else (0, 0)


def check(file: ast.File) -> tuple[WorkloadSpec, ...]:
    """Check a file; raise ``WorkloadError`` carrying every error (warnings are dropped)."""
    specs, diags = check_all(file)
    errors = [d for d in diags if d.severity == "error"]
    if errors:
        raise WorkloadError(diagnostics=errors)
    return specs
