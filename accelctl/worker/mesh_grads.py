"""Gradients over a device mesh: averaging over a data-parallel group, the global norm of
gradients that are partly DTensors (sharded over some mesh dimensions), clipping by it.

``torch.nn.utils.clip_grad_norm_`` stacks the per-tensor norms, which fails on a mix of
DTensors and plain tensors (TP leaves norms and embeddings plain) and does not know that a
pipeline stage holds only part of the model.  Here each gradient's squared norm is summed
where it lives and all-reduced once per placement over the mesh dimensions it is sharded
on; plain gradients' sum over ``plain_group`` (the pipeline group: each stage's own
parameters), so every rank gets the norm of the whole model.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _local(t: torch.Tensor) -> torch.Tensor:
    return t.to_local() if hasattr(t, "to_local") else t


def average_over(params, group, size: int) -> None:
    """Every gradient averaged over ``group`` of ``size`` ranks (data-parallel replicas)."""
    if size <= 1:
        return
    for p in params:
        if p.grad is not None:
            g = _local(p.grad)
            dist.all_reduce(g, group=group)
            g.div_(size)


def global_norm(grads: list[torch.Tensor], plain_group=None) -> torch.Tensor:
    """The 2-norm of all ``grads`` of the whole model, equal on every rank."""
    by_layout: dict[tuple, torch.Tensor] = {}
    for g in grads:
        if hasattr(g, "placements"):
            dims = tuple(i for i, pl in enumerate(g.placements) if pl.is_shard())
            key = (id(g.device_mesh), dims)
            groups = [g.device_mesh.get_group(i) for i in dims]
        else:
            key, groups = ("plain",), [plain_group] if plain_group is not None else []
        sq = _local(g).detach().float().pow(2).sum()
        if key in by_layout:
            by_layout[key][0] += sq
        else:
            by_layout[key] = [sq, groups]
    total = torch.zeros(())
    for sq, groups in by_layout.values():
        for group in groups:
            dist.all_reduce(sq, group=group)
        total += sq.cpu()
    return total.sqrt()


def clip(params, max_norm: float, plain_group=None, skip: tuple = ()) -> torch.Tensor:
    """Scale the gradients so their global norm is at most ``max_norm`` (torch's rule:
    coefficient ``max_norm / (norm + 1e-6)``, capped at 1); ``skip``: parameters whose
    gradient another rank already counts (a tied weight's second copy).  Returns the norm."""
    params = [p for p in params if p.grad is not None]
    counted = [p.grad for p in params if not any(p is s for s in skip)]
    norm = global_norm(counted, plain_group)
    coef = torch.clamp(max_norm / (norm + 1e-6), max=1.0)
    for p in params:
        _local(p.grad).mul_(coef.to(p.grad.device))
    return norm
