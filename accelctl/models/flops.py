"""FLOPs of a model's forward pass, counted from its architecture (a multiply-add = 2 FLOPs).

Counted as ``torch.utils.flop_counter.FlopCounterMode`` counts: matrix products (linear layers,
attention's Q·Kᵀ and A·V, convolutions); element-wise work runs at memory speed and is left out.
Training = 3 x forward (the backward computes the input's and the weight's gradient).
tests/estimate/test_flops.py checks the counts against FlopCounterMode on every family's stand-in.

Families: decoder-only LMs (gpt2, bloom, llama; the ``transformers`` family from the FLOPs its
module's facts give: ``accelctl.models.module_family``), BERT (MLM head over every position), T5, ViT,
Stable Diffusion (CLIP text encoder, UNet per denoising step, VAE decoder).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelctl.models import param_count as P

#: families built of transformer layers (hidden, layers) that ``_layer`` counts
TRANSFORMER_FAMILIES = ("gpt2", "bloom", "bert", "t5", "vit", *P.DIMMED)
#: decoder-only language models
DECODERS = ("gpt2", "bloom", *P.DIMMED)


def _layer(h: int, inner: int, ffn: int, tokens: int, kv_len: int, gated: bool = False) -> float:
    """One transformer layer (self-attention + MLP) over ``tokens`` query tokens that attend
    to ``kv_len`` keys each."""
    proj = 2 * tokens * h * inner * 4                    # Q, K, V, O
    scores = 2 * 2 * tokens * kv_len * inner             # Q·Kᵀ and A·V
    mlp = 2 * tokens * h * ffn * (3 if gated else 2)
    return proj + scores + mlp


def _cross(h: int, inner: int, tokens: int, ctx_len: int, ctx_dim: int) -> float:
    """Cross-attention: Q, O over the queries; K, V over the context."""
    return 2 * tokens * h * inner * 2 + 2 * ctx_len * ctx_dim * inner * 2 + 2 * 2 * tokens * ctx_len * inner


@dataclass(frozen=True)
class Sizes:
    """The lengths a step processes (per sample)."""

    seq: int = 128
    #: T5: decoder (target) length
    target: int = 32
    #: generation: prompt tokens and new tokens
    prompt: int = 8
    new_tokens: int = 0
    #: diffusion: denoising steps, and 2 UNet passes per step under classifier-free guidance
    inference_steps: int = 50
    guidance: bool = True


def _counted(family: str, s: dict[str, Any], tokens: int, kv_len: int, head_tokens: int) -> float:
    """The families of ``accelctl.models.param_count``: query width apart from the hidden width
    (gemma's head_dim), narrower K and V (grouped-query, multi-query), and a mixture's MLP
    run by ``experts_per_token`` experts per token, plus its router."""
    g = P.dims(family, s)
    h = g.hidden
    scores = 2 * 2 * tokens * kv_len * g.q
    matmuls = decoder_matmul_params(family, s) - h * int(s["vocab"])
    return 2 * tokens * matmuls + int(s["layers"]) * scores + 2 * head_tokens * h * int(s["vocab"])


def _from_module(s: dict[str, Any], tokens: int, kv_len: int, head_tokens: int) -> float:
    """The family read from its module: the facts' matmul FLOPs a token (its head apart, run on
    ``head_tokens``), and attention over ``kv_len`` positions (a sliding layer's at most its window)."""
    head = int(s["hidden"]) * int(s["vocab"])
    matmuls = int(s["flops_per_token"]) // 2 - head
    return 2 * tokens * matmuls + 2 * head_tokens * head + tokens * attention_per_token(s, kv_len)


def attention_per_token(s: dict[str, Any], kv_len: int) -> float:
    """Q·Kᵀ and A·V FLOPs of one token attending to ``kv_len`` positions, every layer (the
    module-read family: full layers over all of them, sliding ones over at most the window)."""
    window = int(s.get("window") or kv_len)
    return int(s["attention_flops"]) * kv_len + int(s["sliding_attention_flops"]) * min(kv_len, window)


def _lm(family: str, s: dict[str, Any], tokens: int, kv_len: int, head_tokens: int) -> float:
    if family == P.FROM_MODULE:
        return _from_module(s, tokens, kv_len, head_tokens)
    if family in P.COUNTED:
        return _counted(family, s, tokens, kv_len, head_tokens)
    h, L = int(s["hidden"]), int(s["layers"])
    ffn = int(s.get("ffn") or 4 * h)
    total = L * _layer(h, h, ffn, tokens, kv_len, gated=family == "llama")
    narrower = h - kv_width(family, s)                       # grouped-query K, V projections
    total -= L * 2 * tokens * h * narrower * 2
    return total + 2 * head_tokens * h * int(s["vocab"])


def forward(family: str, s: dict[str, Any], z: Sizes) -> float:
    """Forward FLOPs of one sample (one image batch element for diffusion: every step)."""
    if family in DECODERS:
        return _lm(family, s, z.seq, z.seq, z.seq)
    if family == "bert":
        h = int(s["hidden"])
        return _lm(family, s, z.seq, z.seq, z.seq) + 2 * z.seq * h * h   # MLM head transform
    if family == "t5":
        return t5(s, z.seq, z.target)
    if family == "vit":
        return vit(s)
    if family == "stable_diffusion":
        return diffusion(s, z)
    raise ValueError(f"no FLOP count for family {family!r}")


def t5(s: dict[str, Any], src: int, tgt: int) -> float:
    h, L, ffn = int(s["hidden"]), int(s["layers"]), int(s.get("ffn") or 4 * int(s["hidden"]))
    inner = int(s["heads"]) * int(s.get("kv") or h // int(s["heads"]))
    enc = L * _layer(h, inner, ffn, src, src)
    dec = L * (_layer(h, inner, ffn, tgt, tgt) + _cross(h, inner, tgt, src, h))
    return enc + dec + 2 * tgt * h * int(s["vocab"])


def vit_tokens(s: dict[str, Any]) -> int:
    return (int(s["image_size"]) // int(s["patch"])) ** 2 + 1


def vit(s: dict[str, Any]) -> float:
    h, L, p = int(s["hidden"]), int(s["layers"]), int(s["patch"])
    n = vit_tokens(s)
    ffn = int(float(s.get("mlp_ratio", 4.0)) * h)
    patches = 2 * (n - 1) * int(s.get("channels", 3)) * p * p * h
    return patches + L * _layer(h, h, ffn, n, n) + 2 * h * int(s.get("classes", 1000))


# ------------------------------------------------------------------ Stable Diffusion

def _conv(cin: int, cout: int, r: int, k: int = 3) -> float:
    return 2 * r * r * cin * cout * k * k


def _resnet(cin: int, cout: int, r: int) -> float:
    return _conv(cin, cout, r) + _conv(cout, cout, r) + (_conv(cin, cout, r, 1) if cin != cout else 0)


def _sd_transformer(c: int, r: int, ctx_len: int, ctx_dim: int) -> float:
    n = r * r
    return (2 * 2 * n * c * c                      # proj_in, proj_out (1x1)
            + _layer(c, c, 0, n, n)                # self-attention
            + _cross(c, c, n, ctx_len, ctx_dim)
            + 2 * n * c * 8 * c + 2 * n * 4 * c * c)  # GEGLU feed-forward: c -> 2 x 4c, 4c -> c


def unet(s: dict[str, Any]) -> float:
    c0 = int(s["channels"])
    chans = [int(x) for x in (s.get("unet_channels") or (c0, 2 * c0))]
    lpb, r = int(s["layers_per_block"]), int(s["image_size"]) // 8
    ctx_dim, n = int(s["text_hidden"]), len(chans)
    total = _conv(4, chans[0], r) + _conv(chans[0], 4, r)
    skips = [chans[0]]
    res, cin = r, chans[0]
    for i, c in enumerate(chans):                  # down: cross-attention on all but the last
        for _ in range(lpb):
            total += _resnet(cin, c, res) + (_sd_transformer(c, res, 77, ctx_dim) if i < n - 1 else 0)
            cin = c
            skips.append(c)
        if i < n - 1:
            res //= 2
            total += _conv(c, c, res)              # stride-2 conv: output resolution
            skips.append(c)
    total += 2 * _resnet(cin, cin, res) + _sd_transformer(cin, res, 77, ctx_dim)
    for i, c in enumerate(reversed(chans)):        # up: the first has no cross-attention
        for _ in range(lpb + 1):
            total += _resnet(cin + skips.pop(), c, res) + (_sd_transformer(c, res, 77, ctx_dim) if i > 0 else 0)
            cin = c
        if i < n - 1:
            res *= 2
            total += _conv(c, c, res)
    return total


def vae_decode(s: dict[str, Any]) -> float:
    c0 = int(s["channels"])
    chans = [int(x) for x in (s.get("vae_channels") or (c0, c0, 2 * c0, 2 * c0))]
    lpb = int(s.get("vae_layers_per_block", 1))
    res = int(s["image_size"]) // 2 ** (len(chans) - 1)
    top = chans[-1]
    total = _conv(4, 4, res, 1) + _conv(4, top, res)                    # post_quant_conv, conv_in
    total += 2 * _resnet(top, top, res) + 2 * res * res * top * top * 4 + 4 * (res * res) ** 2 * top  # mid + attn
    cin = top
    for i, c in enumerate(reversed(chans)):
        for _ in range(lpb + 1):
            total += _resnet(cin, c, res)
            cin = c
        if i < len(chans) - 1:
            res *= 2
            total += _conv(c, c, res)
    return total + _conv(chans[0], 3, res)


def clip_text(s: dict[str, Any], tokens: int = 77) -> float:
    h = int(s["text_hidden"])
    return int(s["text_layers"]) * _layer(h, h, 4 * h, tokens, tokens)


#: passes over the attention-score matrix of one unfused attention: ``baddbmm`` writes the
#: scores, ``softmax`` reads them and writes the probabilities, ``bmm`` reads them (diffusers
#: 0.x ``CrossAttention`` without xformers / a fused SDPA, 2022; the same sequence in Optimum
#: Habana 1.3's pipeline, whose softmax is a TPC kernel of its own after the MME's product)
SCORE_PASSES = 4


def unet_score_elements(s: dict[str, Any]) -> float:
    """Elements of the attention-score matrices (heads x queries x keys) of one UNet pass of
    one sample: self-attention over the latent's pixels and cross-attention to the 77 prompt
    tokens in every transformer block (the down blocks but the last, the mid block, the up
    blocks but the first)."""
    chans = [int(x) for x in (s.get("unet_channels") or (int(s["channels"]), 2 * int(s["channels"])))]
    lpb, r, heads, n = int(s["layers_per_block"]), int(s["image_size"]) // 8, int(s["heads"]), len(chans)
    blocks = []                                    # latent side of every transformer block
    for i in range(n - 1):                         # down
        blocks += [r // 2 ** i] * lpb
    blocks.append(r // 2 ** (n - 1))               # mid
    for i in range(1, n):                          # up (the first has none)
        blocks += [r // 2 ** (n - 1 - i)] * (lpb + 1)
    return sum(heads * (side * side) * (side * side + 77) for side in blocks)


def vae_score_elements(s: dict[str, Any]) -> float:
    """The VAE decoder's single-head mid-block attention over its latent's pixels."""
    chans = s.get("vae_channels") or (0, 0, 0, 0)
    side = int(s["image_size"]) // 2 ** (len(chans) - 1)
    return float(side * side) ** 2


def diffusion_score_elements(s: dict[str, Any], z: Sizes) -> float:
    """One image's attention-score elements over the whole pipeline (the UNet at every step,
    twice under classifier-free guidance, and the VAE decoder)."""
    passes = 2 if z.guidance else 1
    return z.inference_steps * passes * unet_score_elements(s) + vae_score_elements(s)


def diffusion(s: dict[str, Any], z: Sizes) -> float:
    """One image: prompt (and empty prompt) encoded, UNet at every step, VAE decode."""
    passes = 2 if z.guidance else 1
    return passes * clip_text(s) + z.inference_steps * passes * unet(s) + vae_decode(s)


# ------------------------------------------------------------------ generation

def kv_width(family: str, s: dict[str, Any]) -> int:
    """Width of the keys (and of the values) per token per layer: what the KV cache holds.
    ``kv`` is T5's head width (d_kv) but llama's number of key/value heads (grouped-query)."""
    h, heads = int(s["hidden"]), int(s["heads"])
    if family == P.FROM_MODULE and s.get("kv_per_token"):  # the module's cache, over K and V of every layer
        return int(s["kv_per_token"]) / (2 * int(s["layers"]))
    if family in P.DIMMED:
        return P.dims(family, s).kv
    if family == "t5":
        return heads * int(s.get("kv") or h // heads)
    if family == "llama":
        return int(s.get("kv") or heads) * (h // heads)
    return h


def decoder_matmul_params(family: str, s: dict[str, Any]) -> float:
    """Weights a decoder-only LM multiplies per token (its layers and LM head): 2 x this =
    FLOPs per token apart from attention over the cache (a mixture's active experts only)."""
    if family == P.FROM_MODULE:
        return int(s["flops_per_token"]) // 2
    if family in P.COUNTED:
        g = P.dims(family, s)
        router = g.hidden * g.experts if family == "mixtral" else 0
        layer = 2 * g.hidden * (g.q + g.kv) + g.active_experts * g.mlp_mats * g.hidden * g.ffn + router
        return int(s["layers"]) * layer + g.hidden * int(s["vocab"])
    h, L = int(s["hidden"]), int(s["layers"])
    ffn = int(s.get("ffn") or 4 * h)
    attn = 2 * h * h + 2 * h * kv_width(family, s)          # Q, O; K, V (narrower under GQA)
    return L * (attn + h * ffn * (3 if family == "llama" else 2)) + h * int(s["vocab"])


def generation(family: str, s: dict[str, Any], z: Sizes) -> tuple[float, list[float]]:
    """Prefill FLOPs and the FLOPs of each decode step (one new token attending to the cache)."""
    if family == "t5":
        # the encoder runs once over the prompt; each decoder step is one token: its
        # projections (``t5(s, 0, 1)``), self-attention over the tokens so far and
        # cross-attention over the cached encoder keys and values
        inner, L = kv_width("t5", s), int(s["layers"])
        pre = t5(s, z.prompt, 1)
        steps = [t5(s, 0, 1) + 4 * (i + 1) * inner * L + 4 * z.prompt * inner * L for i in range(z.new_tokens)]
        return pre, steps
    h, L = int(s["hidden"]), int(s["layers"])
    q = P.dims(family, s).q if family in P.COUNTED else h
    pre = _lm(family, s, z.prompt, z.prompt, 1)
    if family == P.FROM_MODULE:
        return pre, [2 * decoder_matmul_params(family, s) + attention_per_token(s, z.prompt + i + 1)
                     for i in range(z.new_tokens)]
    steps = [2 * decoder_matmul_params(family, s) + 4 * (z.prompt + i + 1) * q * L for i in range(z.new_tokens)]
    return pre, steps


def attention_scores(family: str, s: dict[str, Any], z: Sizes) -> float:
    """The Q·Kᵀ and A·V part of ``forward`` (one sample): FP8 recipes (Transformer Engine)
    run the linear layers in FP8 and keep these products in 16 bit."""
    if family == P.FROM_MODULE:
        return z.seq * attention_per_token(s, z.seq)
    if family in P.COUNTED:
        return int(s["layers"]) * 4 * z.seq * z.seq * P.dims(family, s).q
    if family in ("gpt2", "bloom", "llama", "bert"):
        return int(s["layers"]) * 4 * z.seq * z.seq * int(s["hidden"])
    if family == "vit":
        return int(s["layers"]) * 4 * vit_tokens(s) ** 2 * int(s["hidden"])
    if family == "t5":
        h = int(s["hidden"])
        inner = int(s["heads"]) * int(s.get("kv") or h // int(s["heads"]))
        return int(s["layers"]) * 4 * inner * (z.seq * z.seq + z.target * z.target + z.target * z.seq)
    return 0.0
