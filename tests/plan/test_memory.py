"""The memory-fit estimate agrees with the seeds' facts."""

from __future__ import annotations

from accelctl.api import check, parse
from accelctl.plan.memory import estimate

GB = 1e9


def _spec(text: str):
    (spec,) = check(parse(text, "m.wl"))
    return spec


BLOOM = """
workload b {
  task generate { max_new_tokens = 100 }
  model hf("bigscience/bloomz") { stand_in = bloom() }
  precision bf16
  target one   { device = a100  devices = 1 }
  target eight { device = a100  devices = 8  parallel = deepspeed_inference(tp = 8) }
}
"""


def test_bloom_176b_in_16_bit_is_352_gb_and_needs_tp8():
    spec = _spec(BLOOM)
    one = estimate(spec, spec.target("one"))
    assert 350 * GB <= one.weights <= 354 * GB  # 176B x 2 bytes
    assert not one.fits
    eight = estimate(spec, spec.target("eight"))
    assert 43 * GB <= eight.weights <= 45 * GB
    assert eight.fits and eight.total < 80 * GB


T5 = """
workload t5 {
  task finetune
  model hf("t5-3b") { stand_in = t5() }
  precision fp32
  gradient_checkpointing = on
  batch { micro = 1 }
  dataset synthetic(seq_len = 512, target_len = 128)
  target gaudi2 { devices = 8 }
  target gaudi1 { device = gaudi  devices = 8 }
  target a100   { devices = 8 }
}
"""


def test_t5_3b_finetune_fits_gaudi2_not_gaudi1():
    spec = _spec(T5)
    assert estimate(spec, spec.target("gaudi2")).fits
    assert estimate(spec, spec.target("a100")).fits
    g1 = estimate(spec, spec.target("gaudi1"))
    assert not g1.fits and g1.capacity == 32 * GB


def test_checkpointing_shrinks_activations():
    spec = _spec(T5)
    t = spec.target("gaudi2")
    with_gc = estimate(spec, t)
    import dataclasses

    without = estimate(spec, dataclasses.replace(t, gradient_checkpointing=False))
    assert with_gc.activations < without.activations / 5


BERT15 = """
workload bert15 {
  task pretrain
  model bert(layers = 48, hidden = 1600, heads = 25)
  precision bf16
  batch { micro = 16  accumulation = 24 }
  target dl1 { instance = dl1.24xlarge  nodes = 16  parallel = zero(stage = 1) }
  target dl1_nozero { instance = dl1.24xlarge  nodes = 16 }
}
"""


def test_bert_1_5b_with_zero1_fits_gaudi1():
    spec = _spec(BERT15)
    fit = estimate(spec, spec.target("dl1"))
    assert 1.4e9 <= fit.weights / 2 <= 1.6e9  # ~1.5B params in bf16
    assert fit.fits and fit.capacity == 32 * GB
    no_zero = estimate(spec, spec.target("dl1_nozero"))
    assert no_zero.optimizer > 100 * fit.optimizer  # ZeRO-1 shards Adam state over 128 ranks
