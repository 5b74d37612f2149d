"""Model catalog: architecture families, their stand-in shape keys, and known Hub models.

A family is what the worker knows how to build from a config with random weights
(``stand_in`` / architecture models).  Each family lists the shape keys the DSL accepts
with their defaults (tiny, so a CPU runs them in seconds) and the tasks it can do.

``KNOWN_MODELS`` holds the real sizes of the Hub models the seeds use, so the planner
can estimate memory for the real model while the CPU runs the stand-in.
"""

from __future__ import annotations

from typing import Any

from accelctl.frozen import Value, field


class Family(Value):
    name: str
    #: what builds it: transformers, timm, diffusers
    library: str
    #: tasks the worker implements for this family
    tasks: tuple[str, ...]
    #: shape keys and their defaults (the stand-in used when none is given)
    shape: dict[str, int | float] = field(default_factory=dict)
    #: transformer-like (has layers of attention): Transformer Engine can swap its blocks
    transformer: bool = True
    #: convolutional (Neuron SDK of the seeds' era cannot train CNNs)
    convolutional: bool = False
    #: takes 4-D image tensors through convolutions (a patch-embedding or UNet conv): the
    #: channels-last memory format applies (``optimize { channels_last = on }``)
    image_input: bool = False
    #: learned absolute position embeddings: a sequence longer than ``max_positions`` has no
    #: embedding (an IndexError in the worker), unlike ALiBi (BLOOM), rotary (Llama) or T5's
    #: relative positions
    absolute_positions: bool = False
    #: known by the facts of transformers' own class for its config.json, not by formulas
    #: (``accelctl.models.module_family``): never written as an architecture or a family
    from_module: bool = False


_LM = {"layers": 2, "hidden": 64, "heads": 4, "ffn": 172, "vocab": 1000, "max_positions": 512}
#: the decoder-only families read from config.json (``accelctl.models.hf_config``), counted
#: exactly by ``accelctl.models.param_count``; ``kv_heads`` (default: heads), ``head_dim``
#: (default: hidden / heads) and llama's ``attn_bias`` are accepted beside these (``OPTIONAL``)
_DECODERS: dict[str, dict[str, int | float | bool]] = {
    "mistral": {**_LM, "tied": False},
    "qwen2": {**_LM, "tied": False},
    "gemma": {**_LM, "tied": True},
    "mixtral": {**_LM, "tied": False, "experts": 4, "experts_per_token": 2},
    "gpt_neox": {**_LM, "ffn": 256, "tied": False},
    "falcon": {**_LM, "ffn": 256, "kv_heads": 1, "tied": True, "new_arch": False, "parallel_attn": True,
               "bias": False},
}

#: the largest size an architecture takes (layers, widths, heads, vocabulary, context), written
#: or read from config.json: past any real model, and every product of sizes stays finite
MAX_SIZE = 10**7

#: shape keys a family accepts without a default (absent = derived from the others)
OPTIONAL: dict[str, tuple[str, ...]] = {
    **{f: ("kv_heads", "head_dim") for f in ("llama", "mistral", "qwen2", "gemma", "mixtral")},
    "llama": ("kv_heads", "head_dim", "attn_bias"),
}

FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "bloom", "transformers", ("generate", "infer", "pretrain", "finetune"),
            {"layers": 2, "hidden": 64, "heads": 4, "vocab": 1000},
        ),
        Family(
            "gpt2", "transformers", ("generate", "infer", "pretrain", "finetune"),
            {"layers": 2, "hidden": 64, "heads": 4, "vocab": 1000, "max_positions": 512},
            absolute_positions=True,
        ),
        Family(
            "llama", "transformers", ("generate", "infer", "pretrain", "finetune"),
            {**_LM, "tied": False},
        ),
        *(Family(name, "transformers", ("generate", "infer", "pretrain", "finetune"), shape)
          for name, shape in _DECODERS.items()),
        Family(
            "bert", "transformers", ("pretrain", "finetune", "infer"),
            {"layers": 2, "hidden": 64, "heads": 4, "ffn": 256, "vocab": 1000, "max_positions": 512},
            absolute_positions=True,
        ),
        Family(
            "t5", "transformers", ("finetune", "pretrain", "generate", "infer"),
            {"layers": 2, "hidden": 64, "heads": 4, "ffn": 128, "kv": 16, "vocab": 1000},
        ),
        Family(
            "transformers", "transformers", ("generate", "infer", "pretrain", "finetune"), {}, from_module=True,
        ),
        Family(
            "vit", "timm", ("pretrain", "finetune", "infer"),
            {"layers": 2, "hidden": 64, "heads": 4, "mlp_ratio": 4.0, "image_size": 32, "patch": 8, "classes": 10},
            image_input=True,
        ),
        Family(
            "stable_diffusion", "diffusers", ("infer",),
            {"channels": 32, "layers_per_block": 1, "image_size": 64, "text_layers": 2, "text_hidden": 32,
             "heads": 2, "vocab": 1000},
            transformer=False, convolutional=True, image_input=True,
        ),
    )
}


#: the families an architecture, a stand-in or ``family = ...`` may name (not those read from a module)
WRITTEN = tuple(name for name, f in FAMILIES.items() if not f.from_module)


class KnownModel(Value):
    """A real model's architecture and published size, so planning needs no network."""

    hub_id: str
    family: str
    #: published parameter count (model card / paper)
    params: float
    #: the architecture, in the family's shape keys: what the worker builds (random init
    #: unless the weights are loaded) and what memory and FLOP estimates read
    shape: dict[str, Any]
    #: sequence length the seeds use, or the model's default context
    seq_len: int = 512


_BLOOM_176B = {"layers": 70, "hidden": 14336, "heads": 112, "vocab": 250880}
_T5_3B = {"layers": 24, "hidden": 1024, "heads": 32, "ffn": 16384, "kv": 128, "vocab": 32128}
# Stable Diffusion 1.x: UNet block_out_channels 320/640/1280/1280, 2 layers per block, 8
# attention heads, cross-attention 768; VAE 128/256/512/512; CLIP ViT-L/14 text encoder
# (12 layers, 768 wide, 12 heads, 49408 tokens); 512 px images, 64 x 64 latents
# (CompVis/stable-diffusion-v1-4 unet/vae/text_encoder config.json)
_SD_V1 = {"channels": 320, "unet_channels": [320, 640, 1280, 1280], "layers_per_block": 2, "heads": 8,
          "vae_channels": [128, 256, 512, 512], "vae_layers_per_block": 2, "image_size": 512,
          "text_layers": 12, "text_hidden": 768, "text_heads": 12, "vocab": 49408}

#: sources: the models' config.json on the Hub (layers, widths, vocabularies) and their
#: model cards / papers (published sizes): BLOOM 176B (BigScience, 2022), BERT-Large 340M
#: / Base 110M (Devlin et al., 2019), T5-3B 2.8B (Raffel et al., 2020), ViT-H/14 632M and
#: ViT-B/16 86M (Dosovitskiy et al., 2021), SD 1.x 1.07B = UNet 860M + VAE 84M + text 123M
KNOWN_MODELS: dict[str, KnownModel] = {
    m.hub_id: m
    for m in (
        KnownModel("bigscience/bloomz", "bloom", 176.2e9, _BLOOM_176B, 2048),
        KnownModel("bigscience/bloom", "bloom", 176.2e9, _BLOOM_176B, 2048),
        KnownModel("bigscience/bloomz-7b1", "bloom", 7.07e9,
                   {"layers": 30, "hidden": 4096, "heads": 32, "vocab": 250880}, 2048),
        KnownModel("bert-large-uncased", "bert", 336e6,
                   {"layers": 24, "hidden": 1024, "heads": 16, "ffn": 4096, "vocab": 30522, "max_positions": 512}, 128),
        KnownModel("bert-base-uncased", "bert", 110e6,
                   {"layers": 12, "hidden": 768, "heads": 12, "ffn": 3072, "vocab": 30522, "max_positions": 512}, 128),
        KnownModel("t5-3b", "t5", 2.85e9, _T5_3B, 1024),
        KnownModel("google-t5/t5-3b", "t5", 2.85e9, _T5_3B, 1024),
        KnownModel("CompVis/stable-diffusion-v1-4", "stable_diffusion", 1.07e9, _SD_V1, 77),
        KnownModel("runwayml/stable-diffusion-v1-5", "stable_diffusion", 1.07e9, _SD_V1, 77),
        KnownModel("timm/vit_huge_patch14_224", "vit", 632e6,
                   {"layers": 32, "hidden": 1280, "heads": 16, "mlp_ratio": 4.0, "image_size": 224, "patch": 14,
                    "classes": 1000}, 257),
        KnownModel("timm/vit_base_patch16_224", "vit", 86.6e6,
                   {"layers": 12, "hidden": 768, "heads": 12, "mlp_ratio": 4.0, "image_size": 224, "patch": 16,
                    "classes": 1000}, 197),
        KnownModel("gpt2", "gpt2", 124e6,
                   {"layers": 12, "hidden": 768, "heads": 12, "vocab": 50257, "max_positions": 1024}, 1024),
    )
}


def real_architecture(family: str, written: dict[str, Any]) -> dict[str, Any]:
    """A real-size architecture from the sizes a workload wrote (``model bert(layers = 48,
    hidden = 1600, ...)``): what it left out takes the real models' usual values (feed-forward
    4 x hidden, the family's usual vocabulary and context, 224 px images in 16 px patches,
    1000 classes), never the tiny stand-in defaults."""
    s = dict(written)
    h = int(s.get("hidden", 0)) or None
    usual: dict[str, Any] = {
        "bloom": {"vocab": 250880},
        "gpt2": {"vocab": 50257, "max_positions": 1024},
        "llama": {"vocab": 32000, "max_positions": 4096},
        "mistral": {"vocab": 32000, "max_positions": 32768},
        "qwen2": {"vocab": 152064, "max_positions": 32768},
        "gemma": {"vocab": 256000, "max_positions": 8192},
        "mixtral": {"vocab": 32000, "max_positions": 32768, "experts": 8, "experts_per_token": 2},
        "gpt_neox": {"vocab": 50432, "max_positions": 2048},
        "falcon": {"vocab": 65024, "max_positions": 2048},
        "bert": {"vocab": 30522, "max_positions": 512},
        "t5": {"vocab": 32128},
        "vit": {"mlp_ratio": 4.0, "image_size": 224, "patch": 16, "classes": 1000},
        "stable_diffusion": dict(_SD_V1),
    }.get(family, {})
    if h and family in ("gpt2", "bert", "t5", "llama", "gpt_neox", "falcon"):
        usual["ffn"] = int(8 * h / 3) if family == "llama" else 4 * h
    if h and family == "t5" and "heads" in s:
        usual["kv"] = h // int(s["heads"])
    return {**FAMILIES[family].shape, **usual, **s} if family in FAMILIES else s


def shape_problems(s: dict[str, Any], names: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """(message, hint) of each way these sizes do not fit together, whatever wrote them (an
    architecture's arguments, config.json): the hidden size split evenly over the heads unless
    ``head_dim`` gives a head's width, the key/value heads at most the heads and dividing them,
    a mixture's experts per token among its experts.  ``names``: shape key -> the key as written
    (config.json's ``hidden_size``), so the message names what the reader can find."""
    def n(key: str) -> str:
        return (names or {}).get(key, key)

    out = []
    h, heads, kv = s.get("hidden"), s.get("heads"), s.get("kv_heads")
    if h and heads and not s.get("head_dim") and h % heads:
        out.append((f"{n('hidden')} = {h} is not divisible by {n('heads')} = {heads}",
                    "attention splits the hidden size evenly across heads"))
    if kv and heads and (kv > heads or heads % kv):
        out.append((f"{n('kv_heads')} = {kv} is more than {n('heads')} = {heads}" if kv > heads else
                    f"{n('heads')} = {heads} is not a multiple of {n('kv_heads')} = {kv}",
                    "grouped-query attention shares each key/value head among the same number of heads"))
    experts, per_token = s.get("experts"), s.get("experts_per_token")
    if experts and per_token and per_token > experts:
        out.append((f"{n('experts_per_token')} = {per_token} is more than {n('experts')} = {experts}",
                    "each token runs experts_per_token of the experts"))
    return out


#: training objective when the task does not name one, by family (causal LM otherwise)
DEFAULT_OBJECTIVE = {"bert": "mlm", "t5": "seq2seq", "vit": "classification"}


def objective_for(family: str, written: str = "") -> str:
    """The training objective: the one written in the task, else the family's default."""
    return written or DEFAULT_OBJECTIVE.get(family, "causal_lm")


def stand_in_for(family: str, real: dict[str, Any]) -> dict[str, Any]:
    """The family's tiny stand-in with the real model's structure: its grouped-query ratio
    (kv_heads per head), tied or untied embeddings, biases and layer layout, a mixture's
    experts (at most 4) and experts per token, and its context length (so the stand-in takes the
    real sequence lengths; learned position tables grow with it, rotary ones have no weights)."""
    s = dict(FAMILIES[family].shape)
    heads = int(s.get("heads", 1))
    if "kv_heads" in real and int(real.get("heads") or 0):
        s["kv_heads"] = max(1, heads * int(real["kv_heads"]) // int(real["heads"]))
        while heads % s["kv_heads"]:
            s["kv_heads"] -= 1
    for key in ("tied", "attn_bias", "new_arch", "parallel_attn", "bias", "max_positions"):
        if key in real:
            s[key] = real[key]
    if "experts" in real:
        s["experts"] = min(4, int(real["experts"]))
        s["experts_per_token"] = min(s["experts"], int(real.get("experts_per_token", 2)))
    return s

