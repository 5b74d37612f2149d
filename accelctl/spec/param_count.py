"""Exact parameter counts of the decoder-only families people run now, from their shape keys.

Each formula is the sum of the weight (and bias) tensors transformers' own class builds for
that config (``tests/spec/test_param_count.py`` checks them against the classes built on the
meta device from the real models' config.json):

* llama / mistral / qwen2 / gemma / mixtral (``LlamaForCausalLM`` and its kin): attention
  Q ``h x heads·d``, K and V ``h x kv_heads·d`` (grouped-query attention: ``kv_heads`` <
  ``heads``), O ``heads·d x h`` (``d`` = ``head_dim``, gemma's is its own, else h / heads);
  qwen2 adds Q, K, V biases, llama's ``attention_bias`` all four; a gated MLP (SwiGLU,
  gemma's GeGLU) of three ``h x ffn`` matrices -- mixtral has ``experts`` of them and a
  router ``h x experts``, of which ``experts_per_token`` run per token; two RMSNorm weights a
  layer and a final one; the token embedding, and an LM head unless tied (gemma ties);
  rotary position embeddings have no weights.
* gpt_neox: fused QKV ``h x 3h``, dense ``h x h``, MLP ``h x ffn``, ``ffn x h``, all with
  biases; two LayerNorms (weight and bias) a layer and a final one; untied ``embed_out``.
* falcon: fused QKV ``h x (heads + 2·kv_heads)·d`` (multi-query: one K/V head), dense ``h x
  h``, MLP ``h x ffn``, ``ffn x h``, biases only where ``bias``; LayerNorms: one per layer
  (parallel attention), two with ``new_arch`` (``new_decoder_architecture``) or without
  parallel attention; a final one; tied LM head.
"""

from __future__ import annotations

from typing import Any

from accelctl.frozen import Value, value

#: families whose layers are llama's (RMSNorm, rotary, gated MLP, grouped-query attention)
LLAMA_LIKE = ("llama", "mistral", "qwen2", "gemma", "mixtral")
#: the decoder families of config.json whose layers ``dims`` describes
COUNTED = (*LLAMA_LIKE, "gpt_neox", "falcon")
#: every family this module counts exactly
EXACT = (*COUNTED, "bloom", "gpt2", "bert", "t5", "vit")


@value
class Dims(Value):
    """The widths of one decoder layer."""

    hidden: int
    #: query width (heads x head_dim) and key/value width (kv_heads x head_dim)
    q: int
    kv: int
    ffn: int
    #: MLP matrices per expert (3 gated, 2 plain) and experts held / run per token
    mlp_mats: int
    experts: int
    active_experts: int


def dims(family: str, s: dict[str, Any]) -> Dims:
    h, heads = int(s["hidden"]), int(s["heads"])
    d = int(s.get("head_dim") or 0) or h // heads
    kv_heads = int(s.get("kv_heads") or s.get("kv") or heads)
    if family == "gpt_neox":
        kv_heads = heads
    ffn = int(s.get("ffn") or 4 * h)
    experts = int(s.get("experts") or 1) if family == "mixtral" else 1
    active = min(int(s.get("experts_per_token") or 1), experts) if family == "mixtral" else 1
    return Dims(h, heads * d, kv_heads * d, ffn, 3 if family in LLAMA_LIKE else 2, experts, active)


def _layer(family: str, s: dict[str, Any], experts: int) -> int:
    """Parameters of one layer with ``experts`` MLP experts counted."""
    g = dims(family, s)
    h = g.hidden
    attn = h * g.q + 2 * h * g.kv + g.q * h
    mlp = experts * g.mlp_mats * h * g.ffn
    if family in LLAMA_LIKE:
        if family == "qwen2" or s.get("attn_bias"):
            attn += g.q + 2 * g.kv + (h if family != "qwen2" else 0)
        router = h * g.experts if family == "mixtral" else 0
        return attn + mlp + router + 2 * h
    if family == "gpt_neox":
        return attn + (g.q + 2 * g.kv + h) + mlp + g.ffn + h + 2 * 2 * h
    if family == "falcon":
        bias = (g.q + 2 * g.kv + h + g.ffn + h) if s.get("bias") else 0
        norms = 2 if (s.get("new_arch") or not s.get("parallel_attn", True)) else 1
        return attn + mlp + bias + norms * 2 * h
    raise ValueError(f"no parameter formula for family {family!r}")


def _ends(family: str, s: dict[str, Any]) -> int:
    """Embeddings, final norm and LM head."""
    h, v = int(s["hidden"]), int(s["vocab"])
    final = h if family in LLAMA_LIKE else 2 * h
    tied = bool(s.get("tied", family in ("gemma", "falcon")))
    return v * h * (1 if tied else 2) + final


def total(family: str, s: dict[str, Any]) -> int:
    """Every parameter the model holds (all experts of a mixture)."""
    if family not in COUNTED:
        return classic(family, s)
    return int(s["layers"]) * _layer(family, s, dims(family, s).experts) + _ends(family, s)


def active(family: str, s: dict[str, Any]) -> int:
    """The parameters one token goes through (a mixture's ``experts_per_token`` experts)."""
    if family not in COUNTED:
        return classic(family, s)
    return int(s["layers"]) * _layer(family, s, dims(family, s).active_experts) + _ends(family, s)


def classic(family: str, s: dict[str, Any]) -> int:
    """The families accelctl built before config.json, as the worker builds them
    (``accelctl.worker.models``): BloomForCausalLM (fused QKV and every linear with a bias,
    LayerNorms, an embedding LayerNorm, tied head), GPT2LMHeadModel (learned positions,
    MLP 4 x hidden unless ``ffn``), BertForMaskedLM (positions, 2 token types, the MLM head's
    transform and output bias, no pooler), T5ForConditionalGeneration (attention width heads
    x ``kv``, no biases, RMS-style norms, relative position biases of 32 buckets in the first
    layer of each stack, tied head) and timm's VisionTransformer (patch convolution, class
    token, learned positions, MLP ``mlp_ratio`` x hidden, class head)."""
    h, L = int(s["hidden"]), int(s["layers"])
    if family == "bloom":
        return int(s["vocab"]) * h + 4 * h + L * (12 * h * h + 13 * h)
    if family in ("gpt2", "bert"):
        f = int(s.get("ffn") or 4 * h)
        layer = 4 * h * h + 2 * h * f + 9 * h + f
        v, p = int(s["vocab"]), int(s.get("max_positions") or (1024 if family == "gpt2" else 512))
        if family == "gpt2":
            return v * h + p * h + L * layer + 2 * h
        return v * h + p * h + 2 * h + 2 * h + L * layer + h * h + 3 * h + v
    if family == "t5":
        heads, f = int(s["heads"]), int(s.get("ffn") or 4 * h)
        inner = heads * int(s.get("kv") or h // heads)
        enc, dec = 4 * h * inner + 2 * h * f + 2 * h, 8 * h * inner + 2 * h * f + 3 * h
        return int(s["vocab"]) * h + L * (enc + dec) + 2 * (h + 32 * heads)
    if family == "vit":
        f = int(float(s.get("mlp_ratio", 4.0)) * h)
        p, c, classes = int(s["patch"]), int(s.get("channels", 3)), int(s.get("classes", 1000))
        tokens = (int(s["image_size"]) // p) ** 2 + 1
        layer = 4 * h * h + 2 * h * f + 9 * h + f
        return c * p * p * h + h + h + tokens * h + L * layer + 2 * h + h * classes + classes
    raise ValueError(f"no parameter formula for family {family!r}")
