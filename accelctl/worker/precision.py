"""Resolve a job's precision into what the loops apply: an autocast dtype, a grad scaler, fp8.

* fp32: nothing.  bf16 / fp16: ``torch.autocast`` around forward (fp32 master weights; inference
  casts the weights); on a CPU without native 16-bit matmuls it warns: emulated, far slower (LAB.md).
* fp16 training uses a ``GradScaler``.
* fp8 with ``library = torchao``: bf16 autocast plus ``Float8Linear`` (``accelctl.worker.float8``).
* fp8: Transformer Engine's FP8 autocast of the targeted version inside bf16 autocast (seed 002),
  as the plan's ``te_recipe.json`` says (``accelctl.worker.te_layers``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

import torch

from accelctl.families import FAMILIES
from accelctl.hostinfo import cpu_precision_warning

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@dataclass
class Precision:
    #: what runs: fp32, bf16, fp16, fp8 (may differ from the request after a fallback)
    name: str
    #: autocast dtype, None for fp32
    dtype: torch.dtype | None = None
    #: factory of Transformer Engine's FP8 forward context (fp8 only), from ``te_layers``
    fp8: Callable[[], Any] | None = None

    def autocast(self, adapter):
        """Context for a forward pass: autocast, and TE's fp8 autocast inside it."""
        stack = contextlib.ExitStack()
        stack.enter_context(adapter.autocast(self.dtype))
        if self.fp8 is not None:
            stack.enter_context(self.fp8())
        return stack

    def grad_scaler(self, adapter):
        if self.dtype == torch.float16:
            return torch.amp.GradScaler(adapter.autocast_type)
        return None


def resolve(job, adapter, log: Callable[[str, str], None]) -> Precision:
    name = job.precision.dtype
    if name == "fp32":
        return Precision("fp32")
    if name == "fp8":
        from accelctl.worker import float8

        if float8.wanted(job):  # torchao: the loop swaps the linears (float8.convert) under bf16 autocast
            return Precision("fp8", torch.bfloat16)
        return Precision("fp8", torch.bfloat16, fp8=_fp8_context(job))
    if name not in DTYPES:
        raise ValueError(f"unknown precision {name!r} (fp32, bf16, fp16, fp8)")
    dtype = DTYPES[name]
    try:
        with adapter.autocast(dtype):
            torch.ones(2, 2, device=adapter.device) @ torch.ones(2, 2, device=adapter.device)
    except Exception as exc:  # noqa: BLE001 - unsupported autocast falls back to fp32
        log("warning", f"{name} autocast is not supported on {adapter.name} ({exc}); running fp32 instead")
        return Precision("fp32")
    if FAMILIES[job.device.adapter].host:  # the CPU accelctl runs on: its flags say what is native
        from accelctl.contract.calibration import speed_vs_fp32

        # the planner's warning, worded once: this CPU's stored measurement, else its flags
        measured = speed_vs_fp32(name, adapter.device_name(), torch.get_num_threads())
        slow = cpu_precision_warning(name, measured=measured)
        if slow is not None:
            log("warning", slow)
    return Precision(name, dtype)


def _fp8_context(job):
    """The FP8 forward context of the plan's Transformer Engine settings (``te_recipe.json``)."""
    from accelctl.worker import te_layers

    cfg = te_layers.load()
    if cfg is None:
        raise RuntimeError("precision fp8 needs a te_fp8 plan (its te_recipe.json names the TE version, "
                           "autocast API and recipe)")
    return te_layers.forward_context(cfg)
