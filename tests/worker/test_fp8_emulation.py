"""accelctl.worker.fp8_emulation: torch's float8 casts under Transformer Engine's delayed
scaling, checked value by value, and (current scaling) against torchao's emulated Float8Linear."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from accelctl.workload.types import Fp8Recipe
from accelctl.worker.fp8_emulation import Fp8Linear, ScaledCast, convert


def test_e4m3_cast_rounds_to_three_mantissa_bits_and_counts_saturation_and_flush():
    cast = ScaledCast("e4m3", amax_history=4, delayed=False)  # scale = 448 / amax = 1 here
    x = torch.tensor([448.0, 1.0625, 1.1875, 2.0 ** -10, 0.0])
    out = cast(x)
    # 1.0625 is halfway between 1 and 1.125: round-to-nearest-even gives 1.0; 1.1875 -> 1.25;
    # 2**-10 is half the smallest E4M3 subnormal (2**-9): flushed to zero
    assert out.tolist() == [448.0, 1.0, 1.25, 0.0, 0.0]
    assert (cast.stats.saturated, cast.stats.flushed, cast.stats.nonzero) == (0, 1, 4)


def test_delayed_scaling_uses_the_scale_from_before_and_follows_history_and_margin():
    cast = ScaledCast("e4m3", amax_history=2, amax_algo="max", margin=0)
    big = torch.tensor([1000.0, 1.0])
    assert cast(big).tolist() == [448.0, 1.0]  # the first scale is 1.0: 1000 saturates
    assert (cast.first.saturated, cast.stats.saturated) == (1, 0)  # counted apart from the recipe's scales
    assert float(cast.scale) == pytest.approx(448 / 1000)
    cast(torch.tensor([10.0]))  # history [10, 1000]: max keeps the 1000
    assert float(cast.scale) == pytest.approx(448 / 1000)
    cast(torch.tensor([10.0]))  # history [10, 10]: 1000 fell out of a 2-long history
    assert float(cast.scale) == pytest.approx(448 / 10)
    cast(torch.tensor([100.0]))  # amax rose past the delayed scale's 10: saturates
    assert cast.stats.saturated == 1 and cast.stats.elements == 3

    recent = ScaledCast("e4m3", amax_history=8, amax_algo="most_recent", margin=2)
    recent(torch.tensor([1000.0]))
    recent(torch.tensor([10.0]))
    assert float(recent.scale) == pytest.approx(448 / 10 / 4)  # the newest amax, margin 2 -> / 2**2

    tiny = ScaledCast("e4m3", amax_history=1)
    tiny(torch.tensor([1e-40]))  # 448 / 1e-40 overflows fp32: TE takes fp32's max instead
    assert float(tiny.scale) == torch.finfo(torch.float32).max

    zero = ScaledCast("e5m2", amax_history=4)
    zero(torch.zeros(3))  # an amax of 0 keeps the old scale
    assert float(zero.scale) == 1.0 and zero.fmax == 57344.0


def test_hybrid_is_e4m3_forward_e5m2_backward_and_conv1d_is_handled():
    from transformers.pytorch_utils import Conv1D

    named = nn.Sequential()
    named.add_module("fc", nn.Linear(8, 16))
    named.add_module("proj", Conv1D(4, 16))  # GPT-2's linear layer: weight (in, out)
    named.add_module("head", nn.Linear(4, 2))  # an output head: kept in the baseline precision
    converted, kept = convert(named, Fp8Recipe(format="hybrid"))
    assert sorted(converted) == ["fc", "proj"] and kept == ["head"]
    layer = converted["fc"]
    assert (layer.input_cast.dtype, layer.weight_cast.dtype, layer.grad_cast.dtype) == (
        torch.float8_e4m3fn, torch.float8_e4m3fn, torch.float8_e5m2)
    assert converted["proj"].transposed and isinstance(named.fc, Fp8Linear)
    named(torch.randn(3, 8)).sum().backward()
    assert named.proj.inner.weight.grad.shape == (16, 4)  # Conv1D keeps (in, out)
    assert layer.grad_cast.first.elements == 3 * 16 and layer.grad_cast.stats.elements == 0  # one (first) cast
    e4m3 = convert(nn.Sequential(nn.Linear(2, 2)), Fp8Recipe(format="e4m3"))[0]["0"]
    assert e4m3.grad_cast.dtype == torch.float8_e4m3fn


def test_current_scaling_equals_torchaos_emulated_float8linear():
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training

    torch.manual_seed(0)
    reference = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 16))
    theirs, ours = copy.deepcopy(reference), copy.deepcopy(reference)
    convert_to_float8_training(theirs, config=Float8LinearConfig(emulate=True))
    convert(ours, Fp8Recipe(format="hybrid"), delayed=False)
    x = torch.randn(8, 32)
    y_theirs, y_ours = theirs(x), ours(x)
    assert torch.equal(y_theirs, y_ours)  # the same FP8 values, the same GEMM
    assert not torch.equal(y_ours, reference(x))  # and FP8 is not fp32
    y_theirs.square().sum().backward()
    y_ours.square().sum().backward()
    for (_, a), (_, b) in zip(theirs.named_parameters(), ours.named_parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-5, atol=1e-6)
