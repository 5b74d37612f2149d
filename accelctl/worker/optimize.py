"""``optimize { compile = on  compile_mode = ...  channels_last = on }`` and ``kv_cache = static``,
applied to the model the worker built, before its loop runs (``WorkerJob.optimize``).

* ``channels_last``: 4-D conv weights to NHWC, and a forward pre-hook converts 4-D inputs.
* ``compile``: ``nn.Module.compile(mode=...)`` in place (per block before ``fully_shard`` under
  FSDP2), keeping type and ``state_dict`` keys; inductor compiles on the second warm-up step (the
  first is under ``FlopCounterMode``; E225 guarantees one).  On the host CPU dropout uses aten's
  generator (``fallback_random``): inductor's own made compiled BERT slower than eager.
* ``kv_cache = static``: a pre-allocated cache; transformers' own compilation only with
  ``compile = on``, so the option says what runs.  Details: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from accelctl.families import FAMILIES as DEVICE_FAMILIES

#: Dynamo's timer around one frame's compilation (tracing, AOT autograd and inductor)
COMPILE_TIMER = "_compile.compile_inner"


def apply(model: torch.nn.Module, job, log: Callable[[str, str], None]) -> torch.nn.Module:
    """The built model with the job's ``optimize`` settings applied (the same object)."""
    opt = job.optimize
    if opt.channels_last:
        model.to(memory_format=torch.channels_last)
        model.register_forward_pre_hook(_channels_last_inputs, with_kwargs=True)
    # generation: transformers compiles its decoding step; FSDP2: each block, before fully_shard
    # (``compile_blocks``, from the sharded strategy)
    if opt.compile and job.task.kind != "generate" and job.strategy != "sharded":
        compile_module(model, job)
        log("info", f"torch.compile(mode={opt.compile_mode}) of {type(model).__name__}: compiled in warm-up")
    return model


def compile_module(module: torch.nn.Module, job) -> None:
    """``module.compile`` in place with the job's mode (inductor's aten random numbers on the host)."""
    family = DEVICE_FAMILIES.get(job.device.adapter)
    if family is not None and family.host:
        import torch._inductor.config as inductor_config

        inductor_config.fallback_random = True
    module.compile(mode=None if job.optimize.compile_mode == "default" else job.optimize.compile_mode)


def compile_blocks(blocks, job, log: Callable[[str, str], None]) -> None:
    """Each transformer block compiled on its own, in place, before FSDP2 wraps it (torchtitan's
    order: FSDP's hooks stay outside the graphs).  Dynamo may compile a graph per block where the
    blocks' attributes differ (transformers' ``layer_idx``), all in the warm-up.
    """
    for block in blocks:
        compile_module(block, job)
    log("info", f"torch.compile(mode={job.optimize.compile_mode}) of each of the {len(blocks)} blocks "
                "before fully_shard: compiled in warm-up")


def _channels_last_inputs(module, args, kwargs):
    """Forward pre-hook: 4-D tensor arguments (positional or named) in channels-last memory format."""
    def nhwc(a):
        return a.contiguous(memory_format=torch.channels_last) if isinstance(a, torch.Tensor) and a.dim() == 4 else a

    return tuple(nhwc(a) for a in args), {k: nhwc(v) for k, v in kwargs.items()}


def compile_stats() -> dict[str, Any]:
    """Graphs Dynamo compiled in this process and the seconds it took ({} before any)."""
    from torch._dynamo.utils import compilation_time_metrics, counters

    graphs = int(counters["stats"].get("unique_graphs", 0))
    if not graphs:
        return {}
    return {"compiles": graphs, "compile_s": float(sum(compilation_time_metrics.get(COMPILE_TIMER, ())))}


def split_compiles(total: dict[str, Any], at_measure: dict[str, Any] | None) -> dict[str, Any]:
    """``total`` compile stats with the warm-up's part and what compiled after it
    (``recompiles``: a shape that changed in the measured calls) apart; as the training
    loop's ``CompileWatch.results``."""
    if not total or at_measure is None:
        return total
    warm, warm_s = at_measure.get("compiles", 0), at_measure.get("compile_s", 0.0)
    return {**total, "warmup_compiles": warm, "warmup_compile_s": warm_s, "recompiles": total["compiles"] - warm,
            "recompile_s": total["compile_s"] - warm_s}


def generate_kwargs(job, model) -> dict[str, Any]:
    """``model.generate`` arguments of the job's KV-cache layout and compile setting."""
    task, opt = job.task, job.optimize
    if not task.kv_cache or task.kv_cache_layout != "static":
        return {"disable_compile": True}  # a growing cache is never compiled (E224 keeps compile off)
    kwargs: dict[str, Any] = {"cache_implementation": "static"}
    if opt.compile:
        from transformers import CompileConfig

        # transformers compiles the decoding step of a static cache itself; on CUDA only unless asked
        config = CompileConfig(mode=opt.compile_mode)
        config._compile_all_devices = True  # transformers' switch for devices other than CUDA/XPU/TPU
        model.generation_config.compile_config = config
    else:
        kwargs["disable_compile"] = True
    return kwargs
