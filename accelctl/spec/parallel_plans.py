"""Per-family parallelize plans: which module of each transformer block is split how.

One table a reader can check against the library's module names (transformers 5.x
``LlamaForCausalLM`` / ``GPT2LMHeadModel`` / ``BertForMaskedLM``, timm's
``VisionTransformer``).  Megatron-LM's split (Shoeybi et al., 2019): the projections that fan
out (Q, K, V, gate, up, fc1) are column-wise -- each rank computes its heads / its slice of
the MLP with no communication -- and the ones that fan back in (attention output, down,
fc2) are row-wise: each rank multiplies its slice and one all-reduce sums the partial
outputs.  That is 2 all-reduces of the activations per block in forward (after attention,
after the MLP) and 2 in backward (the column-wise inputs' gradients).

``fused_qkv``: GPT-2's ``c_attn`` and timm's ``qkv`` are one projection giving
``[Q | K | V]``; a plain column split would hand rank 0 all of Q and half of K.  Their output
rows are regrouped first so each rank's contiguous slice is ``[Q_r | K_r | V_r]`` of its
own heads.  GPT-2's ``Conv1D`` (a transposed ``nn.Linear``) becomes the equivalent
``nn.Linear`` before the plan applies (same weights, transposed).

``heads``: the attention attributes the block reads at run time that count heads or
widths; each rank's copy is divided by tp (its local heads).  Embeddings, norms and the
LM head stay replicated: their gradients are equal on every TP rank because their inputs
are (the all-reduced activations).

Sequence parallel (``sequence_parallel = on``; Korthikanti et al., 2022, as torchtitan's llama
plan): between the column- and row-wise regions each rank keeps only its 1/tp of the sequence.
``norms`` run on the local sequence slice (``SequenceParallel``: their weights replicated,
their gradients summed over tp); each module of ``gathers`` all-gathers the sequence before
its column-wise projections run on all of it; the row-wise projections reduce-scatter onto the
sequence (``Shard(1)``) instead of all-reducing.  The first block splits the sequence it gets
from the (replicated) embeddings, the last gathers it for the (replicated) final norm and
head.  Same bytes on the wire as the all-reduce (an all-gather plus a reduce-scatter), and
the norms', residuals' and dropouts' activations divided by tp.

Pipeline parallel splits ``blocks`` into contiguous stages (``mesh.stage_layers``).
"""

from __future__ import annotations

from accelctl.frozen import Value, value


COLWISE, ROWWISE, FUSED_QKV = "colwise", "rowwise", "colwise_fused_qkv"


@value
class FamilyPlan(Value):
    #: the ModuleList of transformer blocks, from the model's root
    blocks: str
    #: module inside each block -> COLWISE / ROWWISE / FUSED_QKV
    split: tuple[tuple[str, str], ...]
    #: (module inside each block, attribute) counting heads or widths: divided by tp per rank
    heads: tuple[tuple[str, str], ...] = ()
    #: config attributes (the family's names) of attention heads and key/value heads
    head_keys: tuple[str, ...] = ("heads",)
    #: sequence parallel: the norms inside each block (run on the rank's slice of the sequence)
    norms: tuple[str, ...] = ()
    #: sequence parallel: the modules inside each block whose input (the normed hidden states)
    #: is all-gathered over the sequence before their column-wise projections
    gathers: tuple[str, ...] = ()


PLANS: dict[str, FamilyPlan] = {
    "llama": FamilyPlan(
        blocks="model.layers",
        split=(("self_attn.q_proj", COLWISE), ("self_attn.k_proj", COLWISE), ("self_attn.v_proj", COLWISE),
               ("self_attn.o_proj", ROWWISE),
               ("mlp.gate_proj", COLWISE), ("mlp.up_proj", COLWISE), ("mlp.down_proj", ROWWISE)),
        head_keys=("heads", "kv_heads"),
        norms=("input_layernorm", "post_attention_layernorm"), gathers=("self_attn", "mlp")),
    "gpt2": FamilyPlan(
        blocks="transformer.h",
        split=(("attn.c_attn", FUSED_QKV), ("attn.c_proj", ROWWISE), ("mlp.c_fc", COLWISE), ("mlp.c_proj", ROWWISE)),
        heads=(("attn", "num_heads"), ("attn", "split_size")),
        norms=("ln_1", "ln_2"), gathers=("attn", "mlp")),
    "bert": FamilyPlan(
        blocks="bert.encoder.layer",
        split=(("attention.self.query", COLWISE), ("attention.self.key", COLWISE),
               ("attention.self.value", COLWISE), ("attention.output.dense", ROWWISE),
               ("intermediate.dense", COLWISE), ("output.dense", ROWWISE)),
        heads=(("attention.self", "num_attention_heads"), ("attention.self", "all_head_size")),
        # post-norm: each LayerNorm takes the row-wise output plus the residual, both sequence slices
        norms=("attention.output.LayerNorm", "output.LayerNorm"), gathers=("attention.self", "intermediate")),
    "vit": FamilyPlan(
        blocks="blocks",
        split=(("attn.qkv", FUSED_QKV), ("attn.proj", ROWWISE), ("mlp.fc1", COLWISE), ("mlp.fc2", ROWWISE)),
        heads=(("attn", "num_heads"), ("attn", "attn_dim")),
        norms=("norm1", "norm2"), gathers=("attn", "mlp")),
}
#: llama's kin share its module names (transformers' MistralForCausalLM, Qwen2ForCausalLM:
#: q/k/v/o_proj, gate/up/down_proj under model.layers), so they share its plan
PLANS["mistral"] = PLANS["qwen2"] = PLANS["llama"]


def describe_split(family: str) -> str:
    """``q_proj, k_proj, ... colwise; o_proj, down_proj rowwise`` for a plan note."""
    plan = PLANS[family]
    by_style: dict[str, list[str]] = {}
    for name, style in plan.split:
        by_style.setdefault(style, []).append(name.rsplit(".", 1)[-1])
    return "; ".join(f"{', '.join(names)} {style.replace('_', ' ')}" for style, names in by_style.items())


#: families whose blocks ``accelctl.worker.pipeline.Stage`` runs as pipeline stages
PIPELINE_FAMILIES = ("llama", "gpt2", "bert")
