"""Model catalog: architecture families, their stand-in shape keys, and known Hub models.

A family is what the worker knows how to build from a config with random weights
(``stand_in`` / architecture models).  Each family lists the shape keys the DSL accepts
with their defaults (tiny, so a CPU runs them in seconds) and the tasks it can do.

``KNOWN_MODELS`` holds the real sizes of the Hub models the seeds use, so the planner
can estimate memory for the real model while the CPU runs the stand-in.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Family:
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
        ),
        Family(
            "llama", "transformers", ("generate", "infer", "pretrain", "finetune"),
            {"layers": 2, "hidden": 64, "heads": 4, "ffn": 172, "vocab": 1000, "max_positions": 512},
        ),
        Family(
            "bert", "transformers", ("pretrain", "finetune", "infer"),
            {"layers": 2, "hidden": 64, "heads": 4, "ffn": 256, "vocab": 1000, "max_positions": 512},
        ),
        Family(
            "t5", "transformers", ("finetune", "pretrain", "generate", "infer"),
            {"layers": 2, "hidden": 64, "heads": 4, "ffn": 128, "kv": 16, "vocab": 1000},
        ),
        Family(
            "vit", "timm", ("pretrain", "finetune", "infer"),
            {"layers": 2, "hidden": 64, "heads": 4, "mlp_ratio": 4.0, "image_size": 32, "patch": 8, "classes": 10},
        ),
        Family(
            "stable_diffusion", "diffusers", ("infer",),
            {"channels": 32, "layers_per_block": 1, "image_size": 64, "text_layers": 2, "text_hidden": 32,
             "heads": 2, "vocab": 1000},
            transformer=False, convolutional=True,
        ),
    )
}


@dataclass(frozen=True)
class KnownModel:
    """A real model's size, for memory fit and FLOP estimates of the real thing."""

    hub_id: str
    family: str
    params: float
    layers: int
    hidden: int
    heads: int
    vocab: int
    #: decoder/encoder feed-forward width
    ffn: int = 0
    #: sequence length the seeds use, or the model's default context
    seq_len: int = 512


KNOWN_MODELS: dict[str, KnownModel] = {
    m.hub_id: m
    for m in (
        KnownModel("bigscience/bloomz", "bloom", 176.2e9, 70, 14336, 112, 250880, 57344, 2048),
        KnownModel("bigscience/bloom", "bloom", 176.2e9, 70, 14336, 112, 250880, 57344, 2048),
        KnownModel("bigscience/bloomz-7b1", "bloom", 7.07e9, 30, 4096, 32, 250880, 16384, 2048),
        KnownModel("bert-large-uncased", "bert", 336e6, 24, 1024, 16, 30522, 4096, 128),
        KnownModel("bert-base-uncased", "bert", 110e6, 12, 768, 12, 30522, 3072, 128),
        KnownModel("t5-3b", "t5", 2.85e9, 24, 1024, 32, 32128, 16384, 1024),
        KnownModel("google-t5/t5-3b", "t5", 2.85e9, 24, 1024, 32, 32128, 16384, 1024),
        KnownModel("CompVis/stable-diffusion-v1-4", "stable_diffusion", 1.07e9, 16, 320, 8, 49408, 1280, 77),
        KnownModel("timm/vit_huge_patch14_224", "vit", 632e6, 32, 1280, 16, 0, 5120, 257),
        KnownModel("timm/vit_base_patch16_224", "vit", 86.6e6, 12, 768, 12, 0, 3072, 197),
        KnownModel("gpt2", "gpt2", 124e6, 12, 768, 12, 50257, 3072, 1024),
    )
}


#: training objective when the task does not name one, by family (causal LM otherwise)
DEFAULT_OBJECTIVE = {"bert": "mlm", "t5": "seq2seq", "vit": "classification"}


def objective_for(family: str, written: str = "") -> str:
    """The training objective: the one written in the task, else the family's default."""
    return written or DEFAULT_OBJECTIVE.get(family, "causal_lm")
