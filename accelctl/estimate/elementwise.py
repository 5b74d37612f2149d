"""Memory traffic of the element-wise operators of a transformer layer in eager mode.

A matrix product's roofline (``roofline.py``) hides its own operand traffic under its FLOPs,
but in eager PyTorch every LayerNorm, cast, GELU, residual add and head transpose is a kernel
of its own that reads and writes its whole tensor at memory speed, one after the other, while
the tensor cores wait.  At the seeds' sizes this is not small: ViT-Huge's layer moves ~80
bytes per token per hidden unit forward, a third of its GEMM time on an A100 and more on an
H100, whose FLOP/s grew 3.2x over the A100 and its bandwidth 2.2x (seed 002 measures 2.06x).

Counted from the operators of timm 0.9's ``Block`` (the block seed 002 trains) and HF's
BERT / GPT-2 / BLOOM layers, which have the same sequence, per token, hidden size ``h``, MLP
width ``f``, under ``torch.autocast`` (fp32 weights and residual stream, 16-bit matmul
outputs; ``e_res`` = 4, ``e`` = 2) or in one dtype (``e_res`` = ``e``):

* LayerNorm x2: read and write the residual stream: ``2 x 2h e_res``
* the cast of each LayerNorm output to 16 bit for the next matmul (autocast only):
  ``2 x h (e_res + e)``
* attention (fused ``scaled_dot_product_attention``, as timm 0.9 and torch 2 use):
  read q, k, v, write the output: ``4h e``; the head merge ``transpose().reshape()``: ``2h e``
* residual add x2 (16-bit branch into the fp32 stream): ``2 x h (2 e_res + e)``
* GELU: ``2f e``

Backward runs each of them again with one more tensor (the saved input and the incoming
gradient in, the gradient out): 2x the forward's bytes, so training moves 3x.

Transformer Engine's ``TransformerLayer`` (``te_layers = on``) fuses the LayerNorms into
the following matmuls (``LayerNormLinear``, ``LayerNormMLP``: no separate cast), the bias and
the residual add (``bias_dropout_add``), and keeps no head transpose: what remains is the
normalisation's read and 16-bit write, attention's operands, the residual adds and GELU.

FP8 (``precision fp8`` with TE): every matmul input is cast to FP8 and also written
transposed for the backward pass (TE's ``cast_transpose``: one byte each), the forward's four
inputs ``3h + f`` wide; the backward casts the four output gradients (``5h + f`` wide: the
QKV gradient is 3h) the same way, reading their 16-bit values: ``2(3h + f) + 4(5h + f)``
more per token over the step.

Graph compilers fuse these chains into the neighbouring kernels: Gaudi in lazy mode
(SynapseAI's graph compiler) and XLA (Neuron) get no such term.
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
