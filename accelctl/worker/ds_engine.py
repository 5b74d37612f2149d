"""DeepSpeed inside the worker: the two hooks the loops call for the DeepSpeed backends.

* ``wrap_for_deepspeed(model, optimizer, job, ctx, batches, kind)`` (backend ``deepspeed``):
  ``deepspeed.initialize`` with the plan's ``ds_config.json``; its ``DeepSpeedTraining.train_step``
  replaces the loop's (DeepSpeed owns data parallelism, ZeRO, accumulation, clipping, loss scaling).
* ``init_inference(model, job, ctx)`` (backend ``deepspeed_inference``): ``deepspeed.init_inference``
  with the plan's ``ds_inference.json``.

Config paths come in ``ACCELCTL_DS_CONFIG`` / ``ACCELCTL_DS_INFERENCE_CONFIG``; deepspeed is
imported only here.  With ``ACCELCTL_DS_SHM_COMM=0`` (CPU plans) the shm all-reduce op is marked
incompatible before DeepSpeed creates its backend, sparing its JIT build (gloo carries the
collectives).  Costs and why: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import torch

from accelctl.contract.envnames import DS_CONFIG as CONFIG_ENV
from accelctl.contract.envnames import DS_INFERENCE_CONFIG as INFERENCE_ENV
from accelctl.contract.envnames import DS_SHM_COMM as SHM_ENV
from accelctl.worker.context import NonFiniteLoss

SHM_OP = "deepspeed_shm_comm"


def _deepspeed(ctx):
    """``import deepspeed`` (timed into ``ds_import_s``), shm comm off when the plan says so."""
    t0 = time.perf_counter()
    import deepspeed

    if os.environ.get(SHM_ENV) == "0":
        import deepspeed.ops

        deepspeed.ops.__compatible_ops__[SHM_OP] = False
    ctx.setup_s["ds_import_s"] = time.perf_counter() - t0
    return deepspeed


def _config(env: str) -> dict[str, Any]:
    path = os.environ.get(env)
    if not path:
        raise RuntimeError(f"{env} is not set: the DeepSpeed plan passes its config file there")
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def _describe(ctx, deepspeed, **more: Any) -> None:
    ctx.env["deepspeed_engine"] = {"version": deepspeed.__version__, "shm_comm": os.environ.get(SHM_ENV) != "0", **more}


class DeepSpeedTraining:
    """The engine and one optimizer step of it (``accumulation`` micro-batches)."""

    def __init__(self, engine, ctx, batches, kind: str) -> None:
        self.engine = engine
        self.ctx = ctx
        self.batches = batches
        self.kind = kind

    def train_step(self, step: int) -> float:
        from accelctl.worker.train_loop import forward_loss

        engine, ctx, job, adapter = self.engine, self.ctx, self.ctx.job, self.ctx.adapter
        accum, nan_at = job.batch.accumulation, job.debug.inject_nan_at_step
        loss_sum = torch.zeros((), device=adapter.device)
        for micro in range(accum):
            batch = {k: v.to(adapter.device, non_blocking=True) for k, v in next(self.batches).items()}
            with ctx.precision.autocast(adapter):
                loss = forward_loss(engine, self.kind, batch)
            if step == nan_at:
                loss = loss * float("nan")
            # DeepSpeed divides by the accumulation steps (and applies the fp16 loss scale);
            # on the last micro-batch ZeRO reduces (stage 1) or has reduced (stage 2/3) the grads
            engine.backward(loss)
            adapter.mark_step()
            loss_sum += loss.detach().float()
            if micro < accum - 1:
                engine.step()  # not a boundary: DeepSpeed only counts the micro-step
        loss_mean = loss_sum / accum
        if ctx.world > 1:
            # the same scalar all-reduce as the DDP loop: every rank logs the global loss
            torch.distributed.all_reduce(loss_mean)
            loss_mean /= ctx.world
        loss_value = float(loss_mean)
        if not math.isfinite(loss_value):  # stop before the boundary step moves the weights
            raise NonFiniteLoss(step, loss_value)
        engine.step()  # boundary: clip (gradient_clipping), optimizer step, zero the grads
        adapter.mark_step()
        return loss_value


def wrap_for_deepspeed(model, optimizer, job, ctx, batches, kind: str) -> DeepSpeedTraining:
    """``deepspeed.initialize`` on the worker's model and optimizer, with the plan's ds_config.

    The client optimizer is used unless the config has an ``"optimizer"`` section
    (ZeRO-Offload: DeepSpeedCPUAdam).  Rank 0's weights are broadcast here.
    """
    deepspeed = _deepspeed(ctx)
    t0 = time.perf_counter()
    cfg = _config(CONFIG_ENV)
    client = None if "optimizer" in cfg else optimizer
    params = [p for p in model.parameters() if p.requires_grad]
    engine, ds_optimizer, _, _ = deepspeed.initialize(model=model, optimizer=client, model_parameters=params,
                                                      config=cfg)
    ctx.setup_s["ds_initialize_s"] = time.perf_counter() - t0
    _describe(ctx, deepspeed, zero_stage=engine.zero_optimization_stage(),
              optimizer=type(ds_optimizer).__name__,
              basic_optimizer=type(getattr(engine, "basic_optimizer", None) or optimizer).__name__,
              train_batch_size=engine.train_batch_size())
    return DeepSpeedTraining(engine, ctx, batches, kind)


def init_inference(model, job, ctx):
    """``deepspeed.init_inference`` with the plan's ds_inference.json; returns the engine
    (``generate`` and ``__call__`` behave as the model's)."""
    deepspeed = _deepspeed(ctx)
    t0 = time.perf_counter()
    cfg = _config(INFERENCE_ENV)
    engine = deepspeed.init_inference(model, config=cfg)
    ctx.setup_s["ds_init_inference_s"] = time.perf_counter() - t0
    # AutoTP swaps sharded linears in place: LinearLayer (column) and LinearAllreduce (row)
    sharded = sum(type(m).__name__ in ("LinearLayer", "LinearAllreduce") for m in engine.module.modules())
    _describe(ctx, deepspeed, tp_size=cfg.get("tensor_parallel", {}).get("tp_size", 1),
              kernel_inject=bool(cfg.get("replace_with_kernel_inject")), dtype=cfg.get("dtype"),
              sharded_linears=sharded)
    return engine
