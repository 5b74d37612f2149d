"""Activation memory per device: the models behind ``accelctl.plan.memory``'s activations and
KV-cache terms; docs/language.md ("Memory fit") states them with their sources.

``e`` is the bytes of an element in the compute width, a dropout mask one byte per element; ``s``
the sequence length, ``b`` the micro-batch.  Transformer layers follow Korthikanti et al., 2022
(section 4.1), written with the attention width ``d`` and the MLP width ``f`` apart from ``h``
(T5-3B's are not ``h`` and ``4h``); tensor and sequence parallelism divide as the paper's 4.2.
"""

from __future__ import annotations


from accelctl.families import FAMILIES as DEVICE_FAMILIES
from accelctl.frozen import Value, replace
from accelctl.models import param_count as P
from accelctl.catalog import DEVICES
from accelctl.workload.types import TargetSpec, WorkloadSpec

#: prompt tokens assumed for generation when the dataset does not say (``prompt_tokens``):
#: run_generation.py's dataset prompts keep 16 tokens (seed 003: "first 16 tokens as prompt")
PROMPT_TOKENS = 16

#: attention widths (heads x head width) the model catalog does not hold, from each model's
#: config.json: t5-3b has num_heads 32 x d_kv 128 = 4096 on d_model 1024
ATTENTION_WIDTH = {"t5-3b": 4096, "google-t5/t5-3b": 4096}


class Block(Value):
    """One transformer layer: hidden h, attention width d, MLP width f, heads a; the width of
    its keys (and of its values), narrower than d under grouped-query attention (0 = d)."""

    hidden: int
    attn: int
    ffn: int
    heads: int
    kv: int = 0

    def split(self, tp: int) -> "Block":
        """This rank's share under tensor parallelism (Megatron-style: d, f and heads split)."""
        if tp == 1:
            return self
        return replace(self, attn=self.attn // tp, ffn=self.ffn // tp, heads=max(self.heads // tp, 1),
                       kv=max(self.kv // tp, 1) if self.kv else 0)


class Kept(Value):
    """What the layers' kernels keep for backward beyond the paper's fused-kernel count (``kept_for``;
    from ``tests/plan/measured_memory.py``): ``mask`` bytes per dropout element (1 fused, ``e`` on the
    host CPU, 0 without dropout), ``scores`` (kept, or a fused kernel's output and log-sum-exp), and
    ``gelu`` (MLP-wide tensors the activation keeps: 1, or 4 for GPT-2's ``gelu_new``).
    """

    mask: float = 1
    scores: bool = True
    gelu: int = 1


#: Korthikanti et al.'s count: fused kernels, byte masks, materialized scores
PAPER = Kept()


def self_attention(s: float, b: int, L: Block, e: int, k: Kept = PAPER) -> float:
    scores = (2 * e + k.mask) * L.heads * s * s * b if k.scores else 4 * L.heads * s * b
    return s * b * (e * L.hidden + 4 * e * L.attn + k.mask * L.hidden) + scores


def cross_attention(t: float, s: float, b: int, L: Block, e: int, k: Kept = PAPER) -> float:
    return (t * b * (e * L.hidden + 2 * e * L.attn + k.mask * L.hidden) + 2 * e * s * b * L.attn
            + (2 * e + k.mask) * L.heads * t * s * b)


def mlp(s: float, b: int, L: Block, e: int, k: Kept = PAPER) -> float:
    return s * b * (e * L.hidden + (1 + k.gelu) * e * L.ffn + k.mask * L.hidden)


def replicated_in_layer(s: float, b: int, L: Block, e: int, k: Kept = PAPER) -> float:
    """What tensor parallel leaves whole in one layer: the inputs of attention and MLP, their
    output dropout masks and the 2 norms (the paper's ``10·s·b·h`` at e = 2 with byte masks);
    sequence parallel divides it by tp."""
    return s * b * (2 * e * L.hidden + 2 * k.mask * L.hidden) + 2 * e * s * b * L.hidden


def encoder_layer(s: float, b: int, L: Block, e: int, k: Kept = PAPER) -> float:
    """Stored for backward by one encoder (or decoder-only) layer: attention, MLP, 2 norms."""
    return self_attention(s, b, L, e, k) + mlp(s, b, L, e, k) + 2 * e * s * b * L.hidden


def decoder_layer(t: float, s: float, b: int, L: Block, e: int, k: Kept = PAPER) -> float:
    """One encoder-decoder decoder layer: self-attention over t, cross-attention to s, MLP, 3 norms."""
    return (self_attention(t, b, L, e, k) + cross_attention(t, s, b, L, e, k) + mlp(t, b, L, e, k)
            + 3 * e * t * b * L.hidden)


def backward_working_set(s: float, positions: float, b: int, L: Block, vocab: int, e: int) -> float:
    """Gradients alive beside the kept activations while backward runs (measured: the tensors'
    peak above what forward kept): the head's, the logits' gradient and the log-softmax's
    (``2e`` per position and vocabulary entry), or, larger without a vocabulary (ViT), one
    layer's MLP backward: the gradient of its wide intermediate and of the residual stream."""
    return max(2 * e * positions * b * vocab, e * s * b * (L.ffn + L.hidden))


def inference_layer(s: float, b: int, L: Block, e: int) -> float:
    """What one layer holds at once without autograd: the residual stream and its normed copy,
    plus the larger of Q/K/V with the attention scores and probabilities, or the MLP's two
    intermediates.  Nothing is kept from layer to layer."""
    return e * s * b * (2 * L.hidden + max(3 * L.attn + 2 * L.heads * s, 2 * L.ffn))


def lm_head(positions: float, b: int, vocab: int, e: int, loss: bool) -> float:
    """Logits in the compute width, and their fp32 log-softmax when a loss is taken."""
    return positions * b * vocab * (e + (4 if loss else 0))


# --------------------------------------------------------------------------- shapes
class Arch(Value):
    """What the activation models need beside ``memory.Shape``."""

    block: Block
    #: encoder-decoder: decoder layers (0 = encoder-only or decoder-only)
    decoder_layers: int = 0
    #: elements the model's own KV cache keeps a token, all layers (0: 2 x layers x the K/V width);
    #: read from the module (``module_family``: MLA's latent, not per-head keys and values)
    kv_per_token: int = 0


def arch_for(spec: WorkloadSpec, sh, real: bool) -> Arch:
    """Widths of ``sh`` (a ``memory.Shape``), from the same shape source ``shape_for`` read."""
    m = spec.model
    src = m.real_shape if (real and m.real_shape) else m.stand_in
    ffn = int(src.get("ffn") or 0) or int(sh.hidden * float(src.get("mlp_ratio", 4.0)))
    if m.family in P.DIMMED:  # query and key/value widths apart; a mixture's tokens go through k experts
        g = P.dims(m.family, src)
        return Arch(Block(sh.hidden, g.q, g.ffn * g.active_experts, max(sh.heads, 1), g.kv),
                    kv_per_token=int(src.get("kv_per_token") or 0) if m.family == P.FROM_MODULE else 0)
    if "kv" in src:
        attn = int(src["kv"]) * sh.heads
    else:
        attn = ATTENTION_WIDTH.get(m.ref, sh.hidden) if real else sh.hidden
    return Arch(Block(sh.hidden, attn, ffn, max(sh.heads, 1)), sh.layers if m.family == "t5" else 0)


# --------------------------------------------------------------------------- training
def hpu_lazy(target: TargetSpec) -> bool:
    """A device that trains in lazy mode (the catalog's ``lazy_graphs``: Gaudi), not turned off
    by the target (``lazy_mode = off``; optimum-habana's ``use_lazy_mode`` defaults to True, and
    it runs FSDP eager: ``accelctl.backends.gaudi.fsdp``)."""
    lazy = target.options.lazy_mode
    return DEVICES[target.device].lazy_graphs and (target.parallel.strategy != "fsdp" if lazy is None else lazy)


#: the dropout probability of each family's model where its shape says none: its class's
#: config defaults (transformers' LlamaConfig, MistralConfig, Qwen2Config, GemmaConfig,
#: MixtralConfig, GPTNeoXConfig, FalconConfig and BloomConfig: attention and hidden dropout 0.0;
#: BertConfig, GPT2Config and T5Config: 0.1; timm's VisionTransformer: drop rates 0)
DROPOUT = {"llama": 0.0, "mistral": 0.0, "qwen2": 0.0, "gemma": 0.0, "mixtral": 0.0, "gpt_neox": 0.0,
           "falcon": 0.0, "bloom": 0.0, "vit": 0.0, "bert": 0.1, "gpt2": 0.1, "t5": 0.1}
#: families whose attention runs as ``F.scaled_dot_product_attention`` (transformers' default
#: attention implementation where the class supports it, ``_supports_sdpa``; timm's
#: ``fused_attn``): without dropout it dispatches a fused kernel that keeps no scores on the
#: host CPU and CUDA.  BLOOM's ALiBi runs eager attention, T5's position bias a masked one.
FUSED_ATTENTION = ("vit", "llama", "mistral", "qwen2", "gemma", "mixtral", "gpt_neox", "falcon", "gpt2", "bert")
#: tensors of the MLP's width the family's activation function keeps (see ``Kept.gelu``)
GELU_KEPT = {"gpt2": 4}


def kept_for(spec: WorkloadSpec, target: TargetSpec, real: bool, e: int) -> Kept:
    """What ``target``'s kernels keep for backward (``Kept``): dropout masks only where the
    family's model has dropout (``DROPOUT``), the host CPU's eager ones in the compute width; a
    fused attention kernel keeps no scores where it runs (``FUSED_ATTENTION`` without dropout, on
    a device family with ``fused_sdpa``: the host CPU, measured, and CUDA's FlashAttention)."""
    fam = spec.model.family
    src = spec.model.real_shape if (real and spec.model.real_shape) else spec.model.stand_in
    dev = DEVICES[target.device]
    dropout = float(src.get("dropout", DROPOUT.get(fam, 0.1))) > 0
    mask = (e if dev.host else 1) if dropout else 0
    fused = fam in FUSED_ATTENTION and not dropout and DEVICE_FAMILIES[dev.adapter].fused_sdpa
    return Kept(mask=mask, scores=not fused, gelu=GELU_KEPT.get(fam, 1))


def training(spec: WorkloadSpec, target: TargetSpec, sh, arch: Arch, e: int, real: bool = True) -> float:
    """Activations kept for backward on one device: every layer's without gradient checkpointing;
    with it, each layer's input plus the largest layer's while recomputed.  On an HPU in lazy mode the
    first iteration's graph holds every layer's activations and their gradients: 2x, with or without
    checkpointing, calibrated on seed 000's T5-3B fact (docs/language.md ("Memory fit")).
    """
    p, b = target.parallel, target.batch.micro
    L = arch.block.split(p.tp)
    s, h = sh.seq_len, L.hidden
    k = kept_for(spec, target, real, e)
    if arch.decoder_layers:
        t = spec.dataset.target_len
        enc_n, dec_n = sh.layers / p.pp, arch.decoder_layers / p.pp
        enc, dec = encoder_layer(s, b, L, e, k), decoder_layer(t, s, b, L, e, k)
        full = enc_n * enc + dec_n * dec
        # layer inputs, the encoder output every cross-attention reads, one layer recomputed
        kept = enc_n * e * s * b * h + dec_n * e * t * b * h + e * s * b * h + max(enc, dec)
        head = lm_head(t, b, sh.vocab, e, loss=True)
        working = backward_working_set(s, t, b, L, sh.vocab, e)
    else:
        n = sh.layers / p.pp
        layer = encoder_layer(s, b, L, e, k)
        # sequence parallel: what TP left whole, and the layer inputs checkpointing keeps, on s/tp positions
        sp = p.tp if p.sequence_parallel and p.tp > 1 else 1
        layer -= replicated_in_layer(s, b, L, e, k) * (1 - 1 / sp)
        full, kept = n * layer, n * e * s * b * h / sp + layer
        head = lm_head(s, b, sh.vocab, e, loss=True)  # vit: vocab 0 (the class head is negligible)
        working = backward_working_set(s, s, b, L, sh.vocab, e)
    if hpu_lazy(target):  # the graph's 2x holds the gradients already
        return 2 * full + head
    return (kept if target.gradient_checkpointing else full) + head + working


# --------------------------------------------------------------------------- inference
def inference(spec: WorkloadSpec, target: TargetSpec, sh, arch: Arch, e: int) -> float:
    """A forward pass without autograd (``task infer`` of a transformer): one layer's working set."""
    b = target.batch.micro
    L = arch.block.split(target.parallel.tp)
    return inference_layer(sh.seq_len, b, L, e) + lm_head(sh.seq_len, b, sh.vocab, e, loss=False)


def generation(spec: WorkloadSpec, target: TargetSpec, sh, arch: Arch, e: int) -> tuple[float, float]:
    """(prefill activations, KV cache) of one device for ``task generate``: the cache holds every
    layer's keys and values for prompt and new tokens (``2 · layers · b · (prompt + new) · d · e``,
    plus an encoder-decoder's cross-attention cache); the activations are the prefill's (one layer's
    working set at the prompt length, the prompt's logits, the last position's fp32 scores).
    """
    p, b = target.parallel, target.batch.micro
    L = arch.block.split(p.tp)
    prompt = spec.dataset.prompt_tokens or PROMPT_TOKENS
    total = prompt + spec.task.max_new_tokens
    layers = sh.layers / p.pp
    if not spec.task.kv_cache:
        kv = 0.0
    elif arch.decoder_layers:
        src = spec.dataset.seq_len
        kv = 2 * (arch.decoder_layers / p.pp) * b * (spec.task.max_new_tokens + src) * L.attn * e
        prompt = src  # the encoder's pass over the source is the large forward
    elif arch.kv_per_token:  # as the model's own cache keeps it
        kv = b * total * arch.kv_per_token * e / (p.pp * p.tp)
    else:
        kv = 2 * layers * b * total * (L.kv or L.attn) * e
    acts = inference_layer(prompt, b, L, e) + lm_head(prompt, b, sh.vocab, e, loss=False) + 4 * b * sh.vocab
    return acts, kv


# --------------------------------------------------------------------------- diffusion
class UNet(Value):
    """The shape of a latent-diffusion pipeline that decides its activations."""

    #: latent side (image side / 8: the VAE downsamples 3 times)
    latent: int
    #: UNet channels per resolution level (level i at latent / 2**i)
    channels: tuple[int, ...]
    #: which levels have transformer blocks (self- and cross-attention)
    attention: tuple[bool, ...]
    layers_per_block: int
    heads: int
    #: text-encoder tokens the cross-attention reads (CLIP: 77)
    text_len: int
    #: VAE channels per level, encoder order (the decoder runs them reversed)
    vae: tuple[int, ...]


#: Stable Diffusion 1.x (CompVis/stable-diffusion-v1-4 unet/config.json: block_out_channels
#: 320, 640, 1280, 1280, CrossAttnDownBlock2D x 3 + DownBlock2D, layers_per_block 2,
#: attention_head_dim 8 (= 8 heads), sample_size 64; vae/config.json: block_out_channels
#: 128, 256, 512, 512, sample_size 512; text_encoder: 77 positions), scaled by the base width
def unet_for(spec: WorkloadSpec, sh, real: bool) -> UNet:
    """The UNet/VAE of the model's shape keys, as the worker builds them
    (``accelctl.worker.models._sd_from_shape``): the real widths where the shape lists them
    (SD 1.x: 320/640/1280/1280, VAE 128/256/512/512), else the stand-in's (c, 2c) UNet with
    attention on its first level and (c, c, 2c, 2c) VAE; no attention at the lowest level;
    latent = image_size / 8; CLIP's 77 text tokens."""
    m = spec.model
    s = m.real_shape if (real and m.real_shape) else m.stand_in
    c = int(s.get("channels", 32))
    chans = tuple(int(x) for x in s.get("unet_channels") or (c, 2 * c))
    vae = tuple(int(x) for x in s.get("vae_channels") or (c, c, 2 * c, 2 * c))
    return UNet(max(int(s.get("image_size", 64)) // 8, 1), chans, (True,) * (len(chans) - 1) + (False,),
                int(s.get("layers_per_block", 1)), int(s.get("heads", 2)), 77, vae)


def unet_elements(u: UNet) -> tuple[float, float]:
    """(skip connections, peak working set) of one UNet sample, in elements: the down path's
    outputs wait for the up path; a level's working set is the largest of its ResNet block,
    self-attention (with the heads' n x n scores), cross-attention and GEGLU feed-forward (docs/language.md ("Memory fit")).
    """
    res = [max(u.latent >> i, 1) for i in range(len(u.channels))]
    skips = u.channels[0] * res[0] ** 2
    skips += sum(u.layers_per_block * c * r * r for c, r in zip(u.channels, res))
    skips += sum(c * max(r // 2, 1) ** 2 for c, r in zip(u.channels[:-1], res[:-1]))

    def peak(c: int, r: int, attn: bool) -> float:
        n = r * r
        if not attn:
            return 5 * c * n
        return max(5 * c * n + 2 * u.heads * n * n, 5 * c * n + 2 * u.heads * n * u.text_len, 14 * c * n)

    levels = [peak(c, r, a) for c, r, a in zip(u.channels, res, u.attention)]
    levels.append(peak(u.channels[-1], res[-1], True))
    return float(skips), float(max(levels))


def vae_decode_elements(u: UNet) -> float:
    """Peak working set of the VAE decoder for one image, in elements: up level j at
    resolution latent·2^j reads its input (c_in channels) and its norm and writes c_j
    channels: (2·c_in + c_j)·R²; the mid block's single-head attention at the latent
    resolution: 5·c·n + 2·n²."""
    chans = list(reversed(u.vae))
    n = u.latent ** 2
    best = 5 * chans[0] * n + 2 * n * n
    prev = chans[0]
    for j, c in enumerate(chans):
        r = u.latent << j
        best = max(best, (2 * prev + c) * r * r)
        prev = c
    return float(best)


def diffusion(spec: WorkloadSpec, target: TargetSpec, sh, real: bool, e: int) -> float:
    """Activations of text-to-image generation on one device: the denoising loop's UNet runs
    b images, twice with classifier-free guidance (guidance_scale > 1: unconditional and
    conditional halves in one batch); the VAE then decodes the b latents.  The two do not
    overlap: the larger one counts.  Attention scores are materialized (diffusers' attention
    as baddbmm + softmax); a fused attention kernel keeps none, so this is then an upper bound."""
    u = unet_for(spec, sh, real)
    b = target.batch.micro
    samples = b * (2 if spec.task.guidance_scale > 1 else 1)
    skips, peak = unet_elements(u)
    return e * max(samples * (skips + peak), b * vae_decode_elements(u))
