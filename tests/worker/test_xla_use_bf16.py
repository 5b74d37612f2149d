"""The worker's XLA adapter under ``XLA_USE_BF16=1`` (the plan sets it for ``xla_use_bf16 = on``,
seed 004): torch-xla already holds the fp32 tensors in bf16, so the forward runs without
autocast; without the variable a bf16 job autocasts as before.  (The run itself on torch-xla's
CPU device: tests/e2e/test_xla_rehearsal_run.py.)"""

from __future__ import annotations

import torch

from accelctl.worker.devices import XlaAdapter


def _adapter() -> XlaAdapter:
    return object.__new__(XlaAdapter)  # no device: autocast asks none (torch-xla is not in .venv)


def test_no_autocast_under_xla_use_bf16(monkeypatch):
    monkeypatch.setenv("XLA_USE_BF16", "1")
    with _adapter().autocast(torch.bfloat16):
        assert not torch.is_autocast_enabled("xla")
        assert (torch.ones(2, 2) @ torch.ones(2, 2)).dtype == torch.float32


def test_a_bf16_job_autocasts_without_it(monkeypatch):
    monkeypatch.delenv("XLA_USE_BF16", raising=False)
    ctx = _adapter().autocast(torch.bfloat16)
    assert isinstance(ctx, torch.autocast) and ctx.device == "xla" and ctx.fast_dtype == torch.bfloat16
