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
"""

from __future__ import annotations

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


def counter() -> FlopCounterMode:
    """A ``FlopCounterMode`` (no display) that also counts sdpa's fused CPU kernel."""
    return FlopCounterMode(display=False, custom_mapping=missing_formulas())
