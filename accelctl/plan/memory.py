"""Memory-fit estimate per device, before any money is spent.

Bytes per parameter Ψ per device: weights (2Ψ in 16-bit, 4Ψ in fp32), gradients, optimizer state
(mixed-precision Adam 12Ψ: ZeRO's "16Ψ in all", Rajbhandari et al., 2020), divided by ZeRO stage,
offload, FSDP, tensor × pipeline parallelism; activations and KV cache
(``accelctl.models.activations``); the host CPU's synthetic image pool (``data_pool``); and a fixed
runtime reserve.  docs/language.md ("Memory fit") states the model, its assumptions and sources, and the seeds' fit / no-fit
facts it agrees with (tests/plan/test_memory.py).
"""

from __future__ import annotations

from accelctl.contract.job import DebugJob
from accelctl.frozen import Value
from accelctl.models import activations as act
from accelctl.models import param_count as P
from accelctl.catalog import DEVICES
from accelctl.workload.types import TargetSpec, WorkloadSpec

RESERVE_BYTES = 2 * 10**9
GB = 1e9


class Shape(Value):
    params: float
    layers: int
    hidden: int
    heads: int
    seq_len: int
    vocab: int


class MemoryFit(Value):
    weights: float
    gradients: float
    optimizer: float
    activations: float
    kv_cache: float
    reserve: float
    capacity: float
    #: the model shape the estimate used ("real" or "stand-in")
    basis: str
    #: why the activations are what they are, when it is not the plain layer count
    activations_note: str = ""
    #: the host CPU's synthetic data pool (``data_pool``)
    data: float = 0.0
    #: the parameter count of the model shape it used (``basis``)
    params: float = 0.0
    #: the capacity is the host's memory as it is now (``terms`` gives 0: it changes by the minute)
    host: bool = False

    @property
    def total(self) -> float:
        return (self.weights + self.gradients + self.optimizer + self.activations + self.kv_cache + self.reserve
                + self.data)

    @property
    def fits(self) -> bool:
        return self.capacity <= 0 or self.total <= self.capacity

    def terms(self) -> dict[str, float]:
        """Bytes per device by term, their total and the device's capacity (0: the host's memory,
        which a plan must not hold: the same plan on another minute would differ)."""
        terms = {"weights": self.weights, "gradients": self.gradients, "optimizer": self.optimizer,
                 "activations": self.activations, "kv_cache": self.kv_cache, "reserve": self.reserve,
                 "data": self.data, "total": self.total, "capacity": 0.0 if self.host else self.capacity}
        return {k: float(v) for k, v in terms.items()}

    def describe(self) -> str:
        parts = [("weights", self.weights), ("gradients", self.gradients), ("optimizer", self.optimizer),
                 ("activations", self.activations), ("kv cache", self.kv_cache), ("reserve", self.reserve),
                 ("data", self.data)]
        body = " + ".join(f"{n} {fmt_bytes(v)}" + (f" ({self.activations_note})" if n == "activations"
                                                    and self.activations_note else "") for n, v in parts if v)
        cap = fmt_bytes(self.capacity) if self.capacity > 0 else "host memory"
        verdict = "fits" if self.fits else "DOES NOT FIT"
        return f"memory per device ({self.basis} model): {body} = {fmt_bytes(self.total)} of {cap}: {verdict}"


def fmt_bytes(n: float) -> str:
    """Decimal units, as vendors quote device memory (96 GB)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"


def fmt_params(n: float) -> str:
    """A parameter count as model cards say it: 7.07 B, 125.08 M, 54,342."""
    for unit, scale in (("B", 1e9), ("M", 1e6)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:,.0f}"


#: families whose LM head is the input embedding (one vocab × hidden matrix, not two)
TIED_HEAD = ("gpt2", "bert", "bloom", "t5")

#: vocabulary of the usual tokenizer of each family, for shapes that do not say
TYPICAL_VOCAB = {"bert": 30522, "gpt2": 50257, "bloom": 250880, "t5": 32128, "llama": 32000, "vit": 0,
                 "stable_diffusion": 49408, "mistral": 32000, "mixtral": 32000, "qwen2": 152064, "gemma": 256000,
                 "gpt_neox": 50432, "falcon": 65024}


def params_of(family: str, layers: int, hidden: int, ffn: int, vocab: int, extra: dict) -> float:
    """Parameter count of a model of this shape: exactly as its class builds it for the
    families of ``accelctl.models.param_count`` (every expert of a mixture), else a transformer's
    attention 4h², MLP 2·h·ffn and embeddings."""
    if family in P.EXACT:
        return float(P.total(family, {**extra, "layers": layers, "hidden": hidden, "vocab": vocab}))
    ffn = ffn or 4 * hidden
    per_layer = 4 * hidden * hidden + 2 * hidden * ffn
    if family == "t5":
        # encoder layers + decoder layers (decoder adds cross-attention)
        return layers * per_layer + layers * (per_layer + 4 * hidden * hidden) + vocab * hidden
    if family == "vit":
        patch = int(extra.get("patch", 16))
        return layers * per_layer + 3 * patch * patch * hidden + hidden * int(extra.get("classes", 1000))
    return layers * per_layer + vocab * hidden


def shape_for(spec: WorkloadSpec, real: bool) -> Shape:
    m = spec.model
    src = m.real_shape if (real and m.real_shape) else m.stand_in
    layers, hidden = int(src.get("layers", 2)), int(src.get("hidden", 64))
    heads = int(src.get("heads", 1))
    vocab = int(src.get("vocab", TYPICAL_VOCAB.get(m.family, 0)))
    if m.family == "vit":
        img = int(src.get("image_size", spec.dataset.image_size))
        patch = int(src.get("patch", 16))
        seq = (img // patch) ** 2 + 1
    else:
        seq = spec.dataset.seq_len
        if spec.task.kind == "generate":
            seq = 16 + spec.task.max_new_tokens
    published = m.params if (real and m.real_shape) else 0.0
    params = float(published or params_of(m.family, layers, hidden, int(src.get("ffn", 0)), vocab, src))
    return Shape(params, layers, hidden, heads, seq, vocab)


def estimate(spec: WorkloadSpec, target: TargetSpec, real: bool | None = None) -> MemoryFit:
    """Estimate per-device memory of ``spec`` on ``target``.

    ``real`` picks the real model's shape (default: for every target but the host CPU,
    which runs the stand-in).
    """
    host = DEVICES[target.device].host
    if real is None:
        real = not host and bool(spec.model.real_shape)
    sh = shape_for(spec, real)
    p = target.parallel
    dtype = target.precision.dtype
    wbytes = 4 if dtype == "fp32" else 2
    split = p.tp * p.pp
    dp = target.data_parallel
    psi = sh.params / split
    if p.strategy in ("fsdp", "tensor") and p.tp > 1 and not DEVICES[target.device].nxd_tensor_parallel:
        # their TP plans split the blocks only: embeddings and head stay whole on every tp rank
        # (neuronx-distributed's split them too: vocabulary-parallel embeddings and LM head)
        whole = min(sh.vocab * sh.hidden * (1 if spec.model.family in TIED_HEAD else 2), sh.params)
        psi = (sh.params - whole) / split + whole / p.pp
    weights = psi * wbytes
    grads = optim = 0.0
    kv = 0.0
    note = ""
    arch = act.arch_for(spec, sh, real)
    if spec.task.training:
        grads = psi * wbytes
        name = spec.optimizer.name
        if name in ("adam", "adamw", "lamb"):
            optim = psi * (8 + (4 if wbytes == 2 else 0))
        elif spec.optimizer.momentum > 0:
            optim = psi * (4 + (4 if wbytes == 2 else 0))
        else:
            optim = psi * (4 if wbytes == 2 else 0)
        stage = p.zero_stage if p.strategy == "zero" else 0
        if stage >= 1:
            optim /= dp
        if stage >= 2:
            grads /= dp
        if stage >= 3:
            weights /= dp
        if p.offload_optimizer != "none":
            optim = 0.0
        if p.offload_param != "none":
            weights = 0.0
        if p.strategy == "fsdp":
            weights, grads, optim = fsdp_states(weights, grads, optim, dp, sh, p)
        acts = act.training(spec, target, sh, arch, wbytes, real) * in_flight(p, target.batch.accumulation)
        if act.hpu_lazy(target):
            note = "2x: HPU lazy mode's first-iteration graph"
    elif spec.model.family == "stable_diffusion":
        acts = act.diffusion(spec, target, sh, real, wbytes)
    elif spec.task.kind == "generate":
        acts, kv = act.generation(spec, target, sh, arch, wbytes)
    else:
        acts = act.inference(spec, target, sh, arch, wbytes)
    reserve = 0 if host else RESERVE_BYTES
    capacity = float(target.memory_bytes or host_memory_bytes())
    data = data_pool(spec, target) if host and spec.task.training else 0.0
    return MemoryFit(weights, grads, optim, acts, kv, reserve, capacity, "real" if real else "stand-in", note, data,
                     sh.params, host)


def data_pool(spec: WorkloadSpec, target: TargetSpec) -> float:
    """Synthetic images the worker makes before the first step and cycles through
    (``worker.data._synthetic_images``: ``DebugJob.synthetic_pool`` batches of ``micro`` fp32
    images and int64 labels); on an accelerator they stay in host memory, outside the device's.
    Synthetic tokens (a pool of int64 ids) are left out: 8 bytes a token, under a percent of a
    layer's activations."""
    d = spec.dataset
    if spec.model.family != "vit" or d.kind != "synthetic":
        return 0.0
    src = spec.model.stand_in or spec.model.real_shape
    size = int(src.get("image_size", d.image_size))
    return float(DebugJob().synthetic_pool * target.batch.micro * (4 * d.channels * size * size + 8))


def fsdp_states(weights: float, grads: float, optim: float, dp: int, sh: Shape, p) -> tuple[float, float, float]:
    """FSDP2 per device: gradients and optimizer state 1/dp; weights 1/dp plus the one block
    gathered whole while it runs (``reshard_after_forward``), or every block gathered from its
    forward to its backward (off: ZeRO-2's memory); ``offload = cpu`` keeps shards, gradients and
    the optimizer state on the host (only the gathered block stays on the device)."""
    block = weights / max(sh.layers, 1)  # one block's weights (of this rank's tp/pp part)
    gathered = block if p.reshard_after_forward else weights
    if p.offload != "none":
        return gathered, 0.0, 0.0
    return weights / dp + gathered * (dp - 1) / dp, grads / dp, optim / dp


def in_flight(p, accumulation: int) -> int:
    """Micro-batches whose activations a pipeline's first stage holds at once: GPipe runs
    every forward before any backward (all ``accumulation`` of them), 1F1B at most pp."""
    if p.pp <= 1 or p.strategy != "pipeline":  # ZeRO's pp is DeepSpeed's own engine
        return 1
    return accumulation if p.schedule == "gpipe" else min(p.pp, accumulation)


def host_memory_bytes() -> int:
    """The memory available on the machine the plan is compiled for (``hostfacts.current()``)."""
    from accelctl.contract import hostfacts

    return hostfacts.current().memory_bytes
