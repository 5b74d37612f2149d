"""The memory-fit estimate agrees with the seeds' facts."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl.api import check, load, parse
from accelctl.models import activations as act
from accelctl.plan.memory import estimate, shape_for
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]

GB = 1e9


def _spec(text: str):
    (spec,) = check(parse(text, "m.wl"))
    return spec


def _workload(file: str, name: str):
    return next(s for s in load(ROOT / "workloads" / file) if s.name == name)


def _with(target, micro: int):
    return replace(target, batch=replace(target.batch, micro=micro))


def _eager(target):
    return replace(target, options=replace(target.options, lazy_mode=False))


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
    # on a GPU (and an HPU in eager mode); HPU lazy mode is test_lazy_mode_graph_holds_the_step
    spec = _spec(T5)
    for t in (spec.target("a100"), _eager(spec.target("gaudi2"))):
        with_gc = estimate(spec, t)
        without = estimate(spec, replace(t, gradient_checkpointing=False))
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
    # SEEDS.md 27: the seed ran it with "DeepSpeed ZeRO stage 1 (optimizer states partitioned)";
    # unsharded, Adam's 12 bytes x 1.5 B parameters (18.3 GB) no longer leave room in 32 GB
    assert not no_zero.fits


# --------------------------------------------------------------------------- the seeds' facts
# Each test quotes the line of /work/shared/context/SEEDS.md (or the seed text) it checks.

# SEEDS.md 19-20: "T5-3B fine-tuning for summarization on CNN DailyMail, 8 devices, fp32 + gradient
# checkpointing, per-device batch 1 (bs > 1 does not fit); does not fit at all on Gaudi1"
def test_seed_000_t5_3b_batch_1_fits_gaudi2_batch_2_does_not():
    spec = _workload("t5_3b_summarization.wl", "t5_3b_summarization")
    g2 = spec.target("gaudi2")
    assert g2.gradient_checkpointing and g2.precision.dtype == "fp32" and g2.batch.micro == 1
    one = estimate(spec, g2)
    assert one.fits and one.capacity == 96 * GB
    for micro in (2, 4, 8):
        assert not estimate(spec, _with(g2, micro)).fits, micro
    # the reason the seed gives: the graph of the first iteration ("2x: HPU lazy mode's ...")
    assert "lazy mode's first-iteration graph" in one.describe()


def test_seed_000_t5_3b_does_not_fit_gaudi1_at_all():
    # SEEDS.md 20: "does not fit at all on Gaudi1"; 90-91: "memory decides what fits at all (T5-3B on Gaudi1 ...)"
    spec = _workload("t5_3b_summarization.wl", "t5_3b_summarization")
    g1 = spec.target("gaudi1")
    fit = estimate(spec, g1)
    assert not fit.fits and fit.capacity == 32 * GB
    # not even the weights, gradients and Adam state: 16 bytes x 2.85 B parameters in fp32
    assert fit.weights + fit.gradients + fit.optimizer > 32 * GB
    assert not estimate(spec, _eager(g1)).fits


def test_t5_3b_activations_count_encoder_decoder_and_the_target_length():
    """T5-3B's layers are 4096 wide in attention and 16384 in the MLP (not h and 4h); its
    decoder adds cross-attention to the 1024 source tokens; the target length counts."""
    spec = _workload("t5_3b_summarization.wl", "t5_3b_summarization")
    a100 = spec.target("a100")  # 16 per device as the seed's A100 ran; the figures below are one sample's
    a100 = replace(a100, batch=replace(a100.batch, micro=1, global_size=None))
    full = estimate(spec, replace(a100, gradient_checkpointing=False)).activations
    assert 14 * GB < full < 17 * GB  # 24 x 522 MB encoder + 24 x 109 MB decoder layers + the head
    arch = act.arch_for(spec, shape_for(spec, True), True)
    assert (arch.block.attn, arch.block.ffn, arch.decoder_layers) == (4096, 16384, 24)
    longer = replace(spec, dataset=replace(spec.dataset, target_len=512))
    assert estimate(longer, replace(a100, gradient_checkpointing=False)).activations > full + GB


def test_lazy_mode_graph_holds_the_step():
    """HPU lazy mode: the first iteration's graph holds the step's activations and their
    gradients (2x), checkpointed or not; eager mode is the plain count."""
    spec = _workload("t5_3b_summarization.wl", "t5_3b_summarization")
    g2 = spec.target("gaudi2")
    lazy = estimate(spec, g2).activations
    assert lazy == estimate(spec, replace(g2, gradient_checkpointing=False)).activations
    plain = estimate(spec, replace(_eager(g2), gradient_checkpointing=False)).activations
    head = act.lm_head(128, 1, 32128, 4, loss=True)
    # eager adds backward's working set beside the kept activations; the lazy graph's 2x holds it
    arch = act.arch_for(spec, shape_for(spec, True), True)
    working = act.backward_working_set(1024, 128, 1, arch.block, 32128, 4)
    assert lazy - head == pytest.approx(2 * (plain - head - working))
    assert estimate(spec, _eager(g2)).fits and estimate(spec, _with(_eager(g2), 2)).fits


# SEEDS.md 55: "BLOOM/BLOOMZ 176B needs 352 GB in 16-bit: no single device holds it; DeepSpeed-inference
# model (tensor) parallelism over 8 devices"; 90-91: "memory decides what fits at all (... BLOOM-176B on one device)"
def test_seed_003_bloom_176b_fits_8_gaudi2_and_8_a100_not_8_gaudi1():
    spec = _workload("bloomz.wl", "bloomz_176b")
    for name in ("gaudi2", "gaudi2_example", "a100"):
        assert estimate(spec, spec.target(name)).fits, name
    g1 = estimate(spec, spec.target("gaudi1"))  # 8 x 32 GB = 256 GB < 352 GB
    assert not g1.fits and g1.weights > 32 * GB


def test_seed_003_bloom_176b_on_one_device_does_not_fit_any():
    spec = _workload("bloomz.wl", "bloomz_176b")
    for name in ("gaudi2", "a100"):
        t = spec.target(name)
        one = replace(t, devices=1, parallel=replace(t.parallel, tp=1))
        assert not estimate(spec, one).fits, name


# SEEDS.md 60-61: "BLOOMZ-7B on 8: Gaudi2 0.737, A100 2.417, Gaudi1 3.029; BLOOMZ-7B on 1: Gaudi2 1.066,
# A100 2.119, Gaudi1 2.865" -- it ran on one 32 GB Gaudi1
def test_seed_003_bloomz_7b_fits_one_device_of_each():
    spec = _workload("bloomz.wl", "bloomz_7b")
    for t in spec.targets:
        assert estimate(spec, t).fits, t.name


def test_generation_counts_the_kv_cache_and_the_prefill():
    spec = _workload("bloomz.wl", "bloomz_176b")
    fit = estimate(spec, spec.target("gaudi2"))
    # 2 x 70 layers x (16 prompt + 100 new tokens) x 14336 / 8 ranks x 2 bytes
    assert fit.kv_cache == pytest.approx(2 * 70 * 116 * 14336 / 8 * 2)
    # prefill: one layer's working set at 16 tokens and the prompt's logits (250880 entries each)
    assert 16 * 250880 * 2 < fit.activations < 64 * 10**6
    longer = replace(spec, dataset=replace(spec.dataset, prompt_tokens=2048))
    assert estimate(longer, spec.target("gaudi2")).activations > 10 * fit.activations


# SEEDS.md 16-18: "Stable Diffusion inference, batch 8, single device, bf16 on Gaudi, fp16 on A100 ...
# Gaudi1 3.25 s, A100 2.63 s, Gaudi2 0.925 s" -- batch 8 ran on one 32 GB Gaudi1
def test_seed_000_stable_diffusion_batch_8_fits_one_device_of_each():
    spec = _workload("stable_diffusion.wl", "stable_diffusion")
    for name in ("gaudi1", "gaudi2", "a100"):
        fit = estimate(spec, spec.target(name))
        assert fit.fits and fit.kv_cache == 0, name


def test_diffusion_activations_follow_the_unet():
    """Per image at 64x64 latents (512 px), SD 1.x: the 64x64 level's self-attention (8 heads x
    4096² scores and probabilities) dominates; classifier-free guidance doubles the UNet batch."""
    spec = _workload("stable_diffusion.wl", "stable_diffusion")
    g1 = spec.target("gaudi1")
    u = act.unet_for(spec, None, True)  # the catalog's SD 1.x widths, as the worker builds them
    assert u == act.UNet(64, (320, 640, 1280, 1280), (True, True, True, False), 2, 8, 77, (128, 256, 512, 512))
    skips, peak = act.unet_elements(u)
    assert peak == 5 * 320 * 4096 + 2 * 8 * 4096**2
    assert 6.5e6 < skips < 6.8e6  # 12 down-path outputs, 64² x 320 down to 8² x 1280
    fit = estimate(spec, g1)
    assert fit.activations == pytest.approx(2 * 16 * (skips + peak))  # bf16, 8 images x 2 (guidance)
    assert 8 * GB < fit.activations < 10 * GB  # not "16 MB for 8 images"
    no_cfg = replace(spec, task=replace(spec.task, guidance_scale=1.0))
    assert estimate(no_cfg, g1).activations == pytest.approx(fit.activations / 2)
    # the VAE decodes at 512² after the loop: 8 images x (2 x 256 + 128) x 512² elements in bf16
    assert act.vae_decode_elements(u) == (2 * 256 + 128) * 512**2
    # a larger batch still fits Gaudi2 (seed 000: "it can also support bigger batch sizes")
    assert estimate(spec, _with(spec.target("gaudi2"), 32)).fits


# SEEDS.md 31-32: "BERT 1.5B (48 layers, hidden 1600, 25 heads): effective batch 384 per accelerator =
# micro-batch 16 x gradient accumulation 24" on dl1.24xlarge (SEEDS.md 24: 8 Gaudi x 32 GB), ZeRO-1 (27)
def test_seed_001_bert_1_5b_zero1_fits_dl1_every_node_count():
    for wl in ("bert_1_5b_zero1_8n", "bert_1_5b_zero1_16n"):
        spec = _workload("bert_1_5b_zero1.wl", wl)
        for t in spec.targets:
            if t.device != "cpu":
                fit = estimate(spec, t)
                assert fit.fits and fit.capacity == 32 * GB, (wl, t.name)


# SEEDS.md 28-30: BERT-Large scaling baseline on 1, 2, 4, 8 dl1 nodes, ZeRO-1, BF16 (27)
def test_seed_001_bert_large_fits_dl1():
    spec = _workload("bert_large_scaling.wl", "bert_large_scaling")
    for t in spec.targets:
        assert estimate(spec, t).fits, t.name


# SEEDS.md 11-15: BERT pre-training, per-device batch 32 on Gaudi1 and Gaudi2, 64 on Gaudi2
def test_seed_000_bert_pretraining_batches_fit():
    bs32 = _workload("bert_large_pretrain.wl", "bert_large_phase1_bs32")
    for name in ("gaudi1", "gaudi2", "a100"):
        assert estimate(bs32, bs32.target(name)).fits, name
    bs64 = _workload("bert_large_pretrain.wl", "bert_large_phase1_bs64")
    assert estimate(bs64, bs64.target("gaudi2")).fits


# SEEDS.md 40-42: "ViT-Huge shape (embed 1280, depth 32, heads 16, ~632M params) ... bf16 autocast ...
# batch 64 per GPU (doubled on H100)" on p4d.24xlarge (A100 40 GB) and p5.48xlarge (H100 80 GB)
def test_seed_002_vit_huge_batch_64_fits_a100_40gb_and_128_fits_h100():
    spec = _workload("vit_fp8.wl", "vit_huge_fp8")
    for t in spec.targets:
        if t.device != "cpu":
            assert estimate(spec, t).fits, t.name
    assert estimate(spec, spec.target("p4d")).capacity == 40 * GB


# SEEDS.md 73: "timm VisionTransformer (default shape), random data, batch 16, Adam" on trn1 / inf2
def test_seed_004_vit_batch_16_fits_every_neuron_core():
    spec = _workload("vit_neuron.wl", "vit_neuron")
    for t in spec.targets:
        assert estimate(spec, t).fits, t.name


def test_the_catalogs_lazy_graph_devices_are_the_gaudis():
    from accelctl.catalog import DEVICES

    assert {n for n, d in DEVICES.items() if d.lazy_graphs} == {n for n, d in DEVICES.items() if d.adapter == "hpu"}
