"""FP8 training through torchao (``precision fp8 { library = torchao }``).

``torchao.float8.convert_to_float8_training`` swaps the model's ``nn.Linear`` layers for
``Float8Linear``: each GEMM of forward and backward casts its operands to float8 with a
dynamic per-tensor scale (amax of the tensor now; no amax history) and runs
``torch._scaled_mm``.  ``format = hybrid``: E4M3 for activations and weights, E5M2 for the
output gradients (torchao's default); ``e4m3``: E4M3 for all three.  Layers whose
dimensions are not multiples of 16 (``torch._scaled_mm``'s rule), and a classifier head
narrower than that, stay in bf16.

On the host (a CPU rehearsal or smoke run of the same job) torchao's ``emulate = True`` runs
the same casts and scales with the matmul in higher precision, so this code path is
exercised where no FP8 tensor core exists.  Compile the model (``optimize { compile = on }``)
on a GPU: eager, the casts and amax reductions are separate kernels and cost more than the
FP8 GEMMs save (torchao's own advice).
"""

from __future__ import annotations

from typing import Callable

import torch

#: torch._scaled_mm needs both GEMM dimensions of a weight divisible by this
FP8_DIM = 16


def wanted(job) -> bool:
    recipe = job.precision.fp8
    return job.precision.dtype == "fp8" and recipe is not None and recipe.library == "torchao"


def eligible(module: torch.nn.Module, fqn: str) -> bool:
    """``module_filter_fn``: the linears torch._scaled_mm can run."""
    return (isinstance(module, torch.nn.Linear) and module.in_features % FP8_DIM == 0
            and module.out_features % FP8_DIM == 0)


def config_for(job, emulate: bool):
    """torchao's ``Float8LinearConfig`` for the job's recipe (format) on this device."""
    from torchao.float8 import CastConfig, Float8LinearConfig

    if job.precision.fp8.format == "e4m3":
        e4m3 = CastConfig(target_dtype=torch.float8_e4m3fn)
        return Float8LinearConfig(cast_config_grad_output=e4m3, emulate=emulate)
    return Float8LinearConfig(emulate=emulate)  # hybrid: E4M3 input/weight, E5M2 grad_output


def convert(model: torch.nn.Module, job, on_host: bool, log: Callable[[str, str], None]) -> torch.nn.Module:
    """The model with its eligible linears as ``Float8Linear`` (in place); ``on_host``: emulated."""
    from torchao.float8 import convert_to_float8_training

    linears = {name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    convert_to_float8_training(model, module_filter_fn=eligible, config=config_for(job, emulate=on_host))
    swapped = sorted(name for name, m in model.named_modules() if type(m).__name__ == "Float8Linear")
    kept = sorted(linears - set(swapped))
    if not swapped:
        raise RuntimeError("precision fp8 (torchao): no nn.Linear of this model has dims divisible by "
                           f"{FP8_DIM}; nothing would run in FP8")
    log("info", f"torchao float8 ({job.precision.fp8.format}{', emulated on the host' if on_host else ''}): "
                f"{len(swapped)} linear layer(s) in FP8; kept in bf16: {', '.join(kept) or 'none'}")
    return model
