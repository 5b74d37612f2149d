"""The FP8 rehearsal's verdict on two tiny real models trained side by side with fp32:
one whose input has an un-normalised column (a range FP8 cannot hold), one without."""

from __future__ import annotations

import contextlib

import torch
from torch import nn

from accelctl.workload.types import Fp8Recipe
from accelctl.worker import fp8_rehearsal


def _model() -> nn.Module:
    """A frozen random-feature stem (its weight on column 0 is zero: in fp32 that column
    contributes nothing), then a trained hidden layer and head."""
    torch.manual_seed(0)
    m = nn.Sequential()
    m.add_module("stem", nn.Linear(16, 64))
    m.add_module("act", nn.ReLU())
    m.add_module("hidden", nn.Linear(64, 64))
    m.add_module("act2", nn.ReLU())
    m.add_module("head", nn.Linear(64, 1))
    with torch.no_grad():
        m.stem.weight[:, 0] = 0.0
    m.stem.requires_grad_(False)
    return m


def _batches(column0_scale: float):
    """A linear teacher on columns 1..15 (N(0, 1)); column 0 is noise times ``column0_scale``
    (an un-normalised raw feature, e.g. a timestamp) or zero."""
    g = torch.Generator().manual_seed(1)
    teacher = torch.randn(15, generator=g)
    while True:
        x = torch.randn(64, 16, generator=g)
        y = (x[:, 1:] @ teacher).unsqueeze(1)
        x[:, 0] = column0_scale * torch.randn(64, generator=g)
        yield x, y


def _rehearse(column0_scale: float) -> dict:
    return fp8_rehearsal.side_by_side(
        _model(), Fp8Recipe(format="hybrid", amax_history=16, amax_algo="max", margin=0), _batches(column0_scale),
        40, lambda net, b: nn.functional.mse_loss(net(b[0]), b[1]), lambda p: torch.optim.Adam(p, lr=1e-2),
        contextlib.nullcontext)


def test_a_layer_with_an_unnormalised_input_column_diverges_and_is_named():
    report = _rehearse(1e6)
    assert report["verdict"] == "diverged"
    assert report["divergence"]["mean_abs_last_half"] > 1.0  # fp8's loss stays several times fp32's
    last = report["steps"][-1]
    assert last["loss_fp8"] > 3 * last["loss_baseline"]
    assert list(report["keep_higher_precision"]) == ["stem"]  # only the layer that reads the column
    why = " ".join(report["keep_higher_precision"]["stem"])
    assert "input" in why and "flushed to zero" in why
    stem = report["layers"]["stem"]["input"]
    assert stem["flushed_fraction"] > 0.5 and stem["amax_max"] > 1e6
    assert report["kept_by_design"] == ["head"]
    lines = fp8_rehearsal.summary_lines(report, "fp32")
    assert lines[0][0] == "warning" and "diverged" in lines[0][1]
    assert any("keep layer stem in higher precision" in line for _, line in lines)


def test_the_same_model_without_the_column_tracks_fp32_and_flags_nothing():
    report = _rehearse(0.0)
    assert report["verdict"] == "tracks"
    assert report["divergence"]["mean_abs_last_half"] < fp8_rehearsal.DIVERGED_ABOVE
    assert report["keep_higher_precision"] == {}
    assert report["steps"][-1]["loss_baseline"] < 0.5 * report["steps"][0]["loss_baseline"]  # it learned
    # FP8 is not fp32: the per-step losses differ, and the layers saw real quantisation error
    assert any(r["divergence"] != 0 for r in report["steps"])
    assert 0 < report["layers"]["hidden"]["output_rel_error_mean"] < fp8_rehearsal.OUTPUT_ERROR_ABOVE
