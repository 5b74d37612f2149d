"""Element-wise memory traffic and kernel launches of Stable Diffusion's UNet and VAE decoder
in eager PyTorch, block by block, in execution order.

``flops.py`` counts the convolutions and matrix products; in eager diffusers every other operator
on the feature maps is a kernel of its own that moves its whole tensor at memory speed and costs
the host one launch.  Counted per block (``P`` = batch x side^2 pixels, ``c`` channels) from
diffusers' ``UNet2DConditionModel`` and ``AutoencoderKL`` decoder with the unfused
``AttnProcessor``; attention scores are ``flops.SCORE_PASSES``, not counted here.
``tests/estimate/test_unet_elementwise.py`` checks bytes and launches against the aten operators
a real forward dispatches.  ``roofline.py`` charges this on eager targets only.
Per-block derivation: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accelctl.models import flops as F

#: tokens of the CLIP prompt the cross-attention attends to
CONTEXT_TOKENS = 77
#: the timestep embedding: sinusoids (arange, scale, exp, cast, products, sin, cos, 2 cats)
#: and the 2-layer MLP with its SiLU
TIME_EMBEDDING_LAUNCHES = 14


@dataclass(frozen=True)
class Block:
    """One module of the UNet or the VAE decoder at its batch."""

    what: str
    #: matrix products and convolutions (as ``flops.py`` counts them)
    flops: float
    #: bytes the element-wise operators read and write
    elementwise_bytes: float
    #: attention-score elements (heads x queries x keys; ``flops.SCORE_PASSES`` passes each)
    score_elements: float
    #: operators that launch a kernel (views and allocations launch none)
    launches: int


def resnet(cin: int, c: int, side: int, batch: int, e: int, time_embedding: bool = True) -> Block:
    p = batch * side * side
    per_pixel = 4 * cin + (11 if time_embedding else 9) * c
    launches = (11 if time_embedding else 8) + (1 if cin != c else 0)
    return Block(f"resnet {cin}->{c} at {side}^2", batch * F._resnet(cin, c, side), per_pixel * p * e, 0.0, launches)


def transformer(c: int, side: int, batch: int, heads: int, ctx_dim: int, e: int) -> Block:
    p = batch * side * side
    split = batch > 1                       # head_to_batch_dim copies once the batch is over 1
    per_pixel = 58 if split else 52
    context = 2 * 2 * batch * CONTEXT_TOKENS * c if split else 0   # cross-attention's k, v copies
    scores = batch * heads * side * side * (side * side + CONTEXT_TOKENS)
    return Block(f"transformer {c} at {side}^2", batch * F._sd_transformer(c, side, CONTEXT_TOKENS, ctx_dim),
                 (per_pixel * c * p + context) * e, scores, 39 if split else 33)


def _conv(what: str, cin: int, c: int, side: int, batch: int, k: int = 3) -> Block:
    return Block(what, batch * F._conv(cin, c, side, k), 0.0, 0.0, 1)


def unet_blocks(s: dict[str, Any], batch: int, e: int) -> list[Block]:
    """One UNet call over ``batch`` latents (2 x the images under classifier-free guidance),
    in the order its kernels run; the sum of the FLOPs is ``batch x flops.unet(s)``."""
    chans = [int(x) for x in (s.get("unet_channels") or (int(s["channels"]), 2 * int(s["channels"])))]
    lpb, side = int(s["layers_per_block"]), int(s["image_size"]) // 8
    heads, ctx = int(s["heads"]), int(s["text_hidden"])
    n = len(chans)
    out = [Block("time embedding", 0.0, 0.0, 0.0, TIME_EMBEDDING_LAUNCHES), _conv("conv_in", 4, chans[0], side, batch)]
    skips, cin = [chans[0]], chans[0]
    for i, c in enumerate(chans):           # down: cross-attention on all but the last level
        for _ in range(lpb):
            out.append(resnet(cin, c, side, batch, e))
            if i < n - 1:
                out.append(transformer(c, side, batch, heads, ctx, e))
            cin = c
            skips.append(c)
        if i < n - 1:
            side //= 2
            out.append(_conv("downsample", c, c, side, batch))
            skips.append(c)
    out += [resnet(cin, cin, side, batch, e), transformer(cin, side, batch, heads, ctx, e),
            resnet(cin, cin, side, batch, e)]
    for i, c in enumerate(reversed(chans)):  # up: the first level has no cross-attention
        for _ in range(lpb + 1):
            skip = skips.pop()
            out.append(Block("skip concatenation", 0.0, 2 * (cin + skip) * batch * side * side * e, 0.0, 1))
            out.append(resnet(cin + skip, c, side, batch, e))
            if i > 0:
                out.append(transformer(c, side, batch, heads, ctx, e))
            cin = c
        if i < n - 1:
            side *= 2
            out.append(Block("upsample", batch * F._conv(c, c, side), 1.25 * c * batch * side * side * e, 0.0, 2))
    out.append(Block("conv_norm_out, SiLU", 0.0, 4 * chans[0] * batch * side * side * e, 0.0, 2))
    out.append(_conv("conv_out", chans[0], 4, side, batch))
    return out


def vae_decoder_blocks(s: dict[str, Any], batch: int, e: int) -> list[Block]:
    """The VAE decoder over ``batch`` latents; the sum of the FLOPs is ``batch x flops.vae_decode(s)``."""
    c0 = int(s["channels"])
    chans = [int(x) for x in (s.get("vae_channels") or (c0, c0, 2 * c0, 2 * c0))]
    lpb = int(s.get("vae_layers_per_block", 1))
    side = int(s["image_size"]) // 2 ** (len(chans) - 1)
    top, p = chans[-1], batch * side * side
    out = [_conv("post_quant_conv", 4, 4, side, batch, 1), _conv("conv_in", 4, top, side, batch),
           resnet(top, top, side, batch, e, time_embedding=False)]
    # one-head attention: GroupNorm 2c, q/k/v bias adds 3 x 2c, residual add 3c, division 2c;
    # upcast_softmax: the fp32 copy of the scores and the cast back (e + 4 bytes each), and
    # the softmax itself at 4 bytes instead of e (2 passes)
    scores = batch * float(side * side) ** 2
    attn_bytes = 13 * top * p * e + scores * (2 * (e + 4) + 2 * (4 - e))
    attn_flops = batch * (2 * side * side * top * top * 4 + 4 * (side * side) ** 2 * top)
    out += [Block(f"attention {top} at {side}^2", attn_flops, attn_bytes, scores, 15),
            resnet(top, top, side, batch, e, time_embedding=False)]
    cin = top
    for i, c in enumerate(reversed(chans)):
        for _ in range(lpb + 1):
            out.append(resnet(cin, c, side, batch, e, time_embedding=False))
            cin = c
        if i < len(chans) - 1:
            side *= 2
            out.append(Block("upsample", batch * F._conv(c, c, side), 1.25 * c * batch * side * side * e, 0.0, 2))
    out.append(Block("conv_norm_out, SiLU", 0.0, 4 * chans[0] * batch * side * side * e, 0.0, 2))
    out.append(_conv("conv_out", chans[0], 3, side, batch))
    return out


def totals(blocks: list[Block]) -> tuple[float, float, int]:
    """FLOPs, element-wise bytes and launches of ``blocks``."""
    return (sum(b.flops for b in blocks), sum(b.elementwise_bytes for b in blocks),
            sum(b.launches for b in blocks))


def launch_bound_time(blocks: list[Block], device_s: list[float], per_launch_s: float) -> float:
    """Time of ``blocks`` when the host issues one launch every ``per_launch_s`` and the device
    runs them in order (the CUDA stream): a block starts when the device is free and the host
    has issued its first kernel, and cannot end before the host has issued its last one plus
    the time of that kernel.  Large kernels let the host run ahead; runs of small ones leave
    the device waiting for the host."""
    host = device = 0.0
    for b, d in zip(blocks, device_s):
        first = host + per_launch_s
        host += b.launches * per_launch_s
        device = max(max(device, first) + d, host + d / max(1, b.launches))
    return device
