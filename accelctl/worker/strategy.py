"""Execution strategies: who runs the model once it is built.

The plan names one (``WorkerJob.strategy``, chosen by the backend); the loops ask it instead of
asking which backend planned the job: ``plain`` (the loop itself, DDP with several training ranks;
``accelctl.worker.plain_strategy``, the base of the others), ``deepspeed`` (``deepspeed.initialize``
and its ``train_step``), ``deepspeed_inference`` (``init_inference`` shards the model) and
``sharded`` (FSDP2, tensor and pipeline parallel on one DeviceMesh, ``accelctl.worker.sharded``).
"""

from __future__ import annotations

from accelctl.worker.plain_strategy import Plain


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
