"""A model's facts read from the real module, built by its library's own class on the meta device.

Runs as its own process (``python -m accelctl.models.module_facts``), started by
``accelctl.models.meta_facts``, which is the only caller: it reads one JSON request on stdin
and writes one JSON answer on stdout, ``{"ok": true, "facts": {...}}`` or ``{"ok": false,
"error": "..."}``.  It imports torch, transformers and diffusers, so nothing that plans or
validates may import it.

The module is built on the meta device (shapes, no memory), never with remote code: a config
whose ``model_type`` transformers does not know is refused, and so is an ``auto_map`` unless
transformers has its own class for that ``model_type`` (then the ``auto_map`` is ignored and
the facts say so).  Parameters are classified by walking the module tree (module class names
and parameter names), not by per-family formulas; the KV cache is what one forward pass of a
few tokens on the meta device leaves in the model's own cache.  docs/model-facts.md says which
fact comes from where.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

#: the parameter classes, in the order the answer lists them
CATEGORIES = ("embeddings", "attention", "mlp", "experts", "router", "shared_experts", "norms", "lm_head", "conv",
              "other")
#: tokens run through the meta forward pass that reads the cache (fewer than any sliding window)
PROBE_TOKENS = 4
_ATTENTION_NAMES = frozenset(("self_attn", "attn", "attention", "self_attention", "cross_attn", "attn1", "attn2",
                              "encdecattention", "selfattention"))
_MLP_NAMES = frozenset(("mlp", "ffn", "feed_forward", "ff", "densereluddense", "intermediate", "output"))


#: a size key of config.json (``num_*``, ``n_*``, ``*_size``, ``*_dim``, ``*_layers``, ...)
_SIZE_KEY = re.compile(r"^(num_|n_)|(_size|_dim|_layers|_heads|_experts|_rank|_channels)$")
#: the largest size a config may give (a width, a vocabulary) and the most layers: past these
#: no model is, and building one would only exhaust the process's memory or time
MAX_SIZE = 2**36
MAX_LAYERS = 4096


class Refused(ValueError):
    """The request names something this module will not build (remote code, an unknown type)."""


# ------------------------------------------------------------------------------- building


def _transformers_model(cfg: dict[str, Any]):
    """The library's own model class for the config.json ``cfg``, built on the meta device; and
    the notes to pass on (an ``auto_map`` left unused)."""
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    notes: list[str] = []
    model_type = cfg.get("model_type")
    if not isinstance(model_type, str) or not model_type:
        raise Refused("config.json has no model_type: which transformers class to build is unknown")
    if model_type not in CONFIG_MAPPING:
        remote = " (its auto_map names remote code, which accelctl never runs)" if "auto_map" in cfg else (
            ": transformers has no class for it, and accelctl never runs a model's own remote code")
        raise Refused(f"model_type {model_type!r} is not one transformers {transformers.__version__} knows{remote}")
    _check_sizes(cfg)
    rest = {k: v for k, v in cfg.items() if k not in ("model_type", "auto_map")}
    if "auto_map" in cfg:
        notes.append(f"auto_map ignored: remote code is never run; built with transformers' own {model_type} classes")
    config = transformers.AutoConfig.for_model(model_type, **rest)
    cls = _model_class(transformers, config, cfg.get("architectures"))
    with torch.device("meta"):
        model = cls._from_config(config) if hasattr(cls, "_from_config") else cls(config)
    model.eval()
    return model, config, notes


def _check_sizes(cfg: dict[str, Any], where: str = "") -> None:
    """Refuse a size no model has: negative, past ``MAX_SIZE``, or more than ``MAX_LAYERS`` layers."""
    for k, v in cfg.items():
        if isinstance(v, dict):
            _check_sizes(v, f"{where}{k}.")
        if type(v) is not int or not _SIZE_KEY.search(k):
            continue
        if v < 0:
            raise Refused(f"{where}{k} = {v}: a size cannot be negative")
        if v > MAX_SIZE or (k.endswith("layers") and v > MAX_LAYERS):
            raise Refused(f"{where}{k} = {v}: larger than any model (building it would only exhaust memory)")


def _model_class(transformers, config, architectures):
    """The class to build: the one ``architectures`` names when transformers has it for this
    config class, else the first auto class (causal LM, seq2seq, masked LM, base) that maps it."""
    from transformers.models.auto import modeling_auto as auto

    mappings = (auto.MODEL_FOR_CAUSAL_LM_MAPPING, auto.MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING,
                auto.MODEL_FOR_MASKED_LM_MAPPING, auto.MODEL_MAPPING)
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        cls = getattr(transformers, architectures[0], None)
        if (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)
                and getattr(cls, "config_class", None) is type(config)):
            return cls
    for mapping in mappings:
        try:
            return mapping[type(config)]
        except KeyError:
            continue
    raise Refused(f"transformers has no model class for {type(config).__name__}")


def _component(library: str, class_name: str, cfg: dict[str, Any]):
    """One component of a diffusers pipeline, built on the meta device by the class its
    model_index.json names: a diffusers model or a transformers model, nothing else."""
    import torch

    if library == "diffusers":
        import diffusers

        _check_sizes(cfg)
        cls = getattr(diffusers, class_name, None)
        if not (isinstance(cls, type) and issubclass(cls, diffusers.ModelMixin)):
            raise Refused(f"{class_name!r} is not a diffusers model class")
        with torch.device("meta"):
            model = cls.from_config(cfg)
        return model
    if library == "transformers":
        import transformers

        cls = getattr(transformers, class_name, None)
        if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)):
            raise Refused(f"{class_name!r} is not a transformers model class")
        if "auto_map" in cfg:
            raise Refused(f"{class_name}'s config has an auto_map (remote code, which accelctl never runs)")
        _check_sizes(cfg)
        config = cls.config_class(**{k: v for k, v in cfg.items() if k != "model_type"})
        with torch.device("meta"):
            model = cls._from_config(config)
        return model
    raise Refused(f"library {library!r}: only diffusers and transformers classes are built")


# ------------------------------------------------------------------------------- classifying


def _category(parts: list[str], chain: list, owner, output_embeddings) -> str:
    """The class of the parameter at ``parts`` (its dotted name, split), from the modules on
    its path (``chain``, the model itself left out) and the module that holds it (``owner``)."""
    import torch.nn as nn

    names = [p.lower() for p in parts[:-1]]
    classes = [type(m).__name__.lower() for m in chain]
    owner_class = type(owner).__name__.lower()
    if output_embeddings is not None and owner is output_embeddings:
        return "lm_head"
    if isinstance(owner, nn.Embedding) or any("embed" in n for n in names):
        return "embeddings"
    if "norm" in owner_class or (names and "norm" in names[-1]):
        return "norms"
    if any(n.startswith("shared_expert") for n in names):
        return "shared_experts"
    if "router" in owner_class or (names and names[-1] in ("gate", "router") and len(classes) >= 2
                                   and any(w in classes[-2] for w in ("moe", "sparse", "expert"))):
        return "router"
    if "experts" in names or any(c.endswith("experts") for c in classes):
        return "experts"
    if any("attention" in c or c.endswith("attn") for c in classes) or any(n in _ATTENTION_NAMES for n in names):
        return "attention"
    if any("mlp" in c or "feedforward" in c for c in classes) or any(n in _MLP_NAMES for n in names):
        return "mlp"
    if isinstance(owner, (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d)):
        return "conv"
    return "other"


def _is_matmul(owner, leaf: str, param, category: str) -> bool:
    """Whether the parameter is a matrix a token is multiplied by (a linear layer's weight, an
    expert bank, a router): embeddings are looked up, norms and biases added or scaled."""
    import torch.nn as nn

    if category in ("embeddings", "norms", "conv"):
        return False
    if isinstance(owner, nn.Linear) or type(owner).__name__ == "Conv1D":
        return leaf == "weight"
    return param.dim() >= 2 and category in ("experts", "router", "shared_experts")


def _walk(model) -> dict[str, Any]:
    """Parameters by class, counting a tensor held under two names (a tied head) once; the
    matmul parameters; the routed experts' banks."""
    modules = dict(model.named_modules(remove_duplicate=False))
    output_embeddings = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    seen: dict[int, str] = {}
    head_name = ""  # the name the output head's weight was counted under, when it was the head's own
    counts = dict.fromkeys(CATEGORIES, 0)
    tied = False
    matmul = 0
    routed_matmul = 0
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:
            tied = True
            continue
        seen[id(param)] = name
        parts = name.split(".")
        chain = [modules[".".join(parts[:i])] for i in range(1, len(parts))]
        owner = chain[-1] if chain else model
        category = _category(parts, chain, owner, output_embeddings)
        counts[category] += param.numel()
        if category == "lm_head":
            head_name = name
        if _is_matmul(owner, parts[-1], param, category):
            matmul += param.numel()
            if category == "experts":
                routed_matmul += param.numel()
    head = getattr(output_embeddings, "weight", None) if output_embeddings is not None else None
    if head is not None and id(head) in seen and seen[id(head)] != head_name:
        matmul += head.numel()  # a tied head: the logits multiply by the embedding matrix
    return {"counts": counts, "tied": tied, "matmul": matmul, "routed_matmul": routed_matmul}


def _moe(model, config) -> dict[str, Any] | None:
    """Routed experts, top-k and shared experts, read from the expert banks and routers built."""
    experts_modules = [(n, m) for n, m in model.named_modules() if n.split(".")[-1] == "experts"]
    if not experts_modules:
        return None
    first = experts_modules[0][1]
    routed = getattr(first, "num_experts", None)
    if routed is None:
        routed = len(first) if hasattr(first, "__len__") else None
    if routed is None:
        params = list(first.parameters(recurse=False))
        routed = params[0].shape[0] if params and params[0].dim() == 3 else 0
    top_k = None
    for _, m in model.named_modules():
        for attr in ("top_k", "num_experts_per_tok"):
            value = getattr(m, attr, None)
            if isinstance(value, int) and m is not model:
                top_k = value
                break
        if top_k is not None:
            break
    if top_k is None:
        top_k = int(getattr(config, "num_experts_per_tok", 0) or 0)
    intermediate = getattr(first, "intermediate_dim", None) or getattr(config, "moe_intermediate_size", None)
    shared = 0
    for n, m in model.named_modules():
        if n.split(".")[-1].startswith("shared_expert") and not n.endswith("_gate"):
            width = getattr(m, "intermediate_size", None)
            shared = width // intermediate if width and intermediate and width % intermediate == 0 else 1
            break
    return {"routed_experts": int(routed), "top_k": int(top_k), "shared_experts": int(shared),
            "moe_layers": len(experts_modules), "expert_intermediate": int(intermediate) if intermediate else None}


def _layer_list(model, count: int):
    """The decoder's stack: the first ModuleList of ``count`` blocks."""
    import torch.nn as nn

    for _, m in model.named_modules():
        if isinstance(m, nn.ModuleList) and len(m) == count and count > 0:
            return m
    return None


def _attention_module(layer):
    for n, m in layer.named_modules():
        if n and n.split(".")[-1] in _ATTENTION_NAMES:
            return m
    return None


def _probe_cache(model) -> list[tuple[int, int | None]] | None:
    """Per layer of the model's own cache after a forward pass of ``PROBE_TOKENS`` tokens on the
    meta device: (elements a token adds, the sliding window or None); None where the model has
    no cache or the pass cannot run on the meta device."""
    import torch

    ids = torch.zeros(1, PROBE_TOKENS, dtype=torch.long, device="meta")
    cache = None
    for dtype in (None, torch.bfloat16):  # grouped expert matmuls take 16-bit matrices only
        try:
            if dtype is not None:
                model.to(dtype)  # on the meta device: no memory, and the counts are taken
            with torch.no_grad():
                cache = model(input_ids=ids, use_cache=True).past_key_values
            break
        except Exception:  # noqa: BLE001 -- a model whose forward needs real values has no probed cache
            continue
    layers = getattr(cache, "layers", None)
    if not layers:
        return None
    per_layer = []
    for layer in layers:
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        if keys is None or values is None or keys.dim() != 4 or keys.shape[2] != PROBE_TOKENS:
            return None
        elements = int(keys.shape[1] * keys.shape[3] + values.shape[1] * values.shape[3])
        per_layer.append((elements, getattr(layer, "sliding_window", None)))
    return per_layer


def _transformers_facts(cfg: dict[str, Any]) -> dict[str, Any]:
    model, config, notes = _transformers_model(cfg)
    walked = _walk(model)
    counts = walked["counts"]
    total = sum(counts.values())
    moe = _moe(model, config)
    routed = counts["experts"]
    if moe and moe["routed_experts"]:
        active = total - routed + routed * moe["top_k"] // moe["routed_experts"]
        routed_matmul = walked["routed_matmul"]
        active_matmul = walked["matmul"] - routed_matmul + routed_matmul * moe["top_k"] // moe["routed_experts"]
    else:
        active, active_matmul = total, walked["matmul"]
    text = config.get_text_config(decoder=True) if hasattr(config, "get_text_config") else config
    count = int(getattr(text, "num_hidden_layers", 0) or 0)
    stack = _layer_list(model, count)
    probed = _probe_cache(model) if type(model).__name__.endswith("ForCausalLM") else None
    heads = int(getattr(text, "num_attention_heads", 0) or 0)
    hidden = int(getattr(text, "hidden_size", 0) or 0)
    attn = _attention_module(stack[0]) if stack is not None else None
    layers = attention = kv_cache = flops = None
    if stack is not None and attn is not None and heads:
        mla = getattr(attn, "kv_lora_rank", None) is not None
        head_dim = int(getattr(attn, "qk_head_dim", None) or getattr(attn, "head_dim", None)
                       or getattr(text, "head_dim", None) or hidden // heads)
        v_head_dim = int(getattr(attn, "v_head_dim", None) or head_dim)
        kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
        windows = [w for _, w in probed] if probed and len(probed) == count else [None] * count
        if probed and len(probed) == count and not mla:
            kv_heads = probed[0][0] // (head_dim + v_head_dim) or kv_heads
        kind = "mla" if mla else "mha" if kv_heads == heads else "mqa" if kv_heads == 1 else "gqa"
        window = next((w for w in windows if w), None)
        attention = {"kind": kind, "heads": heads, "kv_heads": kv_heads, "head_dim": head_dim,
                     "v_head_dim": v_head_dim, "sliding_window": window}
        if mla:
            attention.update(kv_lora_rank=int(attn.kv_lora_rank),
                             q_lora_rank=int(attn.q_lora_rank) if attn.q_lora_rank is not None else None,
                             qk_rope_head_dim=int(attn.qk_rope_head_dim), qk_nope_head_dim=int(attn.qk_nope_head_dim))
        mlp_kinds = tuple("moe" if any(n.split(".")[-1] == "experts" for n, _ in layer.named_modules()) else "dense"
                          for layer in stack)
        intermediate = getattr(text, "intermediate_size", None)
        vocab = getattr(text, "vocab_size", None)
        layers = {"count": count, "hidden": hidden, "intermediate": int(intermediate) if intermediate else None,
                  "attention": tuple("sliding" if w else "full" for w in windows), "mlp": mlp_kinds,
                  "block": type(stack[0]).__name__, "vocab": int(vocab) if vocab else None}
        if probed and len(probed) == count:
            kv_cache = {"elements_per_token": sum(e for e, _ in probed), "per_layer": tuple(e for e, _ in probed),
                        "stores": "latent and rope key" if mla else "keys and values", "window": window}
        per_position = 2 * heads * (head_dim + v_head_dim)  # QK^T and the weighted sum of V, per context position
        full = sum(1 for w in windows if not w)
        flops = {"matmul_params": walked["matmul"], "active_matmul_params": active_matmul,
                 "per_token": 2 * active_matmul, "attention_per_position": full * per_position,
                 "sliding_attention_per_position": (count - full) * per_position}
    return {"library": "transformers", "class_name": type(model).__name__, "model_type": cfg["model_type"],
            "parameters": {"total": total, "active": active, **counts, "tied_embeddings": walked["tied"]},
            "layers": layers, "attention": attention, "moe": moe, "kv_cache": kv_cache, "flops": flops,
            "components": (), "notes": tuple(notes),
            "no_split_modules": tuple(str(n) for n in (getattr(model, "_no_split_modules", None) or ()))}


def _pipeline_facts(index: dict[str, Any], configs: dict[str, Any]) -> dict[str, Any]:
    """Each model component of a diffusers pipeline (``index``: its model_index.json), and the sum."""
    components = []
    totals = dict.fromkeys(CATEGORIES, 0)
    for name in sorted(configs):
        entry = index.get(name)
        if not (isinstance(entry, list) and len(entry) == 2 and all(isinstance(e, str) for e in entry)):
            raise Refused(f"model_index.json names no class for {name!r}")
        library, class_name = entry
        model = _component(library, class_name, configs[name])
        walked = _walk(model)
        for k, v in walked["counts"].items():
            totals[k] += v
        total = sum(walked["counts"].values())
        components.append({"name": name, "library": library, "class_name": class_name,
                           "parameters": {"total": total, "active": total, **walked["counts"],
                                          "tied_embeddings": walked["tied"]}})
    total = sum(totals.values())
    return {"library": "diffusers", "class_name": str(index.get("_class_name", "")), "model_type": "pipeline",
            "parameters": {"total": total, "active": total, **totals, "tied_embeddings": False},
            "layers": None, "attention": None, "moe": None, "kv_cache": None, "flops": None,
            "components": tuple(components), "notes": ()}


def answer(request: Any) -> dict[str, Any]:
    """The facts for one request: ``{"config": {...}}`` (a config.json) or ``{"pipeline":
    {...}, "configs": {component: {...}}}`` (a diffusers folder's model_index.json and its
    components' config.json)."""
    if not isinstance(request, dict):
        raise Refused("the request is not a JSON object")
    if "config" in request:
        cfg = request["config"]
        if not isinstance(cfg, dict):
            raise Refused("config.json is not a JSON object")
        facts = _transformers_facts(cfg)
    elif "pipeline" in request:
        index, configs = request.get("pipeline"), request.get("configs")
        if not isinstance(index, dict) or not isinstance(configs, dict) or not all(
                isinstance(c, dict) for c in configs.values()):
            raise Refused("model_index.json or a component's config.json is not a JSON object")
        facts = _pipeline_facts(index, configs)
    else:
        raise Refused("the request names neither a config nor a pipeline")
    from accelctl.models.meta_facts import installed  # the versions the cache key names

    return {**facts, "versions": installed()}


def _one(request: Any) -> dict[str, Any]:
    """``answer`` as the reply says it: ``{"ok": true, "facts": ...}`` or ``{"ok": false, "error": ...}``."""
    try:
        return {"ok": True, "facts": answer(request)}
    except Refused as exc:  # the same request is refused the same way by the same libraries
        return {"ok": False, "error": str(exc), "refused": True}
    except MemoryError:
        return {"ok": False, "error": "building the module on the meta device ran out of its memory bound"}
    except Exception as exc:  # noqa: BLE001 -- the library's refusal of a config, reported as such
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {"ok": False, "error": f"{type(exc).__name__}: {first[:500]}"}


def main() -> int:
    """Read the request on stdin, write the answer on stdout (the libraries' own chatter goes
    to stderr); exit 0 with ``ok`` false for a refused or failed build.  ``{"batch": [...]}``
    answers several requests in one process (one import of the libraries)."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8")
    sys.stdout = sys.stderr  # a library's print must not corrupt the answer
    for name, value in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("TRANSFORMERS_VERBOSITY", "error"),
                        ("DIFFUSERS_VERBOSITY", "error")):
        os.environ.setdefault(name, value)
    try:
        request = json.loads(sys.stdin.read())
    except ValueError as exc:
        reply = {"ok": False, "error": f"the request is not JSON: {exc}"}
    else:
        if isinstance(request, dict) and isinstance(request.get("batch"), list):
            reply = {"ok": True, "answers": [_one(r) for r in request["batch"]]}
        else:
            reply = _one(request)
    out.write(json.dumps(reply, allow_nan=False))
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
