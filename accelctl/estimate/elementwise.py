"""Memory traffic of the element-wise operators of a transformer layer in eager mode.

The roofline hides a matmul's operand traffic under its FLOPs, but in eager PyTorch every
LayerNorm, cast, GELU, residual add and head transpose is a kernel of its own that moves its
whole tensor at memory speed.  Bytes per token are counted from the operators of timm's
``Block`` and HF's BERT / GPT-2 / BLOOM layers (hidden ``h``, MLP width ``f``, ``e`` bytes per
16-bit element, ``e_res`` for the residual stream: 4 under autocast, else ``e``); backward moves
2x the forward's bytes.  TE's ``TransformerLayer`` fuses the norms, casts and bias adds; FP8 adds
TE's cast-transposes.  Graph compilers (Gaudi lazy mode, XLA) get no such term.
Per-operator derivation: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations


def forward_bytes_per_token(h: int, f: int, e: int, e_res: int, autocast: bool, te_layers: bool) -> float:
    """Bytes the element-wise operators of one layer move per token in the forward pass."""
    if te_layers:
        return 2 * h * (e_res + e) + 4 * h * e + 2 * h * (2 * e_res + e) + 2 * f * e
    casts = 2 * h * (e_res + e) if autocast else 0
    return 2 * 2 * h * e_res + casts + 6 * h * e + 2 * h * (2 * e_res + e) + 2 * f * e


def fp8_cast_bytes_per_token(h: int, f: int) -> float:
    """Bytes per token per layer of TE's FP8 casts over a training step (forward + backward)."""
    return 2 * (3 * h + f) + 4 * (5 * h + f)


#: backward = 2 x forward: three times the forward's bytes over a training step
TRAINING_PASSES = 3
