"""Execution strategies: who runs the model once it is built.

The plan names one (``WorkerJob.strategy``, chosen by the backend); the loops ask it
instead of asking which backend planned the job.

* ``plain`` -- the loop runs the model itself; with several training ranks it wraps the
  model in DDP (on devices whose adapter wants it; XLA all-reduces in ``optimizer_step``).
* ``deepspeed`` -- ``deepspeed.initialize`` owns data parallelism, ZeRO, accumulation,
  clipping and fp16 loss scaling; the loop calls its ``train_step``.
* ``deepspeed_inference`` -- ``deepspeed.init_inference`` shards the model (AutoTP or
  kernel injection) before generation.
* ``sharded`` -- FSDP2, tensor and pipeline parallel on one DeviceMesh
  (``accelctl.worker.sharded``).
"""

from __future__ import annotations

import torch


class Plain:
    name = "plain"
    #: the model and optimizer state is split over the ranks (checkpoints through
    #: torch.distributed.checkpoint, every rank its shards) rather than whole on rank 0
    sharded_state = False

    def prepare_training(self, model, ctx):
        """The model the training loop steps: DDP-wrapped when several ranks train."""
        adapter = ctx.adapter
        joined = torch.distributed.is_available() and torch.distributed.is_initialized()  # world 1 too
        if (ctx.world > 1 or joined) and adapter.wrap_ddp:
            # DDP broadcasts rank 0's weights now and all-reduces gradients during backward
            ids = [adapter.device.index] if adapter.device.type == "cuda" else None
            return torch.nn.parallel.DistributedDataParallel(model, device_ids=ids)
        return model

    def training_engine(self, model, optimizer, ctx, batches, kind):
        """An object whose ``train_step(step)`` replaces the loop's own, or None."""
        return None

    def prepare_inference(self, model, ctx):
        return model

    def reduce_gradients(self, model, ctx) -> None:
        """After the step's backward passes: gradients the wrapper did not reduce (none here)."""

    def clip_grad_norm(self, model, max_norm: float, adapter) -> None:
        adapter.clip_grad_norm(model.parameters(), max_norm)


class DeepSpeed(Plain):
    name = "deepspeed"

    def prepare_training(self, model, ctx):
        return model  # the engine owns data parallelism

    def training_engine(self, model, optimizer, ctx, batches, kind):
        from accelctl.worker import ds_engine

        return ds_engine.wrap_for_deepspeed(model, optimizer, ctx.job, ctx, batches, kind)


class DeepSpeedInference(Plain):
    name = "deepspeed_inference"

    def prepare_inference(self, model, ctx):
        from accelctl.worker import ds_engine

        return ds_engine.init_inference(model, ctx.job, ctx)


STRATEGIES = {s.name: s for s in (Plain, DeepSpeed, DeepSpeedInference)}


def strategy_for(name: str) -> Plain:
    if name == "sharded":  # FSDP2 / tensor / pipeline parallel (imports the mesh code only then)
        from accelctl.worker.sharded import Sharded

        return Sharded()
    if name not in STRATEGIES:
        raise ValueError(f"unknown execution strategy {name!r}; known: {', '.join(STRATEGIES)}")
    return STRATEGIES[name]()
