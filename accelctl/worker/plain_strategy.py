"""The ``plain`` execution strategy, and the base of every other: the loop runs the model
itself, DDP-wrapped when several ranks train.

Apart from ``accelctl.worker.strategy`` (which picks a strategy by name) so that the
strategies in their own modules (``accelctl.worker.sharded``) can build on it without
importing the module that imports them.
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
