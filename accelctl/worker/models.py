"""Build the model a job names, in the architecture the plan chose (``WorkerJob.architecture``).

On an accelerator target the real architecture; on the host (a cpu target or a CPU rehearsal) the
stand-in: the same library class from a tiny config.  Shape keys are the DSL's
(``accelctl.models.catalog.FAMILIES``), missing ones the family defaults; an empty architecture is
the model's own Hub config.  Weights: ``real`` (``from_pretrained``, an error if absent),
``random`` (``stand_in`` its older name), ``auto`` (real when reachable, else random, warned).
The Hub is reached only when the job's hub access is online (else ``HF_HUB_OFFLINE=1``).
The model libraries import ``torch._dynamo`` unconditionally; one worker per file
(``accelctl.run.supervision.shared``) amortises that.  Import paths and cost: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from accelctl.hostinfo import in_hf_cache
from accelctl.models.catalog import FAMILIES
#: the family built by transformers' own class for its model_type (``accelctl.models.module_family``)
from accelctl.models.param_count import FROM_MODULE as MODULE_FAMILY

#: model kinds the loops dispatch on
CAUSAL_LM, MASKED_LM, SEQ2SEQ, IMAGE_CLASSIFIER, DIFFUSION = (
    "causal_lm", "masked_lm", "seq2seq", "image_classifier", "diffusion")

#: family -> (kind, transformers config class, transformers model class)
HF_CLASSES = {
    "bloom": (CAUSAL_LM, "BloomConfig", "BloomForCausalLM"),
    "gpt2": (CAUSAL_LM, "GPT2Config", "GPT2LMHeadModel"),
    "llama": (CAUSAL_LM, "LlamaConfig", "LlamaForCausalLM"),
    "mistral": (CAUSAL_LM, "MistralConfig", "MistralForCausalLM"),
    "qwen2": (CAUSAL_LM, "Qwen2Config", "Qwen2ForCausalLM"),
    "gemma": (CAUSAL_LM, "GemmaConfig", "GemmaForCausalLM"),
    "mixtral": (CAUSAL_LM, "MixtralConfig", "MixtralForCausalLM"),
    "gpt_neox": (CAUSAL_LM, "GPTNeoXConfig", "GPTNeoXForCausalLM"),
    "falcon": (CAUSAL_LM, "FalconConfig", "FalconForCausalLM"),
    "bert": (MASKED_LM, "BertConfig", "BertForMaskedLM"),
    "t5": (SEQ2SEQ, "T5Config", "T5ForConditionalGeneration"),
}


class ByteTokenizer:
    """A stand-in tokenizer: UTF-8 bytes -> ids, deterministic, no vocabulary file.

    ``id = SPECIALS + byte % (vocab - SPECIALS)``: a stand-in model sees real token ids for a real
    prompt; it is not a language tokenizer (a prompt takes several times more ids than BPE's).
    """

    pad_token_id, bos_token_id, eos_token_id, mask_token_id = 0, 1, 2, 3
    SPECIALS = 4

    def __init__(self, vocab_size: int) -> None:
        if vocab_size <= self.SPECIALS + 1:
            raise ValueError(f"vocab {vocab_size} is too small for the byte stand-in tokenizer")
        self.vocab_size = vocab_size

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        span = self.vocab_size - self.SPECIALS
        return [self.SPECIALS + b % span for b in text.encode("utf-8")]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        data = bytes(i - self.SPECIALS for i in ids if self.SPECIALS <= i < self.SPECIALS + 256)
        return data.decode("utf-8", errors="replace")


@dataclass
class SDParts:
    """Stable Diffusion's components, used by hand in ``diffusion_loop``."""

    unet: Any
    vae: Any
    text_encoder: Any
    scheduler: Any
    tokenizer: Any = None


@dataclass
class Built:
    model: Any
    family: str
    kind: str
    #: "real" (loaded) or "random" (initialised here)
    weights: str
    tokenizer: Any
    #: the shape in use: the architecture's config keys, or the loaded model's where known
    shape: dict[str, Any] = field(default_factory=dict)
    #: "real" (the model the target names) or "stand_in" (the small same-family model)
    scale: str = "real"
    #: where the weights came from: the Hub id or local path loaded, or "random init"
    weights_source: str = "random init"

    def details(self) -> dict[str, Any]:
        return {"family": self.family, "model_kind": self.kind, "weights": self.weights,
                "weights_source": self.weights_source, "scale": self.scale,
                "params": count_params(self.model), "shape": self.shape,
                "tokenizer": type(self.tokenizer).__name__ if self.tokenizer is not None else None}


def count_params(model: Any) -> int:
    if isinstance(model, SDParts):
        return sum(count_params(m) for m in (model.unet, model.vae, model.text_encoder))
    return sum(p.numel() for p in model.parameters())


def architecture_of(job) -> dict[str, Any]:
    """Family defaults overlaid with the job's architecture."""
    family = FAMILIES.get(job.model.family)
    if family is None:
        raise ValueError(f"unknown model family {job.model.family!r}; known: {', '.join(FAMILIES)}")
    return {**family.shape, **job.architecture}


def weights_present(model_job) -> bool:
    """Real weights reachable without the network: a local path, or the HF cache."""
    if not model_job.ref:
        return False
    if Path(model_job.ref).expanduser().exists():
        return True
    if model_job.source == "local":
        return False
    return in_hf_cache(model_job.ref, model_job.family)


def build(job, log: Callable[[str, str], None], device=None, dtype=None) -> Built:
    """The model of ``job`` (see module doc), train mode: on the CPU in fp32, except random weights
    given a ``device`` (a GPU's), which are made there, in ``dtype`` when given (16-bit inference):
    a large model initialises far faster on the GPU than on the host (``random_on``).
    """
    mj = job.model
    want = "random" if mj.weights == "stand_in" else mj.weights
    if want not in ("real", "random", "auto"):
        raise ValueError(f"model.weights must be real, random or auto, not {want!r}")
    if job.rehearsal_of:
        want = "random"  # a rehearsal runs the stand-in, never weights of another size
    online = job.hub == "online"
    what = _architecture_text(job)
    if want == "real" or (want == "auto" and mj.ref and (online or weights_present(mj))):
        if not mj.ref:
            raise ValueError("model.weights = real needs model.ref (a Hub id or a local path)")
        try:
            return _build_real(job, mj)
        except Exception as exc:  # noqa: BLE001 - auto falls back, real re-raises
            hub = "hub online" if online else "hub offline: local paths and the HF cache only"
            if want == "real":
                raise RuntimeError(f"cannot load real weights {mj.ref!r} ({hub}): {exc}") from exc
            log("warning", f"weights=auto: loading {mj.ref!r} failed ({hub}; {type(exc).__name__}: {exc}); "
                           f"random weights in {what}")
    elif want == "auto" and mj.ref:
        log("warning", f"weights=auto: no local copy of {mj.ref!r} (path or HF cache) and the hub is offline; "
                       f"random weights in {what}")
    with random_on(device, dtype):
        return _build_random(job, mj.family)


@contextlib.contextmanager
def random_on(device, dtype):
    """Tensors created inside are made on ``device`` and, with ``dtype``, in that floating dtype;
    ``device`` None: on the host, as ever (the adapter says where: ``random_init_device``)."""
    if device is None:
        yield
        return
    import torch

    previous = torch.get_default_dtype()
    try:
        if dtype is not None:
            torch.set_default_dtype(dtype)
        with torch.device(device):
            yield
    finally:
        torch.set_default_dtype(previous)


def position_limit(built: Built) -> int | None:
    """The positions the model embeds where a longer sequence cannot run (GPT-2's
    ``n_positions``, BERT's ``max_position_embeddings``); None where the family has no such
    limit (ALiBi, rotary, relative positions) or the config does not say."""
    family = FAMILIES.get(built.family)
    cfg = getattr(built.model, "config", None)
    if family is None or not family.absolute_positions or cfg is None:
        return None
    limit = getattr(cfg, "n_positions", None) or getattr(cfg, "max_position_embeddings", None)
    return int(limit) if limit else None


def check_positions(job, built: Built) -> None:
    """``SequenceTooLong`` where the training/inference sequence (``seq_len``) is longer than the
    model embeds: the plan refuses that where it knows the architecture (E532), the worker where
    only the model's Hub config says (a model the catalog does not know)."""
    from accelctl.worker.context import SequenceTooLong

    limit = position_limit(built)
    if limit is not None and built.kind in (CAUSAL_LM, MASKED_LM) and job.data.seq_len > limit:
        raise SequenceTooLong(f"seq_len {job.data.seq_len} is longer than {built.family}'s {limit} positions; "
                              f"lower seq_len to at most {limit}")


def _module_text(s: dict[str, Any]) -> dict[str, Any]:
    """What a ``transformers``-family shape says in logs and results: its class and sizes, not
    the whole config or the module's counts."""
    keys = ("class_name", "layers", "hidden", "heads", "kv_heads", "head_dim", "ffn", "vocab", "experts",
            "experts_per_token", "window")
    return {k: s[k] for k in keys if k in s}


def _architecture_text(job) -> str:
    if not job.architecture:
        return f"the Hub config of {job.model.ref}"
    if job.model.family == MODULE_FAMILY:
        shape = _shape_text(job.architecture["model_type"], _module_text(job.architecture))
        return f"the {job.scale.replace('_', '-')} architecture {shape}"
    return f"the {job.scale.replace('_', '-')} architecture {_shape_text(job.model.family, architecture_of(job))}"


def _build_random(job, family: str) -> Built:
    """Random weights in the job's architecture (the Hub config of the model when it has none)."""
    if not job.architecture and job.model.source == "hf":
        return _build_from_hub_config(job, family)
    built = _build_from_shape(job, family, architecture_of(job))
    built.scale = job.scale
    return built


def _shape_text(family: str, shape: dict[str, Any]) -> str:
    return f"{family}(" + ", ".join(f"{k}={v}" for k, v in shape.items()) + ")"


# -- stand-ins: same classes as the real models, tiny configs, random weights ----------------

def _hf_config(family: str, s: dict[str, Any]):
    import transformers

    tok = ByteTokenizer
    ids = dict(pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    cls = getattr(transformers, HF_CLASSES[family][1])
    if family == "bloom":
        return cls(vocab_size=s["vocab"], hidden_size=s["hidden"], n_layer=s["layers"], n_head=s["heads"], **ids)
    # "dropout" (architecture only, tests: a loss curve compared across layouts needs none)
    # overrides the classes' default 0.1
    if family == "gpt2":
        drop = s.get("dropout", 0.1)
        return cls(vocab_size=s["vocab"], n_positions=s["max_positions"], n_embd=s["hidden"], n_layer=s["layers"],
                   n_head=s["heads"], n_inner=s.get("ffn"), resid_pdrop=drop, embd_pdrop=drop, attn_pdrop=drop,
                   **ids)
    if family in ("llama", "mistral", "qwen2", "gemma", "mixtral"):
        return cls(**_llama_like(family, s), **ids)
    if family == "gpt_neox":
        return cls(vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["ffn"],
                   num_hidden_layers=s["layers"], num_attention_heads=s["heads"],
                   max_position_embeddings=s["max_positions"], tie_word_embeddings=bool(s.get("tied", False)), **ids)
    if family == "falcon":
        kv = int(s.get("kv_heads", 1))
        return cls(vocab_size=s["vocab"], hidden_size=s["hidden"], ffn_hidden_size=s.get("ffn"),
                   num_hidden_layers=s["layers"], num_attention_heads=s["heads"], num_kv_heads=kv,
                   multi_query=kv == 1, new_decoder_architecture=bool(s.get("new_arch", False)),
                   parallel_attn=bool(s.get("parallel_attn", True)), bias=bool(s.get("bias", False)),
                   max_position_embeddings=s["max_positions"], tie_word_embeddings=bool(s.get("tied", True)), **ids)
    if family == "bert":
        drop = s.get("dropout", 0.1)
        return cls(vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                   num_attention_heads=s["heads"], intermediate_size=s["ffn"],
                   max_position_embeddings=s["max_positions"], pad_token_id=tok.pad_token_id,
                   hidden_dropout_prob=drop, attention_probs_dropout_prob=drop)
    if family == "t5":
        return cls(vocab_size=s["vocab"], d_model=s["hidden"], d_kv=s["kv"], d_ff=s["ffn"], num_layers=s["layers"],
                   num_heads=s["heads"], decoder_start_token_id=tok.pad_token_id, **ids)
    raise ValueError(f"no transformers config for family {family!r}")


def _llama_like(family: str, s: dict[str, Any]) -> dict[str, Any]:
    """The config keys of llama and its kin (RMSNorm, rotary, gated MLP, grouped-query
    attention): head_dim given explicitly (gemma's default is 256), a mixture's experts."""
    heads = int(s["heads"])
    kw: dict[str, Any] = dict(
        vocab_size=s["vocab"], hidden_size=s["hidden"], intermediate_size=s["ffn"], num_hidden_layers=s["layers"],
        num_attention_heads=heads, num_key_value_heads=int(s.get("kv_heads") or s.get("kv") or heads),
        head_dim=int(s.get("head_dim") or s["hidden"] // heads), max_position_embeddings=s["max_positions"],
        tie_word_embeddings=bool(s.get("tied", family == "gemma")))
    if family == "llama" and s.get("attn_bias"):
        kw["attention_bias"] = True
    if family == "mixtral":
        kw.update(num_local_experts=int(s["experts"]), num_experts_per_tok=int(s["experts_per_token"]))
    return kw


def _module_config(s: dict[str, Any]):
    """The ``transformers`` family's config: transformers' own config class for its model_type,
    from the config.json keys the plan carries (never remote code)."""
    import transformers

    return transformers.AutoConfig.for_model(s["model_type"], **{k: v for k, v in s["config"].items()
                                                                 if k != "model_type"})


def _build_from_shape(job, family: str, s: dict[str, Any]) -> Built:
    import torch

    # the weights are random but reproducible: every rank builds the same initial model
    torch.manual_seed(job.seed)
    if family == MODULE_FAMILY:  # the class transformers has for the model_type, at the job's size
        import transformers

        model = transformers.AutoModelForCausalLM.from_config(_module_config(s))
        shape = {**_module_text(s), "class_name": type(model).__name__}  # the class built, as it says
        return Built(model, family, CAUSAL_LM, "random", ByteTokenizer(int(s["vocab"])), shape)
    if family in HF_CLASSES:
        import transformers

        kind, _, model_cls = HF_CLASSES[family]
        model = getattr(transformers, model_cls)(_hf_config(family, s))
        return Built(model, family, kind, "random", ByteTokenizer(s["vocab"]), s)
    if family == "vit":
        return Built(_timm_vit(job, s), family, IMAGE_CLASSIFIER, "random", None, s)
    if family == "stable_diffusion":
        return Built(_sd_from_shape(s), family, DIFFUSION, "random", ByteTokenizer(s["vocab"]), s)
    raise ValueError(f"family {family!r} has no builder from a shape")


def _build_from_hub_config(job, family: str) -> Built:
    """Random weights in the model's own Hub config (a model the catalog does not know)."""
    import torch

    torch.manual_seed(job.seed)
    ref = job.model.ref
    if family in HF_CLASSES:
        import transformers

        kind, _, model_cls = HF_CLASSES[family]
        config = transformers.AutoConfig.from_pretrained(ref)
        model = getattr(transformers, model_cls)(config)
        tokenizer = transformers.AutoTokenizer.from_pretrained(ref)
        return Built(model, family, kind, "random", tokenizer, {"config": ref}, "real", f"random init ({ref} config)")
    if family == "vit":
        import timm

        name = ref if ref.startswith("hf-hub:") or "/" not in ref else f"hf-hub:{ref}"
        return Built(timm.create_model(name, pretrained=False), family, IMAGE_CLASSIFIER, "random", None,
                     {"config": ref}, "real", f"random init ({ref} config)")
    raise ValueError(f"family {family!r}: no architecture in the job and no Hub-config builder; "
                     "add the model to the catalog or write its architecture")


def _timm_vit(job, s: dict[str, Any]):
    from timm.models.vision_transformer import VisionTransformer

    from accelctl.worker import float8, te_layers

    extra = {}
    if (te := te_layers.load()) is not None:
        # seed 002: Transformer Engine's fused layer replaces timm's Block (te_fp8 plans)
        extra["block_fn"] = te_layers.block_fn(te)
    elif job.precision.dtype == "fp8" and not float8.wanted(job):  # torchao's float8 swaps linears later
        raise RuntimeError("precision fp8 needs a te_fp8 plan (Transformer Engine layers and recipe); "
                           "this job has no te_recipe.json")
    return VisionTransformer(img_size=s["image_size"], patch_size=s["patch"], in_chans=s.get("channels", 3),
                             num_classes=s["classes"], embed_dim=s["hidden"], depth=s["layers"],
                             num_heads=s["heads"], mlp_ratio=s["mlp_ratio"], **extra)


def _sd_from_shape(s: dict[str, Any]) -> SDParts:
    """SD from shape keys: the stand-in's 2-level UNet and 4-level VAE (latent = image / 8 as
    in SD 1.x) and small CLIP, or SD 1.x itself where the shape lists the real widths
    (``unet_channels`` 320/640/1280/1280, ``vae_channels`` 128/256/512/512, a 12-layer CLIP)."""
    from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    c, lpb = int(s["channels"]), int(s["layers_per_block"])
    unet_out = tuple(int(x) for x in s.get("unet_channels") or (c, 2 * c))
    vae_out = tuple(int(x) for x in s.get("vae_channels") or (c, c, 2 * c, 2 * c))
    n = len(unet_out)  # the lowest resolution has no cross-attention, as in SD 1.x
    vae = AutoencoderKL(in_channels=3, out_channels=3, latent_channels=4, block_out_channels=vae_out,
                        down_block_types=("DownEncoderBlock2D",) * len(vae_out),
                        up_block_types=("UpDecoderBlock2D",) * len(vae_out),
                        layers_per_block=int(s.get("vae_layers_per_block", 1)), norm_num_groups=min(32, vae_out[0]),
                        sample_size=s["image_size"])
    unet = UNet2DConditionModel(sample_size=s["image_size"] // 8, in_channels=4, out_channels=4,
                                block_out_channels=unet_out, layers_per_block=lpb,
                                down_block_types=("CrossAttnDownBlock2D",) * (n - 1) + ("DownBlock2D",),
                                up_block_types=("UpBlock2D",) + ("CrossAttnUpBlock2D",) * (n - 1),
                                cross_attention_dim=s["text_hidden"], attention_head_dim=s["heads"],
                                norm_num_groups=min(32, c))
    text_heads = int(s.get("text_heads", s["heads"]))
    text = CLIPTextModel(CLIPTextConfig(vocab_size=s["vocab"], hidden_size=s["text_hidden"],
                                        intermediate_size=4 * s["text_hidden"], num_hidden_layers=s["text_layers"],
                                        num_attention_heads=text_heads, max_position_embeddings=77,
                                        pad_token_id=0, bos_token_id=1, eos_token_id=2))
    # the SD 1.x scheduler settings (scaled-linear betas), with DDIM's few-step sampling
    scheduler = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                              clip_sample=False, set_alpha_to_one=False, steps_offset=1)
    return SDParts(unet, vae, text, scheduler)


# -- real weights ---------------------------------------------------------------------------

def _build_real(job, mj) -> Built:
    family, ref = mj.family, mj.ref
    if family in HF_CLASSES or family == MODULE_FAMILY:
        import transformers

        kind, _, model_cls = HF_CLASSES.get(family, (CAUSAL_LM, "", "AutoModelForCausalLM"))
        model = getattr(transformers, model_cls).from_pretrained(ref)  # never trust_remote_code
        tokenizer = transformers.AutoTokenizer.from_pretrained(ref)
        cfg = model.config
        shape = {"layers": getattr(cfg, "num_hidden_layers", None), "hidden": getattr(cfg, "hidden_size", None),
                 "vocab": cfg.vocab_size}
        return Built(model, family, kind, "real", tokenizer, shape, weights_source=ref)
    if family == "vit":
        model = _timm_real(job, ref)
        shape = {"image_size": model.patch_embed.img_size[0], "classes": model.num_classes,
                 "channels": model.patch_embed.proj.in_channels}
        return Built(model, family, IMAGE_CLASSIFIER, "real", None, shape, weights_source=ref)
    if family == "stable_diffusion":
        from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
        from transformers import CLIPTextModel, CLIPTokenizer

        parts = SDParts(unet=UNet2DConditionModel.from_pretrained(ref, subfolder="unet"),
                        vae=AutoencoderKL.from_pretrained(ref, subfolder="vae"),
                        text_encoder=CLIPTextModel.from_pretrained(ref, subfolder="text_encoder"),
                        scheduler=DDIMScheduler.from_pretrained(ref, subfolder="scheduler"))
        parts.tokenizer = CLIPTokenizer.from_pretrained(ref, subfolder="tokenizer")
        vae_scale = 2 ** (len(parts.vae.config.block_out_channels) - 1)
        shape = {"image_size": parts.unet.config.sample_size * vae_scale}
        return Built(parts, family, DIFFUSION, "real", parts.tokenizer, shape, weights_source=ref)
    raise ValueError(f"family {family!r} has no real-weights loader")


def _timm_real(job, ref: str):
    import timm

    path = Path(ref).expanduser()
    if path.is_dir():
        return timm.create_model(f"local-dir:{path}", pretrained=True)
    if path.is_file():
        # a bare checkpoint: the architecture is the job's shape, the weights the file's
        model = _timm_vit(job, architecture_of(job))
        timm.models.load_checkpoint(model, str(path))
        return model
    name = ref if ref.startswith("hf-hub:") or "/" not in ref else f"hf-hub:{ref}"
    return timm.create_model(name, pretrained=True)
