"""FSDP2: ``fully_shard`` on each transformer block, then on the root (embeddings, final
norm, head), over the data-parallel mesh dimension (torchtitan's order).  Each rank keeps
1/dp of every parameter, gradient and optimizer state; a block's parameters are
all-gathered just before it runs and freed after its forward (``reshard_after_forward``,
the default: ZeRO-3's memory) or kept until backward (off: ZeRO-2's, no second
all-gather); gradients are reduce-scattered in backward.  ``offload = cpu`` keeps the
shards, gradients and optimizer step on the host (``CPUOffloadPolicy``).  Mixed precision:
with a 16-bit precision the all-gathered parameters are in that width and gradients are
reduced in fp32 (``MixedPrecisionPolicy(param_dtype, reduce_dtype=float32)``); fp32 runs
as is.  With tensor parallel the blocks are split over tp first, then sharded over dp.
"""

from __future__ import annotations

import torch

from accelctl.models.parallel_plans import PLANS

#: the all-gathered width (fp8: torchao's Float8Linear runs under bf16; its FP8 all-gather, where
#: on, gathers the converted weights in FP8 and the rest in bf16)
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}


def blocks(model, family: str) -> list:
    """The blocks sharded one by one: the family plan's stack, else every module of a class the
    model says is never split across devices (transformers' ``_no_split_modules``: its decoder
    layer), as accelerate's transformer-based wrap policy picks them."""
    if family in PLANS:
        return list(model.get_submodule(PLANS[family].blocks))
    names = set(getattr(model, "_no_split_modules", None) or ())
    return [m for m in model.modules() if type(m).__name__ in names]


def apply(model, family: str, dp_mesh, parallel, precision: str):
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    width = DTYPES.get(precision)
    mp = MixedPrecisionPolicy(param_dtype=width, reduce_dtype=torch.float32 if width else None)
    offload = CPUOffloadPolicy() if parallel.offload != "none" else OffloadPolicy()
    opts = dict(mesh=dp_mesh, mp_policy=mp, offload_policy=offload)
    for block in blocks(model, family):
        fully_shard(block, reshard_after_forward=parallel.reshard_after_forward, **opts)
    # the root is gathered for the whole step (embeddings and head run first and last)
    fully_shard(model, reshard_after_forward=False, **opts)
    return model
