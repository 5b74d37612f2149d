"""The worker's FLOP counter: torch's ``FlopCounterMode`` plus the formulas it lacks.

torch's counter has no formula for sdpa's fused CPU kernel
(``aten._scaled_dot_product_flash_attention_for_cpu`` and its backward), taken whenever attention
dropout is 0, so such steps counted no attention FLOPs.  The added formulas count as the math path
does (forward two products, backward twice that), so a model counts the same FLOPs whichever
kernel runs.  The counted step runs eager (``set_stance("force_eager")``): a compiled module whose
first call runs under a dispatch mode is otherwise never compiled.  Measured cases: docs/internals/estimate-backends-worker.md.
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
