"""Roofline with overlap: FLOPs, bytes and collectives of a step -> its time, what bounds it,
throughput, memory fit and cost.

Per device and phase: ``t = max(FLOPs / (peak x MFU), bytes / (HBM x efficiency))`` --
compute and memory traffic overlap inside the kernels, so the larger one is the phase's
time (the roofline).  Collectives add ``alpha + bytes / (link x efficiency)`` each; the
gradient reduction overlaps with the backward pass of the last micro-step (DDP buckets,
DeepSpeed ``overlap_comm``), so only what exceeds that window adds to the step.
Generation: the prefill (the prompt at once), then one decode step per new token that
reads every weight and the KV cache (bandwidth-bound at small batch) plus the host's
per-layer overhead (eager or graphs) and tensor-parallel all-reduces.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from accelctl.analysis import cost
from accelctl.estimate import elementwise as EW
from accelctl.models import flops as F
from accelctl.estimate import neuron
from accelctl.estimate import traffic as T
from accelctl.estimate import unet_elementwise as UE
from accelctl.estimate import work
from accelctl.estimate.factors import DEFAULT, Factors
from accelctl.families import FAMILIES as DEVICE_FAMILIES
from accelctl.plan import memory
from accelctl.models.activations import hpu_lazy
from accelctl.models import fp8_layers
from accelctl.catalog import DATASHEETS, DEFAULT_SCALE_OUT, DEVICES, SCALE_OUT, Datasheet, price_basis
from accelctl.workload.types import TargetSpec, WorkloadSpec
from accelctl.frozen import replace

#: dtype whose peak a precision computes at
PEAK_DTYPE = {"fp32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp8": "fp8"}


@dataclass
class Estimate:
    workload: str
    target: str
    device: str
    devices: int
    task: str
    #: "ok", or why nothing is estimated (no datasheet for the device...)
    status: str = "ok"
    unit: str = "samples/s"
    step_time_s: float | None = None
    latency_s: float | None = None
    throughput: float | None = None
    bound_by: str = ""
    why: str = ""
    flops_per_step: float = 0.0
    compute_s: float = 0.0
    memory_s: float = 0.0
    communication_s: float = 0.0
    exposed_communication_s: float = 0.0
    overhead_s: float = 0.0
    #: training: the eager element-wise kernels' memory time (in the memory bound, not in memory_s)
    elementwise_s: float = 0.0
    #: training: the optimizer step's memory time (part of memory_s), after the backward pass
    optimizer_s: float = 0.0
    #: training: transformer layers x passes (forward, backward, recompute) x micro-steps
    layer_passes: int = 0
    bytes_per_step: float = 0.0
    comm_bytes_per_step: float = 0.0
    memory_fit: str = ""
    fits: bool | None = None
    #: status "refused": plan's refusal of the target, ``{"code", "message"}`` (no figure is given)
    refusal: dict[str, str] = field(default_factory=dict)
    #: the parameter count and the memory per device by term (bytes) the fit was judged by
    params: float = 0.0
    memory_per_device: dict[str, float] = field(default_factory=dict)
    price_per_hour: float | None = None
    #: where the price comes from: written in the workload, the instance's list price (its
    #: source and date), or the smallest instance holding the devices ("" = no price)
    price_source: str = ""
    throughput_per_dollar: float | None = None
    train_steps: int | None = None
    projected_hours: float | None = None
    projected_cost_usd: float | None = None
    #: the job's samples (train_steps at the reference global batch: equal work on every target)
    work_samples: float | None = None
    work_basis: str = ""
    basis: str = "real"
    sources: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        return dict(self.__dict__)


def refused(spec: WorkloadSpec, target: TargetSpec, diagnostic, message: str) -> Estimate:
    """The estimate of a target ``plan`` refuses: no figure, plan's code and words (``diagnostic``,
    else ``message``)."""
    code = getattr(diagnostic, "code", "") or ""
    words = getattr(diagnostic, "message", "") or message
    said = getattr(diagnostic, "to_dict", lambda: {})()
    extra = {k: said[k] for k in ("hint", "fixes") if k in said}
    return Estimate(spec.name, target.name, target.device, target.world_size, spec.task.kind, status="refused",
                    refusal={"code": code, "message": words, **extra})


def _shape(spec: WorkloadSpec, target: TargetSpec) -> tuple[dict[str, Any], str]:
    """The architecture a run of ``target`` executes: the real one, except on the host CPU,
    which runs the stand-in."""
    m = spec.model
    if m.real_shape and not synchronous(target):
        from accelctl.models.catalog import real_architecture

        return real_architecture(m.family, m.real_shape), "real"
    return dict(m.stand_in), "stand-in (what the host CPU runs)" if synchronous(target) else "stand-in"


def _sizes(spec: WorkloadSpec, s: dict[str, Any]) -> F.Sizes:
    d, t = spec.dataset, spec.task
    prompt = d.prompt_tokens or (len(t.prompt.split()) + 1 if t.prompt else 16)
    return F.Sizes(seq=d.seq_len, target=d.target_len, prompt=prompt, new_tokens=t.max_new_tokens,
                   inference_steps=t.inference_steps or 50, guidance=t.guidance_scale > 1)


def _link_time(c: T.Collective, sheet: Datasheet, instance: str, fx: Factors, local: int) -> float:
    intra = c.intra_bytes / (sheet.link_bandwidth.value * fx.link.value)
    net = SCALE_OUT.get(instance, DEFAULT_SCALE_OUT).value
    # the devices of a node share its network: each node sends inter_bytes in all
    inter = c.inter_bytes / (net * fx.link.value)
    return c.count * fx.collective_latency_s.value + intra + inter


def price_source(target: TargetSpec) -> str:
    """Where ``target``'s price per hour comes from, in one line ("" = it has none)."""
    if target.price_per_hour is None:
        return ""
    return (price_basis(target.price_from, target.instance, target.devices, target.device)
            or "written in the workload")


def estimate(spec: WorkloadSpec, target: TargetSpec, fx: Factors = DEFAULT, explain: bool = True) -> Estimate:
    """The estimate of ``target``; ``explain`` False leaves out what only the why text and the
    memory line say (the memory breakdown's words, an FP8 step's gain over the same step in
    bf16, a second estimate): a sweep of thousands of points prints neither."""
    samples, basis = work.job_samples(spec)
    spec = spec.for_target(target)
    task = spec.task
    est = Estimate(spec.name, target.name, target.device, target.world_size, task.kind,
                   price_per_hour=target.price_per_hour, price_source=price_source(target),
                   train_steps=task.train_steps or None,
                   work_samples=samples, work_basis=basis)
    sheet = DATASHEETS.get(target.device)
    if sheet is None and target.device in DEVICES and DEVICES[target.device].host:
        from accelctl.estimate import host

        sheet = host.datasheet(target.options.threads or 1)
    dtype = PEAK_DTYPE.get(target.precision.dtype, "bf16")
    if sheet is None:
        est.status = f"no datasheet for device {target.device} (the host CPU: measure it with accelctl run)"
        return est
    # bf16 and fp16 run at the same rate on every catalogued device; fp32 never borrows them
    peak_fig = sheet.flops.get(dtype) or {"bf16": sheet.flops.get("fp16"), "fp16": sheet.flops.get("bf16")}.get(dtype)
    if peak_fig is None:
        est.status = f"the {target.device} datasheet gives no {dtype} peak"
        return est
    s, est.basis = _shape(spec, target)
    z = _sizes(spec, s)
    fam = spec.model.family
    fit = memory.estimate(spec, target, real=est.basis == "real")
    est.memory_fit, est.fits = fit.describe() if explain else "", fit.fits
    est.params, est.memory_per_device = fit.params, fit.terms()
    e = 4 if target.precision.dtype == "fp32" else 2
    peak = peak_fig.value * fx.mfu.value
    bw = sheet.memory_bandwidth.value * fx.bandwidth.value
    est.sources = {"peak": f"{peak_fig.value / 1e12:g} TFLOP/s {dtype}: {peak_fig.source} ({peak_fig.date})",
                   "memory_bandwidth": f"{sheet.memory_bandwidth.value / 1e9:g} GB/s: "
                                       f"{sheet.memory_bandwidth.source} ({sheet.memory_bandwidth.date})",
                   "link": f"{sheet.link_bandwidth.value / 1e9:g} GB/s: {sheet.link_bandwidth.source}",
                   "mfu": f"{fx.mfu.value:g}: {fx.mfu.source}",
                   "bandwidth_efficiency": f"{fx.bandwidth.value:g}: {fx.bandwidth.source}",
                   "layer_overhead": f"{fx.train_layer_overhead_s.value * 1e6:.3g} us per layer pass: "
                                     f"{fx.train_layer_overhead_s.source}"}
    if dtype == "fp8":
        # FP8 runs the converted linear layers only; the rest stays 16-bit (``fp8_layers``)
        half = sheet.flops.get("bf16") or peak_fig
        est.sources["peak"] += f"; {fp8_coverage(spec, s, z)[1]}: at {half.value / 1e12:g} TFLOP/s bf16"
    if task.kind == "generate":
        _generation(est, spec, target, s, z, fx, peak, bw, e, sheet)
    elif task.training:
        _training(est, spec, target, s, z, fx, peak, bw, fit, sheet)
    else:
        _inference(est, spec, target, s, z, fx, peak, bw, fit)
    if est.bytes_per_step:
        est.why += (f"; arithmetic intensity {est.flops_per_step / est.bytes_per_step:,.0f} FLOP/byte against the "
                    f"device's ridge point of {peak / bw:,.0f}")
    if dtype == "fp8" and task.training and est.why and explain:
        est.why += "; " + fp8_coverage(spec, s, z)[1] + _gain_over_bf16(spec, target, fx, est)
    est.why += neuron.missing_fact(target)
    _cost(est)
    return est


def fp8_coverage(spec: WorkloadSpec, s: dict[str, Any], z: F.Sizes) -> tuple[float, str]:
    """The share of a forward pass's FLOPs that FP8 runs (the linears ``fp8_layers`` converts;
    not the output head, linears whose dims are not multiples of 16, attention's products,
    convolutions) and a sentence saying so.  The same shape and sizes give the same answer:
    remembered (a sweep asks it three times a point for thousands of points)."""
    try:
        return _coverage(spec.model.family, tuple(sorted(s.items())), z)
    except TypeError:  # a shape value that cannot be a key (a list): counted afresh
        return _coverage.__wrapped__(spec.model.family, tuple(sorted(s.items())), z)


@functools.lru_cache(maxsize=256)
def _coverage(fam: str, shape: tuple, z: F.Sizes) -> tuple[float, str]:
    s = dict(shape)
    split = fp8_layers.split(fam, s, z.seq, z.target)
    total = F.forward(fam, s, z)
    share = min(1.0, split.fp8_flops() / total) if total else 0.0
    kept = ", ".join(x.name for x, _ in split.kept)
    experts = (f"; the experts alone are {split.experts.flops() / total:.1%} of the FLOPs, in bf16 (torchao's FP8 "
               "grouped GEMM for them is CUDA sm90+ and Triton only, not planned)"
               if split.experts is not None and total else "")
    return share, (f"FP8 covers {share:.1%} of the FLOPs ({split.modules()} linear layers; not FP8: "
                   f"{kept + ', ' if kept else ''}{split.not_linear}){experts}")


def _gain_over_bf16(spec: WorkloadSpec, target: TargetSpec, fx: Factors, fp8: Estimate) -> str:
    """"; bf16 -> fp8: x1.23 (bf16 268 ms)": the same target's estimate in bf16 against this one."""
    bf16 = estimate(spec, replace(target, precision=replace(target.precision, dtype="bf16",
                                                             fp8=None)), fx)
    if not (bf16.step_time_s and fp8.step_time_s):
        return ""
    return f"; bf16 -> fp8: x{bf16.step_time_s / fp8.step_time_s:.2f} (bf16 {bf16.step_time_s * 1e3:.3g} ms a step)"


def _bound(est: Estimate, compute: float, mem: float, comm: float, overhead: float = 0.0) -> None:
    parts = {"compute": compute, "memory bandwidth": mem, "communication": comm, "host overhead": overhead}
    est.bound_by = max(parts, key=parts.get)
    ms = ", ".join(f"{k} {v * 1e3:.3g} ms" for k, v in parts.items() if v)
    est.why = f"{est.bound_by} takes the longest per step ({ms})"


def _training(est, spec, target, s, z, fx, peak, bw, fit, sheet) -> None:
    fam, p = spec.model.family, target.parallel
    micro, accum = target.batch.micro, target.batch.accumulation
    passes = 4 if target.gradient_checkpointing else 3            # recompute = one more forward
    per_sample = F.forward(fam, s, z)
    flops = passes * per_sample * micro * accum / (p.tp * p.pp)
    est.flops_per_step = flops
    t_compute = flops / peak
    if target.precision.dtype == "fp8" and "bf16" in sheet.flops:
        share = fp8_coverage(spec, s, z)[0]
        t_compute = flops * share / peak + flops * (1 - share) / (sheet.flops["bf16"].value * fx.mfu.value)
    # memory traffic: weights read in forward and backward, activations written and read back,
    # gradients written per micro-step; the optimizer reads and writes weights, gradients and
    # its states once per step
    # (the memory fit doubles HPU lazy mode's first iteration; the steady steps move one copy)
    per_micro = 2 * fit.weights + 2 * fit.activations / (2 if hpu_lazy(target) else 1) + fit.gradients
    optimizer_step = 2 * (fit.weights + fit.gradients + fit.optimizer)
    est.bytes_per_step = per_micro * accum + optimizer_step
    t_mem = per_micro * accum / bw
    # the optimizer runs after the last backward pass, on its own: it adds to the step
    t_opt = optimizer_step / bw
    est.optimizer_s = t_opt
    t_elem = _elementwise_s(spec, target, s, z, bw) * micro * accum
    est.elementwise_s = t_elem
    t_core = max(t_compute, t_mem) + t_elem + t_opt   # separate kernels: they do not overlap the GEMMs
    # a pipeline's stages wait for each other: pp - 1 of the accumulation + pp - 1 slots idle
    # in every step, GPipe and 1F1B alike (Narayanan et al., 2021: bubble (p - 1) / m)
    t_bubble = (max(t_compute, t_mem) + t_elem) * (p.pp - 1) / accum if p.pp > 1 else 0.0
    t_core += t_bubble
    # DDP under torch.autocast keeps fp32 weights, so it all-reduces fp32 gradients; DeepSpeed's
    # bf16 / fp16 modes (ZeRO) keep 16-bit weights and reduce 16-bit gradients
    half = target.precision.dtype in ("bf16", "fp16", "fp8")
    e_grad = 2 if half and p.strategy != "ddp" else 4
    params = fit.weights / (4 if target.precision.dtype == "fp32" else 2)
    stage = p.zero_stage if p.strategy == "zero" else 0
    if stage >= 3:
        params *= target.data_parallel
    if p.strategy == "fsdp":
        # FSDP2 moves ZeRO-3's collectives (gathered for forward and again for backward), or
        # ZeRO-2's with the blocks kept gathered (reshard_after_forward = off); its weights of
        # this rank's tp part, unsharded, are those of the same layout without FSDP
        stage = 3 if p.reshard_after_forward else 2
        whole = memory.estimate(spec, replace(target, parallel=replace(p, strategy="tensor")),
                                real=fit.basis == "real")
        params = whole.weights / (4 if target.precision.dtype == "fp32" else 2)
    colls = T.gradient_sync(params * e_grad, target.devices, target.nodes, target.data_parallel, stage,
                            params * e_grad)
    tp_coll = T.tensor_parallel_per_token(p.tp, int(s.get("layers", 0)), int(s.get("hidden", 0)),
                                          micro * _tokens(fam, s, z), e_grad)
    if tp_coll is not None:  # forward and backward, every micro-step; on the critical path
        colls.append(replace(tp_coll, intra_bytes=2 * accum * tp_coll.intra_bytes,
                             count=2 * accum * tp_coll.count))
    # the host's time per layer pass (eager dispatch; a captured graph replays it cheaply)
    layer_passes = int(s.get("layers", 0) or 0) * passes * accum
    per_pass = fx.graph_layer_overhead_s if target.options.hpu_graphs else fx.train_layer_overhead_s
    t_host = layer_passes * per_pass.value
    window = (t_core - t_opt) / accum * fx.backward_share.value
    t_comm = exposed = 0.0
    overlap_budget = window
    for c in colls:
        t = _link_time(c, sheet, target.instance, fx, target.devices)
        t_comm += t
        hidden = min(t, overlap_budget) if c.overlaps else 0.0
        overlap_budget -= hidden
        exposed += t - hidden
        est.comm_bytes_per_step += c.intra_bytes + c.inter_bytes
    est.compute_s, est.communication_s, est.exposed_communication_s = t_compute, t_comm, exposed
    est.memory_s = t_mem + t_opt
    est.overhead_s, est.layer_passes = t_host, layer_passes
    if synchronous(target):   # the host CPU computes and dispatches in turn
        est.step_time_s = t_core + t_host + exposed
    else:                     # asynchronous launches: the host runs ahead of the device
        est.step_time_s = max(t_core, t_host) + exposed
    samples = micro * accum * target.data_parallel
    est.throughput = samples / est.step_time_s
    est.unit = "samples/s"
    _bound(est, t_compute, t_mem + t_elem + t_opt, exposed, t_host)
    if est.bound_by == "communication":
        est.why += f"; {t_comm * 1e3:.3g} ms of collectives, {window * 1e3:.3g} ms of backward to hide them in"
    if t_bubble:
        est.why += (f"; pipeline bubble {t_bubble * 1e3:.3g} ms ((pp - 1) / micro-batches = {p.pp - 1}/{accum} "
                    f"of the stage's work)")


def eager(target: TargetSpec) -> bool:
    """Every operator a kernel of its own (CUDA and the host CPU without torch.compile): not a
    family that compiles the whole step (``DeviceFamily.compiles_step``), nor Gaudi's lazy mode
    (the catalog's ``lazy_graphs``, ``hpu_lazy``)."""
    dev = DEVICES.get(target.device)
    return not (hpu_lazy(target) or (dev is not None and DEVICE_FAMILIES[dev.adapter].compiles_step))


def _elementwise_s(spec: WorkloadSpec, target: TargetSpec, s: dict[str, Any], z: F.Sizes, bw: float) -> float:
    """Time of one sample's element-wise traffic over a training step (``elementwise.py``)."""
    fam = spec.model.family
    if not eager(target) or fam not in F.TRANSFORMER_FAMILIES or "hidden" not in s:
        return 0.0
    h = int(s["hidden"])
    f = int(s.get("ffn") or float(s.get("mlp_ratio", 4.0)) * h)
    layers = int(s["layers"]) * (2 if fam == "t5" else 1)
    dtype = target.precision.dtype
    autocast = dtype in ("bf16", "fp16", "fp8") and target.parallel.strategy != "zero"
    e = 4 if dtype == "fp32" else 2
    e_res = 4 if (autocast or dtype == "fp32") else 2
    per_token = EW.forward_bytes_per_token(h, f, e, e_res, autocast, bool(target.options.te_layers))
    passes = EW.TRAINING_PASSES + (1 if target.gradient_checkpointing else 0)
    step = passes * per_token + (EW.fp8_cast_bytes_per_token(h, f) if dtype == "fp8" else 0.0)
    return step * layers * _tokens(fam, s, z) / (target.parallel.tp * target.parallel.pp) / bw


def synchronous(target: TargetSpec) -> bool:
    """The host CPU: its step is compute plus dispatch, not the larger of the two."""
    return target.device in DEVICES and DEVICES[target.device].host


def _tokens(family: str, s: dict[str, Any], z: F.Sizes) -> int:
    """Tokens one sample puts through the layers (what tensor-parallel all-reduces carry)."""
    if family == "vit":
        return F.vit_tokens(s)
    return z.seq + (z.target if family == "t5" else 0)


def _inference(est, spec, target, s, z, fx, peak, bw, fit) -> None:
    fam, b = spec.model.family, target.batch.micro
    flops = F.forward(fam, s, z) * b / (target.parallel.tp * target.parallel.pp)
    est.flops_per_step = flops
    steps = z.inference_steps * (2 if z.guidance else 1) if fam == "stable_diffusion" else 1
    est.bytes_per_step = steps * fit.weights + 2 * fit.activations
    t_compute, t_mem = flops / peak, est.bytes_per_step / bw
    # unfused attention (no flash / fused SDPA in these pipelines): the score matrices go
    # through memory in kernels of their own after the products, so their time adds
    score_bytes = 0.0
    if fam == "stable_diffusion":
        e = 4 if target.precision.dtype == "fp32" else 2
        score_bytes = F.SCORE_PASSES * e * F.diffusion_score_elements(s, z) * b / (target.parallel.tp * target.parallel.pp)
    eager_bytes = host_wait = 0.0
    launches = 0
    if fam == "stable_diffusion" and eager(target):
        eager_bytes, launches, host_wait = _diffusion_eager(target, s, z, fx, peak, bw, b)
    est.elementwise_s = (score_bytes + eager_bytes) / bw
    est.bytes_per_step += score_bytes + eager_bytes
    est.compute_s, est.memory_s = t_compute, t_mem
    est.overhead_s = host_wait
    est.latency_s = est.step_time_s = max(t_compute, t_mem) + est.elementwise_s + host_wait
    est.unit = "images/s" if fam in ("stable_diffusion", "vit") else "samples/s"
    est.throughput = b * target.data_parallel / est.latency_s
    _bound(est, t_compute, t_mem + est.elementwise_s, 0.0, host_wait)
    if score_bytes:
        est.why += (f"; unfused attention moves {memory.fmt_bytes(score_bytes)} of score matrices "
                    f"({F.SCORE_PASSES} passes) after the products")
    if launches:
        waits = "add" if synchronous(target) else "leave the device waiting"
        est.why += (f"; eager element-wise kernels move {memory.fmt_bytes(eager_bytes)} after the products, and "
                    f"{launches:,} launches at {fx.eager_op_overhead_s.value * 1e6:.3g} us {waits} "
                    f"{host_wait * 1e3:.3g} ms")
        est.sources["op_overhead"] = (f"{fx.eager_op_overhead_s.value * 1e6:.3g} us per eager operator: "
                                      f"{fx.eager_op_overhead_s.source}")


def _diffusion_eager(target, s, z, fx, peak, bw, b) -> tuple[float, int, float]:
    """Eager diffusers' element-wise bytes and launches over one call (``unet_elementwise.py``: the
    UNet per denoising step over ``b`` latents, ``2b`` under guidance, the VAE once), and the time the
    device waits for the host's launches.  ASSUMPTION: the launch queue starts empty at every
    denoising step (one host sync per step); CLIP's launches are not counted.
    """
    e = 4 if target.precision.dtype == "fp32" else 2
    split = target.parallel.tp * target.parallel.pp
    per_op = fx.eager_op_overhead_s.value
    total_bytes, launches, wait = 0.0, 0, 0.0
    for blocks, calls in ((UE.unet_blocks(s, b * (2 if z.guidance else 1), e), z.inference_steps),
                          (UE.vae_decoder_blocks(s, b, e), 1)):
        device = [(blk.flops / peak + (blk.elementwise_bytes + F.SCORE_PASSES * e * blk.score_elements) / bw) / split
                  for blk in blocks]
        _, ew_bytes, n = UE.totals(blocks)
        total_bytes += calls * ew_bytes / split
        launches += calls * n
        if synchronous(target):
            wait += calls * n * per_op
        else:
            wait += calls * max(0.0, UE.launch_bound_time(blocks, device, per_op) - sum(device))
    return total_bytes, launches, wait


def _generation(est, spec, target, s, z, fx, peak, bw, e, sheet) -> None:
    fam, p, b = spec.model.family, target.parallel, target.batch.micro
    pre, steps = F.generation(fam, s, z)
    split = p.tp * p.pp
    weight_bytes = F.decoder_matmul_params(fam, s) * e / split if fam != "t5" else 0.0
    if fam == "t5":
        weight_bytes = memory.estimate(spec, target).weights
    h, layers = int(s["hidden"]), int(s["layers"])
    kv_width = F.kv_width(fam, s)
    t_pre = max(pre * b / split / peak, weight_bytes / bw)
    t_compute = pre * b / split / peak
    t_mem = weight_bytes / bw
    per_layer = (fx.graph_layer_overhead_s if target.options.hpu_graphs else
                 fx.fused_layer_overhead_s if p.kernel_inject else fx.eager_layer_overhead_s)
    overhead_per_layer = per_layer.value
    est.sources["layer_overhead"] = f"{per_layer.value * 1e6:.3g} us per decoder layer and token: {per_layer.source}"
    tp_coll = T.tensor_parallel_per_token(p.tp, layers, h, b, e)
    t_tp_tok = _link_time(tp_coll, sheet, target.instance, fx, target.devices) if tp_coll else 0.0
    total = t_pre
    t_comm = t_overhead = 0.0
    for i, f_tok in enumerate(steps):
        kv = 2 * layers * b * (z.prompt + i) * kv_width * e / split
        c, m = f_tok * b / split / peak, (weight_bytes + kv) / bw
        t_compute += c
        t_mem += m
        t_comm += t_tp_tok
        t_overhead += overhead_per_layer * layers / p.pp
        total += max(c, m) + t_tp_tok + overhead_per_layer * layers / p.pp
        est.bytes_per_step += weight_bytes + kv
    est.flops_per_step = (pre + sum(steps)) * b / split
    est.comm_bytes_per_step = (tp_coll.intra_bytes if tp_coll else 0.0) * len(steps)
    est.compute_s, est.memory_s, est.communication_s, est.overhead_s = t_compute, t_mem, t_comm, t_overhead
    est.exposed_communication_s = t_comm
    est.latency_s = est.step_time_s = total
    est.unit = "tokens/s"
    est.throughput = b * len(steps) / total if total else None
    _bound(est, t_compute, t_mem, t_comm, t_overhead)
    est.why += (f"; each new token reads {memory.fmt_bytes(weight_bytes)} of weights per device"
                + (f", {2 * layers} tensor-parallel all-reduces" if tp_coll else ""))


def _cost(est: Estimate) -> None:
    est.throughput_per_dollar = cost.per_dollar(est.throughput, est.price_per_hour)
    if est.task in ("pretrain", "finetune"):  # equal work: the same samples on every target (work.py)
        est.projected_hours, est.projected_cost_usd = work.job(est.work_samples, est.throughput, est.price_per_hour)
