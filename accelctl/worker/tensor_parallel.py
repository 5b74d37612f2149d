"""Tensor parallel: a family's parallelize plan (``accelctl.models.parallel_plans``) applied to each
transformer block on the TP mesh with torch's ``parallelize_module``.

Column-wise modules keep their output local, row-wise ones all-reduce it; a fused ``[Q | K | V]``
projection is regrouped so rank r holds ``[Q_r | K_r | V_r]``; GPT-2's ``Conv1D`` becomes
``nn.Linear``.  Sequence parallel keeps the residual stream between the split regions as each
rank's slice of the sequence (norms on it, all-gather before column-wise, reduce-scatter after
row-wise); the first block slices and the last gathers, so the model around them is unchanged.
"""

from __future__ import annotations

import torch
from torch import nn

from accelctl.models.parallel_plans import FUSED_QKV, PLANS, ROWWISE


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


def _relayout(tensor, tp_mesh, source, target):
    """``tensor`` (this rank's local part under ``source``) as its local part under ``target``;
    autograd carries the inverse back (a slice's gradient is all-gathered, a gather's sliced)."""
    from torch.distributed.tensor import DTensor

    return DTensor.from_local(tensor, tp_mesh, (source,), run_check=False).redistribute(
        tp_mesh, (target,)).to_local()


def _on_hidden_states(module: nn.Module, tp_mesh, source, target) -> None:
    """Re-lay the hidden states ``module`` is called with: its first positional argument, else
    its ``hidden_states`` keyword (llama's attention is called by keyword)."""
    def hook(_, args, kwargs):
        if args:
            return (_relayout(args[0], tp_mesh, source, target), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": _relayout(kwargs["hidden_states"], tp_mesh, source, target)}

    module.register_forward_pre_hook(hook, with_kwargs=True)


def _report_once(norm: nn.Module, name: str, tp: int, log) -> None:
    """Log the sequence length ``norm`` runs on, at its first call (the proof it is split)."""
    def hook(_, args, out):
        handle.remove()
        log("info", f"sequence parallel: {name} of block 0 ran on {out.shape[1]} positions of "
                    f"{out.shape[1] * tp} on this rank")

    handle = norm.register_forward_hook(hook)


def _sequence_parallel(blocks, plan, tp_mesh, log) -> None:
    """The sequence-parallel regions of ``blocks`` (their linears already split)."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import SequenceParallel, parallelize_module

    for block in blocks:
        parallelize_module(block, tp_mesh, {path: SequenceParallel(use_local_output=True) for path in plan.norms})
        for path in plan.gathers:
            _on_hidden_states(block.get_submodule(path), tp_mesh, Shard(1), Replicate())
    _on_hidden_states(blocks[0], tp_mesh, Replicate(), Shard(1))
    blocks[-1].register_forward_hook(lambda _, args, out: _relayout(out, tp_mesh, Shard(1), Replicate()))
    _report_once(blocks[0].get_submodule(plan.norms[0]), plan.norms[0], tp_mesh.size(), log)


def apply(model: nn.Module, family: str, tp_mesh, sequence_parallel: bool = False, log=None) -> nn.Module:
    """``model`` with every block split over ``tp_mesh`` (a 1-D DeviceMesh), in place;
    ``sequence_parallel``: with the plan's sequence-parallel regions (``log(level, message)``
    told the sequence length they run on)."""
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = PLANS[family]
    tp = tp_mesh.size()
    rowwise = RowwiseParallel(output_layouts=Shard(1)) if sequence_parallel else RowwiseParallel()
    blocks = model.get_submodule(plan.blocks)
    for block in blocks:
        layout = {}
        for path, style in plan.split:
            module = as_linear(block.get_submodule(path))
            if style == FUSED_QKV:
                regroup_qkv(module, tp)
            _replace(block, path, module)
            layout[path] = rowwise if style == ROWWISE else ColwiseParallel()
        parallelize_module(block, tp_mesh, layout)
        for path, attr in plan.heads:
            owner = block.get_submodule(path)
            setattr(owner, attr, getattr(owner, attr) // tp)
    if sequence_parallel and len(blocks):
        _sequence_parallel(blocks, plan, tp_mesh, log or (lambda level, message: None))
    return model
