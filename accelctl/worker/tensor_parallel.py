"""Tensor parallel: a family's parallelize plan (``accelctl.spec.parallel_plans``) applied
to each transformer block on the TP mesh with torch's ``parallelize_module``.

Column-wise modules keep their output local (each rank: its heads / its MLP slice);
row-wise modules all-reduce theirs (the block's output is whole on every rank).  A fused
``[Q | K | V]`` projection has its output rows regrouped first so rank r's slice is
``[Q_r | K_r | V_r]``; GPT-2's ``Conv1D`` becomes the ``nn.Linear`` it is transposed.
"""

from __future__ import annotations

import torch
from torch import nn

from accelctl.spec.parallel_plans import FUSED_QKV, PLANS, ROWWISE


def as_linear(module: nn.Module) -> nn.Module:
    """GPT-2's ``Conv1D`` (``x @ W + b``, W of shape in × out) as the equal ``nn.Linear``."""
    if isinstance(module, nn.Linear) or not hasattr(module, "nf"):
        return module
    n_in, n_out = module.weight.shape
    linear = nn.Linear(n_in, n_out, bias=module.bias is not None, device=module.weight.device,
                       dtype=module.weight.dtype)
    with torch.no_grad():
        linear.weight.copy_(module.weight.t())
        if module.bias is not None:
            linear.bias.copy_(module.bias)
    return linear


def regroup_qkv(linear: nn.Linear, tp: int) -> None:
    """Reorder a fused ``[Q | K | V]`` projection's output rows to ``[Q_0 K_0 V_0 | Q_1 K_1 V_1 | ...]``,
    so the column split hands rank r the Q, K and V of its own heads, in the order the
    block's ``split(width, dim=-1)`` reads them."""
    width = linear.out_features // 3
    part = width // tp
    order = torch.cat([torch.arange(q * width + r * part, q * width + (r + 1) * part)
                       for r in range(tp) for q in range(3)])
    with torch.no_grad():
        linear.weight.copy_(linear.weight[order])
        if linear.bias is not None:
            linear.bias.copy_(linear.bias[order])


def _replace(root: nn.Module, path: str, module: nn.Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, module)


def apply(model: nn.Module, family: str, tp_mesh) -> nn.Module:
    """``model`` with every block split over ``tp_mesh`` (a 1-D DeviceMesh), in place."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = PLANS[family]
    tp = tp_mesh.size()
    for block in model.get_submodule(plan.blocks):
        layout = {}
        for path, style in plan.split:
            module = as_linear(block.get_submodule(path))
            if style == FUSED_QKV:
                regroup_qkv(module, tp)
            _replace(block, path, module)
            layout[path] = RowwiseParallel() if style == ROWWISE else ColwiseParallel()
        parallelize_module(block, tp_mesh, layout)
        for path, attr in plan.heads:
            owner = block.get_submodule(path)
            setattr(owner, attr, getattr(owner, attr) // tp)
    return model
