"""FP8 training emulated on the CPU: Transformer Engine's ``DelayedScaling`` recipe on top of
torch's ``float8_e4m3fn`` / ``float8_e5m2`` casts (``accelctl run --rehearse --fp8``).

Each converted linear becomes an ``Fp8Linear`` whose three GEMM operands (input, weight, output
gradient) are scaled, saturated, cast to FP8 and back, then multiplied in fp32, so every GEMM sees
exactly the values an FP8 GEMM would read.  Scaling per operand (``ScaledCast``) follows TE's
delayed scaling (amax history, ``amax_algo``, margin); ``delayed=False`` is current scaling, as
torchao's ``Float8Linear``.  Exact: the operand values, saturation, flush-to-zero, the scaling
arithmetic; approximate: fp32 accumulation and per-use scale updates.  Per layer it counts
saturated and flushed elements and the output's relative error.  Details: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

FORMATS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
#: recipe format -> (forward operands, backward operand)
RECIPE_FORMATS = {"hybrid": ("e4m3", "e5m2"), "e4m3": ("e4m3", "e4m3")}
#: output heads left in the baseline precision, as TE's block swap leaves timm's ``head`` and
#: a causal LM's ``lm_head`` (tied to the embedding) outside its FP8 layers
KEPT_HEADS = ("head", "lm_head", "classifier")


@dataclass
class CastStats:
    """What one operand's casts did, summed over the run."""

    elements: int = 0
    nonzero: int = 0
    saturated: int = 0
    flushed: int = 0
    amax_max: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"elements": self.elements, "saturated": self.saturated, "flushed_to_zero": self.flushed,
                "saturated_fraction": self.saturated / max(1, self.elements),
                "flushed_fraction": self.flushed / max(1, self.nonzero), "amax_max": self.amax_max}


class ScaledCast:
    """One GEMM operand's FP8 cast with its (delayed or current) scaling state."""

    def __init__(self, fmt: str, amax_history: int = 1024, amax_algo: str = "max", margin: int = 0,
                 delayed: bool = True) -> None:
        self.dtype = FORMATS[fmt]
        self.fmax = float(torch.finfo(self.dtype).max)
        self.history = torch.zeros(max(1, amax_history), dtype=torch.float32)
        self.algo, self.margin, self.delayed = amax_algo, margin, delayed
        self.scale = torch.tensor(1.0)
        self.stats = CastStats()
        #: the first cast of a delayed operand (scale 1.0, no history yet), kept out of ``stats``
        self.first = CastStats()
        self.calls = 0

    def _scale_for(self, amax: torch.Tensor, old: torch.Tensor) -> torch.Tensor:
        """TE's ``_default_sf_compute``: fp8_max / amax / 2**margin; the old scale where amax
        is 0 or not finite; fp32's max where the scale overflows (a tiny amax)."""
        new = self.fmax / amax / (2.0 ** self.margin)
        new = torch.where((amax > 0) & torch.isfinite(amax), new, old)
        return torch.where(torch.isinf(new), torch.full_like(new, torch.finfo(torch.float32).max), new)

    @torch.no_grad()
    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as the FP8 GEMM reads it (dequantised, fp32)."""
        x = x.detach().float()
        amax = x.abs().max() if x.numel() else torch.tensor(0.0)
        scale = self.scale if self.delayed else self._scale_for(amax, self.scale)
        scaled = x * scale
        over = scaled.abs() > self.fmax
        fp8 = scaled.clamp(-self.fmax, self.fmax).to(self.dtype)
        out = fp8.float() / scale
        nonzero = x != 0
        # the first delayed cast uses the initial scale 1.0, before any amax was seen (TE's too):
        # counted apart, so a layer is judged on the scales the recipe computes
        s = self.first if self.delayed and self.calls == 0 else self.stats
        self.calls += 1
        s.elements += x.numel()
        s.nonzero += int(nonzero.sum())
        s.saturated += int(over.sum())
        s.flushed += int((nonzero & (out == 0)).sum())
        s.amax_max = max(s.amax_max, float(amax))
        # the history, newest first; the next cast's scale comes from it (delayed scaling)
        self.history = torch.roll(self.history, 1)
        self.history[0] = amax
        reduced = self.history.max() if self.algo == "max" else self.history[0]
        self.scale = self._scale_for(reduced, self.scale) if self.delayed else scale
        return out


class _Fp8Gemm(torch.autograd.Function):
    """y = q(x) @ q(w).T + b; dgrad = q(g) @ q(w); wgrad = q(g).T @ q(x) (``q``: the FP8 cast)."""

    @staticmethod
    def forward(ctx, x, w, b, layer):
        xq, wq = layer.input_cast(x), layer.weight_cast(w)
        y = xq @ wq.t()
        with torch.no_grad():
            exact = x.detach().float() @ w.detach().float().t()
            layer.record_error(float((y - exact).norm() / exact.norm().clamp_min(1e-30)))
        if b is not None:
            y = y + b.float()
        ctx.save_for_backward(xq, wq)
        ctx.layer, ctx.has_bias = layer, b is not None
        return y

    @staticmethod
    def backward(ctx, grad):
        xq, wq = ctx.saved_tensors
        gq = ctx.layer.grad_cast(grad)
        grad_x = gq @ wq
        grad_w = gq.reshape(-1, gq.shape[-1]).t() @ xq.reshape(-1, xq.shape[-1])
        grad_b = grad.float().reshape(-1, grad.shape[-1]).sum(0) if ctx.has_bias else None
        return grad_x, grad_w, grad_b, None


class Fp8Linear(nn.Module):
    """A linear layer (``nn.Linear`` or transformers' ``Conv1D``) whose GEMMs run on FP8 values.

    Under autocast the output takes the autocast dtype (TE's layers return bf16 inside bf16
    autocast); the GEMM itself runs with autocast off, on the FP8-cast fp32 values."""

    def __init__(self, inner: nn.Module, recipe: Any, delayed: bool = True) -> None:
        super().__init__()
        fwd, bwd = RECIPE_FORMATS[recipe.format]
        self.inner = inner
        self.transposed = not isinstance(inner, nn.Linear)  # Conv1D stores (in, out)
        kw = dict(amax_history=recipe.amax_history, amax_algo=recipe.amax_algo, margin=recipe.margin, delayed=delayed)
        self.input_cast, self.weight_cast, self.grad_cast = ScaledCast(fwd, **kw), ScaledCast(fwd, **kw), ScaledCast(bwd, **kw)
        self.errors: list[float] = []

    def record_error(self, value: float) -> None:
        self.errors.append(value)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        amp = torch.is_autocast_enabled(x.device.type)
        dtype = torch.get_autocast_dtype(x.device.type) if amp else x.dtype
        w = self.inner.weight.t() if self.transposed else self.inner.weight
        with torch.autocast(x.device.type, enabled=False):
            y = _Fp8Gemm.apply(x.float(), w, self.inner.bias, self)
        return y.to(dtype)

    def stats(self) -> dict[str, Any]:
        errors = self.errors or [0.0]
        casts = {"input": self.input_cast, "weight": self.weight_cast, "grad_output": self.grad_cast}
        return {**{name: {**c.stats.as_dict(), "first_cast": c.first.as_dict()} for name, c in casts.items()},
                "output_rel_error_mean": sum(errors) / len(errors), "output_rel_error_max": max(errors)}


def _is_linear(module: nn.Module) -> bool:
    return isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D"


def convert(model: nn.Module, recipe: Any, delayed: bool = True,
            keep: tuple[str, ...] = KEPT_HEADS) -> tuple[dict[str, Fp8Linear], list[str]]:
    """Swap ``model``'s linear layers for ``Fp8Linear`` in place; returns {name: layer} and the
    names of the linear layers kept in the baseline precision (the output heads)."""
    converted: dict[str, Fp8Linear] = {}
    kept: list[str] = []
    for parent_name, parent in list(model.named_modules()):
        for child_name, child in list(parent.named_children()):
            if not _is_linear(child):
                continue
            name = f"{parent_name}.{child_name}" if parent_name else child_name
            if child_name in keep:
                kept.append(name)
                continue
            layer = Fp8Linear(child, recipe, delayed)
            setattr(parent, child_name, layer)
            converted[name] = layer
    return converted, kept

