"""The FLOP count of ``accelctl.models.flops`` against PyTorch's own FlopCounterMode, on the
stand-in of every family, built by the worker's own builder (forward + backward for training,
one forward for diffusion's parts).  FlopCounterMode counts matrix products and
convolutions; so does the estimate.  Tolerance: 10% (15% for Stable Diffusion, whose
group norms, time embeddings and up/down-sampling the count approximates)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from accelctl.models import flops
from accelctl.models.catalog import FAMILIES

torch = pytest.importorskip("torch")
flop_counter = pytest.importorskip("torch.utils.flop_counter")
models = pytest.importorskip("accelctl.worker.models")

BATCH = 2


def _count(fn) -> float:
    mode = flop_counter.FlopCounterMode(display=False)
    with mode:
        fn()
    return float(mode.get_total_flops())


def _shape(family: str) -> dict:
    return dict(FAMILIES[family].shape)


NEW_DECODERS = ["mistral", "qwen2", "gemma", "mixtral", "gpt_neox", "falcon"]


def _lm(family: str, s: dict):
    """The worker's model of ``family``; a mixture's experts run one matmul per expert over the
    tokens routed to it (transformers' "eager" experts): FlopCounterMode does not count the
    default ``torch._grouped_mm`` (37 M of the 88 M FLOPs it sees eagerly on the stand-in)."""
    import transformers

    cfg = models._hf_config(family, s)
    if family == "mixtral":
        cfg._experts_implementation = "eager"
    return getattr(transformers, models.HF_CLASSES[family][2])(cfg)


@pytest.mark.parametrize("family", ["gpt2", "bloom", "llama", "bert", *NEW_DECODERS])
def test_lm_training_step(family):
    s = _shape(family)
    seq = 32
    torch.manual_seed(0)
    model = _lm(family, s)
    ids = torch.randint(4, s["vocab"], (BATCH, seq))

    def step():
        model(input_ids=ids, labels=ids).loss.backward()

    measured = _count(step)
    expected = 3 * BATCH * flops.forward(family, s, flops.Sizes(seq=seq))
    assert expected == pytest.approx(measured, rel=0.10), (family, expected, measured)


def test_t5_training_step():
    s = _shape("t5")
    src, tgt = 48, 16
    import transformers

    model = transformers.T5ForConditionalGeneration(models._hf_config("t5", s))
    x = torch.randint(4, s["vocab"], (BATCH, src))
    y = torch.randint(4, s["vocab"], (BATCH, tgt))
    measured = _count(lambda: model(input_ids=x, labels=y).loss.backward())
    expected = 3 * BATCH * flops.forward("t5", s, flops.Sizes(seq=src, target=tgt))
    assert expected == pytest.approx(measured, rel=0.10), (expected, measured)


def test_vit_training_step():
    s = _shape("vit")
    job = SimpleNamespace(precision=SimpleNamespace(dtype="fp32"))
    model = models._timm_vit(job, s)
    x = torch.randn(BATCH, 3, s["image_size"], s["image_size"])
    measured = _count(lambda: model(x).sum().backward())
    expected = 3 * BATCH * flops.forward("vit", s, flops.Sizes())
    # the input image needs no gradient: the patch convolution's backward computes only the
    # weight's gradient (1 product, not 2)
    expected -= BATCH * 2 * (flops.vit_tokens(s) - 1) * 3 * s["patch"] ** 2 * s["hidden"]
    assert expected == pytest.approx(measured, rel=0.10), (expected, measured)


def test_stable_diffusion_parts():
    pytest.importorskip("diffusers")
    s = _shape("stable_diffusion")
    parts = models._sd_from_shape(s)
    r = s["image_size"] // 8
    latents = torch.randn(1, 4, r, r)
    ctx = torch.randn(1, 77, s["text_hidden"])
    with torch.no_grad():
        unet = _count(lambda: parts.unet(latents, 10, encoder_hidden_states=ctx))
        vae = _count(lambda: parts.vae.decode(latents))
        text = _count(lambda: parts.text_encoder(torch.randint(4, s["vocab"], (1, 77))))
    assert flops.unet(s) == pytest.approx(unet, rel=0.15), (flops.unet(s), unet)
    assert flops.vae_decode(s) == pytest.approx(vae, rel=0.15), (flops.vae_decode(s), vae)
    # CLIP's attention runs through a fused kernel FlopCounterMode does not register on this
    # CPU (it lists only aten.addmm): compare without the Q·Kᵀ / A·V term, counted apart
    scores = s["text_layers"] * 4 * 77 * 77 * s["text_hidden"]
    assert flops.clip_text(s) - scores == pytest.approx(text, rel=0.15), (flops.clip_text(s), text)


@pytest.mark.parametrize("family", ["gpt2", "bloom", "llama", *NEW_DECODERS])
def test_generation_prefill_and_decode_step(family):
    """The prefill (logits of the last position only, as generate() asks) and one decode
    step that attends to the cached prompt."""
    s = _shape(family)
    model = _lm(family, s).eval()
    prompt = 12
    ids = torch.randint(4, s["vocab"], (1, prompt))
    cache = {}

    def prefill():
        cache["out"] = model(input_ids=ids, use_cache=True, logits_to_keep=1)

    with torch.no_grad():
        measured_prefill = _count(prefill)
        measured_step = _count(lambda: model(input_ids=ids[:, :1], past_key_values=cache["out"].past_key_values,
                                             use_cache=True))
    pre, steps = flops.generation(family, s, flops.Sizes(prompt=prompt, new_tokens=1))
    assert pre == pytest.approx(measured_prefill, rel=0.10)
    assert steps[0] == pytest.approx(measured_step, rel=0.10)


def test_llama_grouped_query_attention():
    """llama's ``kv`` is its number of key/value heads: narrower K and V projections."""
    s = {**_shape("llama"), "kv": 2}
    import transformers

    model = transformers.LlamaForCausalLM(models._hf_config("llama", s))
    ids = torch.randint(4, s["vocab"], (BATCH, 32))
    measured = _count(lambda: model(input_ids=ids, labels=ids).loss.backward())
    expected = 3 * BATCH * flops.forward("llama", s, flops.Sizes(seq=32))
    assert expected == pytest.approx(measured, rel=0.10), (expected, measured)
    assert flops.kv_width("llama", s) == 2 * s["hidden"] // s["heads"]


def test_unet_attention_score_elements_of_sd_v1():
    """SD v1's UNet at 512 px: 16 transformer blocks with 8 heads, self-attention over the
    latent's pixels plus cross-attention to 77 tokens: 5 blocks each at 64x64, 32x32 and 16x16
    latents (2 down, 3 up) and the mid block at 8x8."""
    from accelctl.models import flops as F
    from accelctl.models.catalog import KNOWN_MODELS

    s = KNOWN_MODELS["CompVis/stable-diffusion-v1-4"].shape
    by_hand = 8 * (5 * 4096 * (4096 + 77) + 5 * 1024 * (1024 + 77) + 5 * 256 * (256 + 77) + 64 * (64 + 77))
    assert F.unet_score_elements(s) == by_hand
    assert F.vae_score_elements(s) == 4096 ** 2
    z = F.Sizes(seq=77, target=0, prompt=0, new_tokens=0, inference_steps=50, guidance=True)
    assert F.diffusion_score_elements(s, z) == 100 * by_hand + 4096 ** 2
