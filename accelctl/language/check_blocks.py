"""The blocks a workload and each of its targets both write: ``measure``, ``optimizer`` and
``optimize``.

The workload pass (``accelctl.language.check``) checks the workload's; the targets pass
(``accelctl.language.targets``) checks each target's over them.
"""

from __future__ import annotations

from typing import Any

from accelctl.dsl import ast
from accelctl.errors import did_you_mean
from accelctl.language import schema as S
from accelctl.language.check_common import Origins, call_kwargs, items_by_key, plain_block, typed_entries
from accelctl.models.catalog import FAMILIES
from accelctl.workload.types import MeasureSpec, ModelSpec, OptimizerSpec, OptimizeSpec, TaskSpec
from accelctl.language.values import Ctx
from accelctl.frozen import replace


def check_measure(it: ast.Item | None, ctx: Ctx, origins: Origins, prefix: str = "measure") -> MeasureSpec:
    if it is None:
        return MeasureSpec()
    if not plain_block(it, ctx, "measure", "write measure { warmup = 2 steps  steps = 10 steps }"):
        return MeasureSpec()
    items = items_by_key(it.items, ctx)
    vals = typed_entries(items, S.MEASURE_KEYS, ctx, "measure", origins, prefix)
    m = MeasureSpec(**vals)
    if m.warmup >= m.steps and "warmup" in items:
        ctx.error("E404", f"warm-up ({m.warmup} steps) is not fewer than the counted steps ({m.steps})",
                  items["warmup"].span, "count more steps than you warm up: steady state needs both")
    return m


def optimize_values(it: ast.Item | None, ctx: Ctx, origins: Origins, prefix: str) -> dict[str, Any]:
    """The keys written in an ``optimize { compile = on ... }`` block (workload or target)."""
    if it is None:
        return {}
    if not plain_block(it, ctx, "optimize", "write optimize { compile = on }"):
        return {}
    vals = typed_entries(items_by_key(it.items, ctx), S.OPTIMIZE_KEYS, ctx, "optimize", origins, prefix)
    if vals:
        origins.add(prefix, it.span)
    return vals


def check_optimize(written: dict[str, Any], below: OptimizeSpec, model: ModelSpec | None, ctx: Ctx,
                   origins: Origins, prefix: str) -> OptimizeSpec:
    """``written`` (one block's keys) over ``below`` (the workload's, for a target), with the
    rules of what the block itself wrote: channels_last needs image input (E222), a
    compile_mode needs compile = on (E223)."""
    opt = replace(below, **written)
    if written.get("channels_last") and model is not None and not FAMILIES[model.family].image_input:
        ctx.error("E222", f"channels_last applies to image models; {model.family} takes token ids",
                  origins[f"{prefix}.channels_last"],
                  "channels-last (NHWC) is a memory format of 4-D image tensors: remove it, or use it with "
                  + ", ".join(f.name for f in FAMILIES.values() if f.image_input))
    if "compile_mode" in written and not opt.compile:
        ctx.error("E223", f"compile_mode = {opt.compile_mode} but compile is off", origins[f"{prefix}.compile_mode"],
                  "add compile = on, or remove compile_mode")
    return opt


def check_optimizer(it: ast.Item | None, ctx: Ctx, origins: Origins, task: TaskSpec | None,
                    prefix: str = "optimizer") -> OptimizerSpec:
    if it is None:
        return OptimizerSpec()
    if task is not None and not task.training:
        ctx.error("E406", f"an optimizer does not apply to a {task.kind} task", it.span, "remove it")
    header = it.header if isinstance(it, ast.Block) else it.value
    vals: dict[str, Any] = {}
    if isinstance(header, (ast.Word, ast.Call)):
        origins.add(f"{prefix}.name", it.span)  # where a refusal of the optimizer points (lamb on Gaudi)
        if header.name not in S.OPTIMIZERS:
            ctx.error("E203", f"unknown optimizer '{header.name}'", getattr(header, "name_span", header.span),
                      did_you_mean(header.name, S.OPTIMIZERS))
        else:
            vals["name"] = header.name
        if isinstance(header, ast.Call):
            vals.update(call_kwargs(header, S.OPTIMIZER_KEYS, ctx, f"optimizer {header.name}"))
    items = items_by_key(it.items if isinstance(it, ast.Block) else (), ctx)
    vals.update(typed_entries(items, S.OPTIMIZER_KEYS, ctx, "optimizer", origins, prefix))
    return OptimizerSpec(**vals)
