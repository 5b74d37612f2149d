"""Exact parameter counts of the decoder-only families people run now, from their shape keys.

Each formula is the sum of the weight (and bias) tensors transformers' own class builds for that
config: llama / mistral / qwen2 / gemma / mixtral (grouped-query attention, gated MLP, mixtral's
experts and router), gpt_neox and falcon.  ``tests/language/test_param_count.py`` checks them against
the classes built on the meta device from the real models' config.json.  Per-family tensors: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

from typing import Any

from accelctl.frozen import Value

#: families whose layers are llama's (RMSNorm, rotary, gated MLP, grouped-query attention)
LLAMA_LIKE = ("llama", "mistral", "qwen2", "gemma", "mixtral")
#: the decoder families of config.json whose layers ``dims`` describes
COUNTED = (*LLAMA_LIKE, "gpt_neox", "falcon")
#: the family known by its module's facts (``accelctl.models.module_family``): its shape holds
#: the counts the module gave and the widths of its layers
FROM_MODULE = "transformers"
#: every family this module counts exactly
EXACT = (*COUNTED, "bloom", "gpt2", "bert", "t5", "vit", FROM_MODULE)
#: the families whose layers ``dims`` describes
DIMMED = (*COUNTED, FROM_MODULE)


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
    if family == FROM_MODULE:  # ffn: the MLP width a token goes through (a mixture's active experts)
        d = int(s["head_dim"])
        return Dims(h, heads * d, int(s["kv_heads"]) * d, int(s["ffn"]), 3, 1, 1)
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
    if family == FROM_MODULE:
        return int(s["params"])
    if family not in COUNTED:
        return classic(family, s)
    return int(s["layers"]) * _layer(family, s, dims(family, s).experts) + _ends(family, s)


def active(family: str, s: dict[str, Any]) -> int:
    """The parameters one token goes through (a mixture's ``experts_per_token`` experts)."""
    if family == FROM_MODULE:
        return int(s["active_params"])
    if family not in COUNTED:
        return classic(family, s)
    return int(s["layers"]) * _layer(family, s, dims(family, s).active_experts) + _ends(family, s)


def classic(family: str, s: dict[str, Any]) -> int:
    """The families accelctl built before config.json, as ``accelctl.worker.models`` builds them:
    BloomForCausalLM, GPT2LMHeadModel, BertForMaskedLM, T5ForConditionalGeneration and timm's
    VisionTransformer (the tensors each has: docs/internals/estimate-backends-worker.md).
    """
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
