"""Bytes a step moves: through device memory (weights, activations, KV cache, gradients,
optimizer states per ZeRO stage) and over the links (collectives of the parallel layout).

Ring collectives over ``n`` ranks (Patarasuk & Yuan, 2009; NCCL's bus-bandwidth formulas):
an all-reduce of ``S`` bytes sends ``2(n-1)/n · S`` per rank; a reduce-scatter or an
all-gather ``(n-1)/n · S``.  Data parallelism all-reduces the gradients once per optimizer
step; ZeRO 1/2 reduce-scatter them and all-gather the updated weights (the same volume);
ZeRO 3 all-gathers the weights again for the backward pass (1.5x).  Across nodes the
collective is hierarchical: inside a node over the device links, then between nodes over
the instance's network, which every device of the node shares.
"""

from __future__ import annotations

from dataclasses import dataclass


#: why a ZeRO 1/2 gradient reduction does not hide in the backward pass
ZERO_OVERLAP_SOURCE = ("DeepSpeed configuration JSON docs: zero_optimization.overlap_comm 'Attempts to overlap the "
                       "reduction of the gradients with backward computation', default false for stages 1 and 2 "
                       "(true for stage 3); DeepSpeedZeroOptimizer creates its gradient hooks only when it partitions "
                       "gradients (stage 2) or overlap_comm is set, else reduce_gradients() runs after the boundary's "
                       "backward (deepspeed/runtime/zero/stage_1_and_2.py, v0.7-0.8, 2022).  Habana's "
                       "deepspeed_config_bert_1.5b.json (Model-References, 2022) sets stage 1 and no overlap_comm")


@dataclass(frozen=True)
class Collective:
    #: what it carries, e.g. "gradient all-reduce"
    what: str
    #: bytes each device sends over the links inside the node (all ``count`` collectives together)
    intra_bytes: float
    #: bytes each node sends over its network
    inter_bytes: float
    #: how many collectives (each pays the latency term)
    count: int
    #: can overlap with the backward pass
    overlaps: bool


def ring(n: int, size: float, kind: str) -> float:
    """Bytes one rank sends in a ring ``all_reduce`` / ``reduce_scatter`` / ``all_gather``."""
    if n <= 1:
        return 0.0
    share = (n - 1) / n
    return size * share * (2 if kind == "all_reduce" else 1)


def gradient_sync(grad_bytes: float, devices_per_node: int, nodes: int, dp: int, zero_stage: int,
                  weight_bytes: float) -> list[Collective]:
    """The data-parallel collectives of one optimizer step (``grad_bytes``, ``weight_bytes``:
    the full model's, per tensor-parallel shard)."""
    if dp <= 1:
        return []
    local = min(dp, devices_per_node)
    # hierarchical: reduce-scatter inside the node leaves 1/local of S per device; the node's
    # devices then all-reduce their shards across nodes together (S per node in all)
    def sync(size: float, kind: str) -> tuple[float, float]:
        return ring(local, size, kind), ring(nodes, size, kind)

    out = []
    if zero_stage == 0:
        a, b = sync(grad_bytes, "all_reduce")
        out.append(Collective("gradient all-reduce", a, b, 1, True))
    else:
        a, b = sync(grad_bytes, "reduce_scatter")
        # ZeRO 1/2 reduce after the backward pass of the accumulation boundary unless
        # ``overlap_comm`` is set, which DeepSpeed leaves off for stages 1 and 2 (on for 3);
        # stage 1 without it registers no gradient hooks at all (see ZERO_OVERLAP_SOURCE)
        out.append(Collective("gradient reduce-scatter (ZeRO)", a, b, 1, zero_stage >= 3))
        a, b = sync(weight_bytes, "all_gather")
        if zero_stage < 3:
            out.append(Collective("weight all-gather after the step (ZeRO 1/2)", a, b, 1, False))
        else:  # ZeRO-3 keeps only its shard: gathered for the forward pass, again for the backward
            out.append(Collective("weight all-gather for the forward pass (ZeRO-3)", a, b, 1, False))
            out.append(Collective("weight all-gather for the backward pass (ZeRO-3)", a, b, 1, True))
    return out


def tensor_parallel_per_token(tp: int, layers: int, hidden: int, tokens: int, e: int) -> Collective | None:
    """Megatron-style tensor parallelism: 2 all-reduces of the activations per layer (after
    attention, after the MLP) for every forward pass."""
    if tp <= 1:
        return None
    return Collective("tensor-parallel activation all-reduce", ring(tp, tokens * hidden * e, "all_reduce")
                      * 2 * layers, 0.0, 2 * layers, False)
