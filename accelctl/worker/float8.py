"""FP8 training through torchao (``precision fp8 { library = torchao  recipe = ... }``).

``torchao.float8.convert_to_float8_training`` swaps the model's ``nn.Linear`` layers for
``Float8Linear``: each GEMM of forward and backward casts its operands to float8 with a
dynamic scale (the amax of the tensor now; no amax history) and runs ``torch._scaled_mm``.

* ``recipe = tensorwise`` (default): one scale per tensor; ``format = hybrid``: E4M3 for
  activations and weights, E5M2 for the output gradients (torchao's default); ``e4m3``: E4M3
  for all three.  Under FSDP2 (``parallel = fsdp``) the weights are all-gathered in FP8
  (``enable_fsdp_float8_all_gather``) and their scales computed for all layers in one
  all-reduce after each optimizer step (``precompute_float8_dynamic_scale_for_fsdp``), as
  torchtitan does.
* ``recipe = rowwise``: ``Float8LinearConfig.from_recipe_name("rowwise")``: one scale per
  row, E4M3 for all three operands, scales rounded down to powers of 2; its FSDP2 all-gather
  stays bf16 (torchao's float8 all-gather is tensorwise only).

Which linears convert is ``accelctl.spec.fp8_layers``'s rule, the one the plan prints: both
dims multiples of 16 (``torch._scaled_mm``), output heads kept in bf16.  GPT-2's ``Conv1D``
projections (a linear with the weight stored transposed) are made ``nn.Linear`` first.

On the host (a CPU rehearsal or smoke run of the same job) torchao's ``emulate = True`` runs
the same casts and scales with the matmul in higher precision, so this code path is
exercised where no FP8 tensor core exists.  Compile the model (``optimize { compile = on }``)
on a GPU: eager, the casts and amax reductions are separate kernels and cost more than the
FP8 GEMMs save (the H100 measured 0.32x of bf16 eager, docs/device-runs.md).
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from accelctl.spec.fp8_layers import FP8_DIM, is_head


def wanted(job) -> bool:
    recipe = job.precision.fp8
    return job.precision.dtype == "fp8" and recipe is not None and recipe.library == "torchao"


def eligible(module: torch.nn.Module, fqn: str) -> bool:
    """``module_filter_fn``: the linears torch._scaled_mm can run, output heads excepted."""
    return (isinstance(module, torch.nn.Linear) and module.in_features % FP8_DIM == 0
            and module.out_features % FP8_DIM == 0 and not is_head(fqn))


def fsdp_all_gather(job) -> bool:
    """Whether FSDP2 all-gathers the weights in FP8 (tensorwise scaling under parallel = fsdp)."""
    return job.parallel.strategy == "fsdp" and job.precision.fp8.recipe == "tensorwise"


def config_for(job, emulate: bool):
    """torchao's ``Float8LinearConfig`` for the job's recipe and format on this device."""
    from torchao.float8 import CastConfig, Float8LinearConfig

    r = job.precision.fp8
    if r.recipe == "rowwise":
        return dataclasses.replace(Float8LinearConfig.from_recipe_name("rowwise"), emulate=emulate)
    kw = dict(emulate=emulate, enable_fsdp_float8_all_gather=fsdp_all_gather(job))
    if r.format == "e4m3":
        return Float8LinearConfig(cast_config_grad_output=CastConfig(target_dtype=torch.float8_e4m3fn), **kw)
    return Float8LinearConfig(**kw)  # hybrid: E4M3 input/weight, E5M2 grad_output


def linears_from_conv1d(model: torch.nn.Module) -> int:
    """transformers' ``Conv1D`` (GPT-2: ``x @ W + b``, W stored in x out) -> the same ``nn.Linear``
    (W transposed), in place; returns how many were swapped."""
    swapped = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if type(child).__name__ != "Conv1D":
                continue
            w = child.weight
            linear = torch.nn.Linear(w.shape[0], w.shape[1], bias=child.bias is not None, device=w.device,
                                     dtype=w.dtype)
            with torch.no_grad():
                linear.weight.copy_(w.t())
                if child.bias is not None:
                    linear.bias.copy_(child.bias)
            setattr(parent, name, linear)
            swapped += 1
    return swapped


#: family -> the converted linears whose output the model then adds to in place (falcon's
#: ``mlp_output += attention_output``): Float8Linear returns a view from its custom autograd
#: function, which autograd forbids modifying in place, so these outputs are cloned
MODIFIED_IN_PLACE = {"falcon": ("mlp.dense_4h_to_h",)}


def _clone_output(module, inputs, output):
    return output.clone()


def convert(model: torch.nn.Module, job, on_host: bool, log: Callable[[str, str], None]) -> torch.nn.Module:
    """The model with its eligible linears as ``Float8Linear`` (in place); ``on_host``: emulated."""
    from torchao.float8 import convert_to_float8_training

    linears_from_conv1d(model)
    linears = {name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear)}
    convert_to_float8_training(model, module_filter_fn=eligible, config=config_for(job, emulate=on_host))
    swapped = sorted(name for name, m in model.named_modules() if type(m).__name__ == "Float8Linear")
    for name in swapped:
        if name.endswith(MODIFIED_IN_PLACE.get(job.model.family, ())):
            model.get_submodule(name).register_forward_hook(_clone_output)
    kept = sorted(linears - set(swapped))
    if not swapped:
        raise RuntimeError("precision fp8 (torchao): no nn.Linear of this model has dims divisible by "
                           f"{FP8_DIM} outside its output head; nothing would run in FP8")
    r = job.precision.fp8
    log("info", f"torchao float8 ({r.recipe}, {r.format}{', emulated on the host' if on_host else ''}"
                f"{', FP8 all-gather under FSDP2' if fsdp_all_gather(job) else ''}): "
                f"{len(swapped)} linear layer(s) in FP8; kept in bf16: {', '.join(kept) or 'none'}")
    return model


def after_optimizer_step(job) -> Callable[[torch.nn.Module], None] | None:
    """What runs after each optimizer step: with FP8 all-gather under FSDP2, the next step's
    weight scales for every layer in one all-reduce (torchao's
    ``precompute_float8_dynamic_scale_for_fsdp``); None otherwise."""
    if not (wanted(job) and fsdp_all_gather(job)):
        return None
    from torchao.float8 import precompute_float8_dynamic_scale_for_fsdp

    return precompute_float8_dynamic_scale_for_fsdp
