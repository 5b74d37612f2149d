"""``optimize { compile = on  compile_mode = ...  channels_last = on }`` and ``kv_cache = static``,
applied to the model the worker built, before its loop runs (``WorkerJob.optimize``).

* ``channels_last``: the weights are converted to the channels-last (NHWC) memory format
  (``model.to(memory_format=torch.channels_last)``: 4-D conv weights only) and a forward
  pre-hook converts the 4-D image tensors the model is called with, so the loops feed
  batches as they always do.
* ``compile``: ``nn.Module.compile(mode=...)``, in place (under FSDP2 each transformer block
  instead, before ``fully_shard``: ``compile_blocks``): the module keeps its type, its
  ``state_dict`` keys (checkpoints load either way) and its attributes; DDP then wraps it
  as it would wrap the eager model.  Inductor compiles on the first call that is not
  under ``FlopCounterMode`` (Dynamo leaves a frame alone while a dispatch mode is active),
  i.e. the second warm-up step of the training loop, which the check pass guarantees
  (E225).  On the host CPU inductor draws dropout's random numbers with aten's generator
  (``torch._inductor.config.fallback_random``): its own CPU random-number code made a compiled
  BERT step slower than eager (0.84x: its fused softmax + attention-dropout kernel took 9-14 ms
  per layer), aten's makes it 1.04x faster and the compiled model's dropout masks the eager
  model's (``bench/mfu_breakdown.py --compile``).  ``compile_stats()`` is Dynamo's graph count and compile time so far, which the
  device adapters report like XLA's (``DeviceAdapter.compile_stats``): compilation apart
  from step time, warm-up compiles and recompiles after warm-up counted apart.
* ``kv_cache = static`` (generation): ``generate_kwargs`` asks transformers for a
  pre-allocated cache (``cache_implementation="static"``); with ``compile = on`` the
  decoding forward is compiled by transformers itself (its ``CompileConfig``, on every
  device), and with compile off transformers' own automatic compilation (CUDA + static
  cache) is disabled, so that the option says what runs.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from accelctl.contract.devices import FAMILIES as DEVICE_FAMILIES

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
    order: FSDP's all-gather and reduce-scatter hooks stay outside the graphs).  Dynamo may
    compile a graph per block where the blocks' attributes differ (transformers' ``layer_idx``:
    4 graphs for 4 llama blocks, measured), all in the warm-up."""
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
