"""Plans and estimates of Hub models whose shape comes from their config.json use the real
shape (issue 23: a Llama-2-7B ZeRO-3 job on 2 x 8 H100 was planned at 17.60 KB of weights
and estimated at 3.23 ms a step, the 164 k-parameter stand-in's figures): weights per
device, ZeRO-3's share, grouped-query attention's narrower KV cache, a mixture's experts all
in memory while its FLOPs count the active ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl import api
from accelctl.models import flops as F
from accelctl.estimate.roofline import estimate
from accelctl.plan import memory
from accelctl.models import param_count
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]


def _spec(file: str, name: str):
    (spec,) = [s for s in api.load(ROOT / "workloads" / file) if s.name == name]
    return spec


def _fit_note(plan) -> str:
    return next(n for n in plan.notes if n.startswith("memory per device"))


def test_llama2_7b_weights_are_the_real_models():
    spec = _spec("llama2_7b.wl", "llama2_7b_infer")
    assert param_count.total("llama", spec.model.real_shape) == 6_738_415_616
    for target in ("h100", "gaudi2", "trn1"):
        note = _fit_note(api.plan(spec, target))
        assert note.startswith("memory per device (real model): weights 13.48 GB"), note


def test_llama2_7b_zero3_on_16_h100_under_slurm_holds_a_sixteenth():
    spec = _spec("llama2_7b.wl", "llama2_7b_zero3")
    plan = api.plan(spec, "h100")
    assert plan.engine == "slurm"
    note = _fit_note(plan)
    # 13.48 GB / 16 ranks of bf16 weights, as many gradients, 12 bytes of Adam + master per parameter / 16
    assert "weights 842.30 MB + gradients 842.30 MB + optimizer 5.05 GB" in note, note
    est = estimate(spec, spec.target("h100"))
    assert est.basis == "real"
    tokens = 4 * 2048 * 16                          # micro 4 x 2048 tokens x 16 ranks
    six_n_d = 6 * 6.74e9 * tokens / 16              # the usual 6·N·D per device, without attention
    assert six_n_d < est.flops_per_step < 1.5 * six_n_d  # recompute (checkpointing) and attention on top
    assert est.step_time_s > 0.1                    # not the stand-in's 3.23 ms


def test_grouped_query_attention_narrows_the_kv_cache():
    spec = _spec("mistral_7b.wl", "mistral_7b_generate")
    target = spec.target("h100")
    gqa = memory.estimate(spec, target)
    mha_shape = {**spec.model.real_shape, "kv_heads": spec.model.real_shape["heads"]}
    mha = memory.estimate(replace(spec, model=replace(spec.model, real_shape=mha_shape)),
                          target)
    assert spec.model.real_shape["kv_heads"] == 8 and gqa.kv_cache > 0
    assert mha.kv_cache == pytest.approx(4 * gqa.kv_cache)   # 32 heads over 8 key/value heads
    assert gqa.weights < mha.weights                          # narrower K and V projections too


def test_mixture_memory_holds_every_expert_and_flops_count_the_active_ones():
    spec = _spec("mixtral_8x7b.wl", "mixtral_8x7b_generate")
    s = spec.model.real_shape
    assert param_count.total("mixtral", s) == pytest.approx(46.7e9, rel=0.01)
    assert param_count.active("mixtral", s) == pytest.approx(12.9e9, rel=0.01)
    note = _fit_note(api.plan(spec, "h100"))
    assert "weights 11.68 GB" in note, note       # 46.7 B x 2 bytes / tensor parallel 8
    # each decoded token multiplies the active weights (2 of 8 experts, the router, attention, head)
    per_token = F.decoder_matmul_params("mixtral", s)
    assert 12.5e9 < per_token < 12.9e9
    dense = replace(spec.model, real_shape={**s, "experts_per_token": 8})
    assert F.decoder_matmul_params("mixtral", dense.real_shape) > 3 * per_token
    est = estimate(spec, spec.target("h100"))
    assert est.basis == "real"
    steps = spec.task.max_new_tokens
    assert est.flops_per_step > 2 * per_token * steps / 8   # decode alone, per device of tp = 8


def test_training_a_mixture_keeps_every_expert_in_the_optimizer():
    spec = _spec("mixtral_8x7b.wl", "mixtral_8x7b_zero3")
    note = _fit_note(api.plan(spec, "h100", engine="local"))
    assert "weights 5.84 GB + gradients 5.84 GB + optimizer 35.03 GB" in note, note   # 46.7 B over 16 ranks
