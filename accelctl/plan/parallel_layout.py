"""What a FSDP / tensor / pipeline plan says about its layout, before anything runs: the
device mesh (``accelctl.contract.mesh``, the one the worker builds), what each rank holds,
what each strategy costs in communication and time, and the memory per device of the
same model under each strategy on the same devices (``plan.memory``).

Printed as notes of ``accelctl plan``; a big mesh prints its first ranks and the rule.
"""

from __future__ import annotations


from accelctl.contract.mesh import Mesh, stage_layers
from accelctl.plan.memory import estimate, fmt_bytes
from accelctl.catalog import DEVICES
from accelctl.models.parallel_plans import PLANS, describe_split
from accelctl.models.parallel_rules import positions
from accelctl.workload.types import ParallelSpec, TargetSpec, WorkloadSpec
from accelctl.frozen import replace

SHARDED = ("fsdp", "tensor", "pipeline")
#: the worker strategy that builds this mesh (``accelctl.worker.strategy``)
WORKER_STRATEGY = "sharded"
#: ranks printed one per line; the rest follow the printed rule
RANKS_SHOWN = 8


def _slice(total: int, parts: int, i: int) -> str:
    n = total // parts
    return f"{i * n}-{(i + 1) * n - 1} of {total}"


def _shape(spec: WorkloadSpec, target: TargetSpec) -> dict:
    m = spec.model
    return m.stand_in if DEVICES[target.device].host or not m.real_shape else m.real_shape


def _ffn(shape: dict) -> int:
    """The MLP width: ``ffn``, else hidden × ``mlp_ratio`` (ViT), else 4 × hidden (GPT-2)."""
    hidden = int(shape.get("hidden", 0) or 0)
    return int(shape.get("ffn") or hidden * float(shape.get("mlp_ratio", 4)))


def _sequence(spec: WorkloadSpec, shape: dict) -> int:
    """The positions a block runs on (``parallel_rules.positions``)."""
    return positions(spec.model.family, shape, spec.dataset.seq_len, spec.dataset.image_size)[0]


def rank_line(mesh: Mesh, rank: int, shape: dict, family: str, p: ParallelSpec, sequence: int = 0) -> str:
    c = mesh.coords(rank)
    parts = []
    if mesh.pp > 1:
        layers = stage_layers(int(shape.get("layers", 0)), mesh.pp, c["pp"])
        ends = (["embeddings"] if c["pp"] == 0 else []) + (["head"] if c["pp"] == mesh.pp - 1 else [])
        parts.append(f"pp {c['pp']}: layers {layers.start}-{layers.stop - 1}" + "".join(f" + {e}" for e in ends))
    parts.append(f"dp {c['dp']}: data shard {c['dp']} of {mesh.dp}"
                 + (f", 1/{mesh.dp} of its parameters, gradients and optimizer state" if p.strategy == "fsdp"
                    and mesh.dp > 1 else ""))
    if mesh.tp > 1:
        heads = int(shape.get("heads", 1))
        tp_part = [f"heads {_slice(heads, mesh.tp, c['tp'])}"]
        kv_heads = int(shape.get("kv_heads") or heads)
        if kv_heads != heads:
            tp_part.append(f"kv heads {_slice(kv_heads, mesh.tp, c['tp'])}")
        ffn = _ffn(shape)
        if ffn:
            tp_part.append(f"MLP columns {_slice(ffn, mesh.tp, c['tp'])}")
        if p.sequence_parallel and sequence:
            tp_part.append(f"sequence positions {_slice(sequence, mesh.tp, c['tp'])} between the split regions")
        parts.append(f"tp {c['tp']}: " + ", ".join(tp_part))
    return f"rank {rank}: " + "; ".join(parts)


def strategy_lines(spec: WorkloadSpec, target: TargetSpec, mesh: Mesh) -> list[str]:
    p, family, out = target.parallel, spec.model.family, []
    shape = _shape(spec, target)
    e = 4 if target.precision.dtype == "fp32" else 2
    if p.strategy == "fsdp":
        block = f" ({shape['block']}, the model's _no_split_modules)" if family not in PLANS and shape.get("block") else ""
        out.append(f"FSDP2 over dp {mesh.dp}: fully_shard per block{block}"
                   + (" (resharded after forward: all-gathered again in backward)" if p.reshard_after_forward
                      else " (kept gathered from forward to backward)")
                   + ", then the root; per block an all-gather of its parameters in forward and backward and a "
                     "reduce-scatter of its gradients; " + ("shards, gradients and optimizer step on the host"
                                                            if p.offload != "none" else "all on the device"))
    if mesh.tp > 1 and family in PLANS:
        act = target.batch.micro * spec.dataset.seq_len * int(shape.get("hidden", 0)) * e
        blocks = int(shape.get("layers", 0)) // mesh.pp
        out.append(f"TP plan ({family}, {PLANS[family].blocks}.N): {describe_split(family)}; embeddings, norms and "
                   f"head replicated; 2 all-reduces of {fmt_bytes(act)} (micro × seq × hidden) per block in "
                   f"forward and 2 in backward: {4 * blocks * target.batch.accumulation} per step over tp {mesh.tp}")
        if p.sequence_parallel:
            plan = PLANS[family]
            out.append(f"sequence parallel over tp {mesh.tp}: {', '.join(plan.norms)} run on {_sequence(spec, shape) // mesh.tp} "
                       f"of {_sequence(spec, shape)} positions per rank (SequenceParallel), {', '.join(plan.gathers)} "
                       "all-gather the sequence before their column-wise projections and the row-wise ones "
                       "reduce-scatter onto it (Shard(1)): each all-reduce above becomes an all-gather plus a "
                       "reduce-scatter, the same bytes; the norms', residuals' and dropouts' activations (the "
                       f"10·s·b·h TP leaves whole) and the checkpointed layer inputs divided by tp {mesh.tp}")
    if mesh.pp > 1:
        m = target.batch.accumulation
        bubble = (mesh.pp - 1) / (m + mesh.pp - 1)
        out.append(f"PP {p.schedule} over pp {mesh.pp} stages, the step's {m} micro-batches in flight: bubble "
                   f"(pp-1)/(m+pp-1) = {bubble:.0%} of the step idle; stages send micro × seq × hidden "
                   "activations forward and their gradients back")
    if p.strategy != "fsdp" and mesh.dp > 1:
        out.append(f"replicas over dp {mesh.dp}: gradients all-reduced (averaged) after backward")
    return out


def memory_line(spec: WorkloadSpec, target: TargetSpec) -> str:
    """Memory per device of this model under each strategy on the same devices."""
    p, world = target.parallel, target.world_size
    tp, pp = max(p.tp, 1), max(p.pp, 1)
    layouts = [("ddp", ParallelSpec(strategy="data")), ("fsdp", ParallelSpec(strategy="fsdp"))]
    if world % tp == 0 and tp > 1:
        layouts += [(f"tensor(tp = {tp})", ParallelSpec(strategy="tensor", tp=tp)),
                    (f"fsdp(tp = {tp})", ParallelSpec(strategy="fsdp", tp=tp))]
        if p.sequence_parallel:
            sp = ParallelSpec(strategy=p.strategy, tp=tp, sequence_parallel=True)
            layouts.append((f"{p.strategy}(tp = {tp}, sequence_parallel = on)", sp))
    if world % pp == 0 and pp > 1:
        layouts.append((f"pipeline(pp = {pp})", ParallelSpec(strategy="pipeline", pp=pp, schedule=p.schedule)))
    shown = []
    for name, layout in layouts:
        fit = estimate(spec, replace(target, parallel=layout))
        shown.append(f"{name} {fmt_bytes(fit.total)}")
    basis = "stand-in" if DEVICES[target.device].host else "real model"
    return f"memory per device by strategy on {world} × {target.device} ({basis}): " + ", ".join(shown)


def notes(spec: WorkloadSpec, target: TargetSpec) -> list[str]:
    """The layout notes of a FSDP / tensor / pipeline target ([] for the others)."""
    p = target.parallel
    if p.strategy not in SHARDED or target.world_size % (p.tp * p.pp):
        return []
    mesh = Mesh.of(target.world_size, p.tp, p.pp)
    out = [mesh.describe() + " (tp innermost: rank = (pp_i·dp + dp_i)·tp + tp_i)"]
    shape = _shape(spec, target)
    sequence = _sequence(spec, shape)
    out += [rank_line(mesh, r, shape, spec.model.family, p, sequence) for r in range(min(mesh.world, RANKS_SHOWN))]
    if mesh.world > RANKS_SHOWN:
        out.append(f"ranks {RANKS_SHOWN}-{mesh.world - 1}: the same rule")
    return out + strategy_lines(spec, target, mesh) + [memory_line(spec, target)]
