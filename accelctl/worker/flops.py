"""The worker's FLOP counter: torch's ``FlopCounterMode`` plus the formulas it lacks.

torch 2.14.1's counter has no formula for sdpa's fused CPU kernel
(``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward), which the CPU takes
whenever attention dropout is 0 (inference, generation, models configured without it).  A step
whose attention runs there counted no attention FLOPs, and its MFU read low: 0.81 of 11.3 GFLOP
per step for the BERT bench workload with attention dropout 0 (``bench/mfu_breakdown.py``).

The formulas count model FLOPs as the math path does: forward the two products
(``flop_counter.sdpa_flop_count``, causal masking not discounted), backward twice that -- not
the flash backward's recomputation of the scores -- so the same model counts the same FLOPs
whichever kernel runs, and its MFU compares.

The counted step runs eager (``torch.compiler.set_stance("force_eager")``): torch 2.9-2.11
mark a compiled module's frame "skip" for good when its first call is under a dispatch mode,
so a model compiled with ``optimize { compile = on }`` whose first step was counted never
compiled at all (the H100 device check, 2026-11-26: ViT-H/14 ``compile = on`` 0 graphs and the
eager step time; reproduced on the CPU with torch 2.9.0).  Eager, the counter sees the model's
operators whichever torch runs it, and Dynamo compiles on the next call.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch.utils import flop_counter
from torch.utils.flop_counter import FlopCounterMode


def _forward(query, key, value, *args, out_shape=None, **kwargs) -> int:
    return flop_counter.sdpa_flop_count(query, key, value)


def _backward(grad_out, query, key, value, *args, out_shape=None, **kwargs) -> int:
    return 2 * flop_counter.sdpa_flop_count(query, key, value)


def missing_formulas() -> dict:
    """The formulas this torch lacks (none where its build has no fused CPU kernel)."""
    aten = torch.ops.aten
    out = {}
    for name, formula in (("_scaled_dot_product_flash_attention_for_cpu", _forward),
                          ("_scaled_dot_product_flash_attention_for_cpu_backward", _backward)):
        if hasattr(aten, name):
            out[getattr(aten, name)] = formula
    return out


@contextlib.contextmanager
def counter() -> Iterator[FlopCounterMode]:
    """A ``FlopCounterMode`` (no display) that also counts sdpa's fused CPU kernel, entered with
    torch.compile held off (see module doc): ``with counter() as c: ...; c.get_total_flops()``."""
    mode = FlopCounterMode(display=False, custom_mapping=missing_formulas())
    with torch.compiler.set_stance("force_eager"), mode:
        yield mode
