"""Per-family parallelize plans: which module of each transformer block is split how.

One table to check against the libraries' module names (transformers 5.x, timm).  Megatron-LM's
split (Shoeybi et al., 2019): fan-out projections (Q, K, V, gate, up, fc1) column-wise, fan-in
ones (attention output, down, fc2) row-wise, one all-reduce each.  ``fused_qkv``: a fused
``[Q | K | V]`` is regrouped so each rank's slice holds its own heads.  ``heads``: attributes
divided by tp.  Embeddings, norms and the LM head stay replicated.  ``norms`` / ``gathers``:
sequence parallel (Korthikanti et al., 2022, as torchtitan's llama plan).  ``blocks`` is what
pipeline parallel splits into stages (``mesh.stage_layers``).  Details: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

from accelctl.frozen import Value


COLWISE, ROWWISE, FUSED_QKV = "colwise", "rowwise", "colwise_fused_qkv"


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
