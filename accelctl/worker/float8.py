"""FP8 training through torchao (``precision fp8 { library = torchao  recipe = ... }``).

``torchao.float8.convert_to_float8_training`` swaps ``nn.Linear`` layers for ``Float8Linear``
(dynamic scales, ``torch._scaled_mm``).  ``recipe = tensorwise`` (default; ``format`` hybrid or
e4m3; FP8 all-gather under FSDP2, as torchtitan) or ``rowwise`` (its FSDP2 all-gather stays bf16).
Which linears convert is ``accelctl.models.fp8_layers``'s rule, the one the plan prints; GPT-2's
``Conv1D`` becomes ``nn.Linear`` first.  On the host torchao's ``emulate = True`` runs the same
casts.  On a GPU compile the model: eager, the casts and amax reductions cost more than the FP8
GEMMs save (docs/device-runs.md).  Details: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

from typing import Callable

import torch

from accelctl.models.fp8_layers import FP8_DIM, is_head
from accelctl.frozen import replace


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
        return replace(Float8LinearConfig.from_recipe_name("rowwise"), emulate=emulate)
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
