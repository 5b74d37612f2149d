"""``unet_elementwise``'s bytes and launches against the aten operators a real forward of
diffusers' UNet and VAE decoder dispatches: the workload's stand-in, built by the worker's own
builder and run on the CPU, and SD 1.x's own shape built on the meta device (shapes only, no
compute), at batch 2 (one image under classifier-free guidance) and 1.

A ``TorchDispatchMode`` sees every aten operator: views (``func.is_view``) and allocations
(``empty``) launch no kernel; convolutions and matrix products are ``flops.py``'s; the rest
are the element-wise kernels, whose bytes are the sizes of their tensor inputs and outputs.
The softmax over the attention scores is in ``flops.SCORE_PASSES`` (2 of its passes), so its
bytes are compared beside the count, not in it."""

from __future__ import annotations

import functools

import pytest

from accelctl.models import flops as F
from accelctl.estimate import unet_elementwise as UE
from accelctl.models.catalog import FAMILIES, KNOWN_MODELS

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")
models = pytest.importorskip("accelctl.worker.models")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

PRODUCTS = {"convolution", "mm", "addmm", "bmm", "baddbmm"}
NO_KERNEL = {"empty", "_unsafe_view", "detach", "lift_fresh"}


class _Kernels(TorchDispatchMode):
    """Counts the operators that launch a kernel and sums the element-wise ones' bytes."""

    def __init__(self):
        super().__init__()
        self.launches, self.bytes, self.softmax_bytes = 0, 0.0, 0.0
        self.products: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func._schema.name.split("::")[1]
        if func.is_view or name in NO_KERNEL:
            return out
        self.launches += 1
        if name in PRODUCTS:
            self.products[name] = self.products.get(name, 0) + 1
            return out
        size = sum(t.numel() * t.element_size() for t in tree_flatten((args, kwargs, out))[0]
                   if isinstance(t, torch.Tensor))
        if name == "_softmax":
            self.softmax_bytes += size
        else:
            self.bytes += size
        return out


@functools.lru_cache(maxsize=None)
def _built(case: str):
    """The UNet and VAE of ``case``, built once per session (forward passes do not change them)."""
    from diffusers.models.attention_processor import AttnProcessor

    s, device, dtype = CASES[case]
    with torch.device(device):
        parts = models._sd_from_shape(s)
    for m in (parts.unet, parts.vae):
        m.to(dtype).eval().set_attn_processor(AttnProcessor())   # unfused attention, as diffusers 0.x
    return parts


def _measure(fn) -> _Kernels:
    mode = _Kernels()
    with torch.no_grad(), mode:
        fn()
    return mode


CASES = {
    "stand-in on the CPU": (dict(FAMILIES["stable_diffusion"].shape), "cpu", torch.float32),
    "SD 1.x on meta": (dict(KNOWN_MODELS["CompVis/stable-diffusion-v1-4"].shape), "meta", torch.float16),
}


@pytest.mark.parametrize("batch", [2, 1])
@pytest.mark.parametrize("case", list(CASES))
def test_unet_pass_bytes_and_launches_match_the_dispatched_operators(case, batch):
    s, device, dtype = CASES[case]
    e = torch.tensor([], dtype=dtype).element_size()
    unet = _built(case).unet
    r = int(s["image_size"]) // 8
    with torch.device(device):
        x = torch.randn(batch, 4, r, r, dtype=dtype)
        ctx = torch.randn(batch, UE.CONTEXT_TOKENS, int(s["text_hidden"]), dtype=dtype)
    measured = _measure(lambda: unet(x, torch.tensor(10), encoder_hidden_states=ctx))
    blocks = UE.unet_blocks(s, batch, e)
    flops, ew_bytes, launches = UE.totals(blocks)
    scores = sum(b.score_elements for b in blocks)
    assert ew_bytes == pytest.approx(measured.bytes, rel=0.05), (case, ew_bytes, measured.bytes)
    assert 2 * e * scores == pytest.approx(measured.softmax_bytes, rel=0.01)
    assert launches == pytest.approx(measured.launches, abs=3), (case, launches, measured.launches)
    assert scores == pytest.approx(batch * F.unet_score_elements(s), rel=1e-9)
    assert flops == pytest.approx(batch * F.unet(s), rel=1e-9)


@pytest.mark.parametrize("case", list(CASES))
def test_vae_decoder_bytes_and_launches_match_the_dispatched_operators(case):
    s, device, dtype = CASES[case]
    e = torch.tensor([], dtype=dtype).element_size()
    vae = _built(case).vae
    side = int(s["image_size"]) // 8
    with torch.device(device):
        z = torch.randn(1, 4, side, side, dtype=dtype)
    measured = _measure(lambda: vae.decode(z))
    blocks = UE.vae_decoder_blocks(s, 1, e)
    flops, ew_bytes, launches = UE.totals(blocks)
    scores = sum(b.score_elements for b in blocks)
    # the fp32 softmax's own 2 passes are 2 x 4 bytes: 2e in the score passes, the rest counted
    assert ew_bytes - 2 * (4 - e) * scores == pytest.approx(measured.bytes, rel=0.05), (case, ew_bytes, measured.bytes)
    assert 8 * scores == pytest.approx(measured.softmax_bytes, rel=0.01)
    assert launches == pytest.approx(measured.launches, abs=3), (case, launches, measured.launches)
    assert flops == pytest.approx(F.vae_decode(s), rel=1e-9)


def test_launch_queue_waits_for_the_host_only_on_small_kernels():
    """A kernel longer than the launch interval hides the host; a run of short ones does not."""
    big = UE.Block("big", 0, 0, 0, 1)
    small = UE.Block("small", 0, 0, 0, 100)
    assert UE.launch_bound_time([big], [1.0], 1e-5) == pytest.approx(1.0 + 1e-5)
    # 100 launches at 10 us, 1 us of work each: the host's 1 ms, plus the last kernel
    assert UE.launch_bound_time([small], [1e-4], 1e-5) == pytest.approx(1e-3 + 1e-6)
    # the big kernel first lets the host issue the small ones while it runs: no wait after it
    assert UE.launch_bound_time([big, small], [1.0, 1e-4], 1e-5) == pytest.approx(1.0 + 1e-5 + 1e-4)
