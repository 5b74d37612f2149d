"""The ``transformers`` family: a causal LM whose config.json transformers has a class for but
accelctl has no formulas for (gemma2, phi3, deepseek_v2, ...), known by the facts of that class.

One path for every such ``model_type``, no per-family branch: ``load(path)`` asks
``meta_facts`` (a subprocess that builds the class on the meta device; cached) for the facts of
the model and of its stand-in, and turns them into shape keys.  The sizes the estimates read
(``layers hidden heads kv_heads head_dim ffn vocab tied experts experts_per_token window``)
sit beside the counts they take as they are (``params active_params kv_per_token
flops_per_token attention_flops sliding_attention_flops``), the class and the layer FSDP wraps
(``class_name block``), and the config the worker builds (``model_type config``).

The stand-in is the same class at a small size (``stand_in_config``): its sizes shrunk key by
key of config.json, keeping what makes the architecture what it is (key/value heads dividing
the heads, explicit head widths, the sliding window, a mixture with few experts, dense layers
before the mixture), so "a gemma2 stand-in is a small gemma2".
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from accelctl.models import hf_config
from accelctl.models.param_count import FROM_MODULE

if TYPE_CHECKING:  # asked only for a config without formulas: validate of the others starts no process
    from accelctl.models import meta_facts

#: the family's name in the catalog and the spec
FAMILY = FROM_MODULE
#: config.json keys never handed to the class: remote code and provenance
DROPPED = ("auto_map", "_name_or_path", "transformers_version", "architectures", "torch_dtype", "dtype")
#: the stand-in's sizes, by config.json key (set only where the config has the key and a value)
SMALL = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "moe_intermediate_size": 32,
         "shared_expert_intermediate_size": 32, "vocab_size": 1000, "num_attention_heads": 4, "head_dim": 16,
         "kv_lora_rank": 32, "q_lora_rank": 48, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16}
#: the mixture's expert counts, by config.json key: at most this many in the stand-in
EXPERT_KEYS = ("n_routed_experts", "num_local_experts", "num_experts")
MAX_EXPERTS = 4
#: keys at most this in the stand-in: routing groups over few experts, dense layers before the mixture
AT_MOST = {"n_group": 1, "topk_group": 1, "first_k_dense_replace": 1, "n_shared_experts": 1}
#: the stand-in's special tokens: the worker's byte tokenizer's (``ByteTokenizer``)
TOKENS = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}


class ModuleUnavailable(hf_config.UnknownModelType):
    """The model's facts could not be read from its class: torch/transformers missing, a
    model_type transformers has no class for, or a class accelctl does not run."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.hint = hint


def usable(cfg: dict[str, Any]) -> bool:
    """Whether a config.json without formulas goes to its module: it names a model_type."""
    return isinstance(cfg.get("model_type"), str) and bool(cfg["model_type"])


def model_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """The config.json keys the class is built from (``DROPPED`` left out)."""
    return {k: v for k, v in cfg.items() if k not in DROPPED}


def stand_in_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` at the stand-in's size (see the module doc): sizes from ``SMALL``, the key/value
    heads in the real ratio to the heads, at most ``MAX_EXPERTS`` experts and as many per token
    as fit, one layer of each kind a ``layer_types`` list names, rope factors cut to the width."""
    small = model_config(cfg)
    for key, value in SMALL.items():
        if small.get(key) is not None:
            small[key] = value
    heads, real_heads = SMALL["num_attention_heads"], cfg.get("num_attention_heads")
    if isinstance(cfg.get("num_key_value_heads"), int) and isinstance(real_heads, int) and real_heads > 0:
        kv = max(1, heads * cfg["num_key_value_heads"] // real_heads)
        while heads % kv:
            kv -= 1
        small["num_key_value_heads"] = kv
    for key in EXPERT_KEYS:
        if isinstance(small.get(key), int):
            small[key] = experts = min(MAX_EXPERTS, small[key])
            k = cfg.get("num_experts_per_tok")
            if isinstance(k, int) and isinstance(cfg[key], int):  # routed to some of them, as the real one is
                small["num_experts_per_tok"] = min(k, max(1, experts // 2)) if k < cfg[key] else experts
    for key, most in AT_MOST.items():
        if isinstance(small.get(key), int):
            small[key] = min(most, small[key])
    if isinstance(small.get("layer_types"), list) and small["layer_types"]:
        kinds = list(dict.fromkeys(small["layer_types"]))[:SMALL["num_hidden_layers"]]
        small["layer_types"] = (kinds * SMALL["num_hidden_layers"])[:SMALL["num_hidden_layers"]]
    if isinstance(small.get("rope_scaling"), dict):
        width = small.get("qk_rope_head_dim") or small.get("head_dim") or (
            SMALL["hidden_size"] // SMALL["num_attention_heads"])
        half = int(width * float(small.get("partial_rotary_factor") or 1.0)) // 2
        small["rope_scaling"] = {k: v[:half] if isinstance(v, list) else v for k, v in small["rope_scaling"].items()}
    small.update(TOKENS)
    return small


def load(path: Path) -> tuple[str, dict[str, Any]]:
    """(``FAMILY``, shape) of the config.json at ``path`` from its class's facts, the stand-in's
    shape under ``"stand_in"``; ``ModuleUnavailable`` (its message starting with the path) where
    they cannot be had."""
    from accelctl.models import meta_facts

    cfg = hf_config.read(path)
    if not usable(cfg):
        raise hf_config.UnknownModelType(f"{path}: no model_type: which transformers class to build is unknown")
    try:
        # the file as written (an auto_map is seen, and said unused); the class a causal LM's
        real, small = meta_facts.facts_of([{k: v for k, v in cfg.items() if k != "architectures"},
                                           stand_in_config(cfg)])
    except meta_facts.Unavailable as exc:
        needs = str(exc).partition("needs ")[2] or f"torch and transformers: pip install 'accelctl[{meta_facts.EXTRA}]'"
        raise ModuleUnavailable(
            f"{path}: model_type {cfg['model_type']!r} has no formulas in accelctl; its shape is read from "
            f"transformers' own class, which needs {needs}",
            f"install the extra (pip install 'accelctl[{meta_facts.EXTRA}]'), or write shape = <family>(...) "
            "if the model is one of the families with formulas") from None
    except meta_facts.FactsError as exc:
        raise ModuleUnavailable(f"{path}: {exc}", "accelctl reads such a model only through transformers' own "
                                                  "class; it never runs a model's remote code") from None
    shape = shape_of(cfg, real)
    shape["stand_in"] = shape_of(stand_in_config(cfg), small)
    return FAMILY, shape


def shape_of(cfg: dict[str, Any], f: meta_facts.ModelFacts) -> dict[str, Any]:
    """The shape keys of a model from its facts (see the module doc)."""
    if not f.class_name.endswith("ForCausalLM"):
        raise ModuleUnavailable(f"model_type {f.model_type!r} builds {f.class_name}: accelctl runs the models it "
                                "has no formulas for as causal LMs only (a ...ForCausalLM class)")
    layers, attention, flops = f.layers, f.attention, f.flops
    if layers is None or attention is None or flops is None or not layers.vocab:
        raise ModuleUnavailable(f"model_type {f.model_type!r} builds {f.class_name}, whose layer stack, attention "
                                "or vocabulary accelctl cannot read from the module (it estimates transformer "
                                "decoders), so its memory and FLOPs are unknown")
    p, moe = f.parameters, f.moe
    ffn = layers.intermediate or 4 * layers.hidden
    if moe is not None and moe.expert_intermediate and 2 * moe.moe_layers > layers.count:
        ffn = moe.expert_intermediate * (moe.top_k + moe.shared_experts)  # the width a token goes through
    s: dict[str, Any] = {
        "model_type": f.model_type, "class_name": f.class_name,
        "block": layers.block or (f.no_split_modules[0] if f.no_split_modules else ""),
        "layers": layers.count, "hidden": layers.hidden, "heads": attention.heads, "kv_heads": attention.kv_heads,
        "head_dim": attention.head_dim, "ffn": ffn, "vocab": layers.vocab, "tied": p.tied_embeddings,
        "attention": attention.kind,
        "params": p.total, "active_params": p.active, "flops_per_token": flops.per_token,
        "attention_flops": flops.attention_per_position, "sliding_attention_flops": flops.sliding_attention_per_position,
    }
    if isinstance(cfg.get("max_position_embeddings"), int):
        s["max_positions"] = cfg["max_position_embeddings"]
    if attention.sliding_window:
        s["window"] = attention.sliding_window
    if moe is not None:
        s.update(experts=moe.routed_experts, experts_per_token=moe.top_k)
    if f.kv_cache is not None:
        s["kv_per_token"] = f.kv_cache.elements_per_token
    s["config"] = model_config(cfg)
    return s
