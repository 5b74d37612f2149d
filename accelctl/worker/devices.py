"""Device adapters: the few places where a loop differs between CPU, CUDA, Gaudi and XLA.

The planner resolves a target's device family into the job (``WorkerJob.device``: the
adapter name, its collective backend and the device options), so the worker never maps
device kinds itself.  Each adapter imports its stack only when selected: CPU and CUDA run
here, HPU and XLA are written against Habana's and torch-xla's documented APIs and fail
with a clear message when absent.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time

import torch

from accelctl.families import FAMILIES
from accelctl.contract.job import DeviceJob

def lamb(params, opt) -> torch.optim.Optimizer:
    """timm's ``Lamb`` (timm.optim.Lamb: plain torch ops, so it runs on every device the loop
    does).  Its own global gradient-norm clip (``max_grad_norm``, 1.0 by default) is off: the
    loop clips as the workload's ``grad_clip`` says, as it does for the other optimizers."""
    from timm.optim import Lamb

    return Lamb(params, lr=opt.lr, weight_decay=opt.weight_decay, max_grad_norm=None)


class CpuAdapter:
    """The default: eager PyTorch on the host; gloo for collectives."""

    name = "cpu"
    #: gradients are averaged by a DDP wrapper (XLA does it in ``optimizer_step`` instead)
    wrap_ddp = True
    autocast_type = "cpu"

    def __init__(self, local_rank: int, device: DeviceJob) -> None:
        self.local_rank = local_rank
        self.settings = device
        #: the family's torch.distributed backend (gloo, nccl, hccl, xla), from the job
        self.dist_backend = device.comm
        self.device = self._device()

    def _device(self) -> torch.device:
        return torch.device("cpu")

    def device_name(self) -> str:
        from accelctl.hostinfo import cpu_model

        return cpu_model()

    def sync(self) -> None:
        """Wait for queued device work, so ``perf_counter`` brackets what really ran."""

    def mark_step(self) -> None:
        """Cut the lazily recorded graph (HPU lazy mode, XLA); a no-op in eager mode."""

    def optimizer_step(self, optimizer) -> None:
        optimizer.step()

    def make_optimizer(self, opt, params) -> torch.optim.Optimizer:
        """The job's optimizer (``OptimizerSpec``) over the trainable parameters."""
        params = [p for p in params if p.requires_grad]
        fused = self.fused_adam(params)
        if opt.name == "adamw":
            return torch.optim.AdamW(params, lr=opt.lr, weight_decay=opt.weight_decay, fused=fused)
        if opt.name == "adam":
            return torch.optim.Adam(params, lr=opt.lr, weight_decay=opt.weight_decay, fused=fused)
        if opt.name == "sgd":
            return torch.optim.SGD(params, lr=opt.lr, momentum=opt.momentum, weight_decay=opt.weight_decay)
        if opt.name == "lamb":
            return lamb(params, opt)
        raise ValueError(f"unknown optimizer {opt.name!r} (adamw, adam, sgd, lamb)")

    @staticmethod
    def fused_adam(params) -> bool | None:
        """Adam/AdamW as torch's fused kernel where every parameter is a CPU tensor: one pass per
        parameter instead of ~10 ops (torch's CPU default is the for-loop; figures in docs/bench.md);
        the loss curve is equal to float rounding, not bitwise.  None elsewhere (torch's own choice)
        and where DTensors and plain tensors mix: the fused kernel takes one kind per call.
        """
        kinds = {hasattr(p, "placements") for p in params}
        return True if params and len(kinds) == 1 and all(p.device.type == "cpu" for p in params) else None

    def clip_grad_norm(self, params, max_norm: float) -> None:
        torch.nn.utils.clip_grad_norm_(params, max_norm)

    def prepare_training(self, model):
        """The model on the device for training (HPU: graph caching when asked)."""
        return model

    def init_process_group(self) -> None:
        """Join the job's process group (env:// rendezvous set up by the launcher)."""
        torch.distributed.init_process_group(self.dist_backend)

    def compile_stats(self) -> dict:
        """Graph compilation so far (count, seconds), reported apart from step time: torch.compile's
        (``optimize { compile = on }``), else none."""
        from accelctl.worker import optimize

        return optimize.compile_stats()

    def wrap_batches(self, batches, job):
        """Feed batches to the device: as they come, or through ``dataloader_workers`` host
        processes (a torch DataLoader, in the loop's order) where the target asks for them."""
        workers = job.device.dataloader_workers
        if workers <= 0:
            return batches
        from accelctl.worker.data import Batches
        from accelctl.worker.xla_extras import host_loader

        pin = job.device.pin_memory and "pin_memory" in FAMILIES[self.name].options  # a family that takes it
        loader = host_loader(batches, workers, pin_memory=pin)
        return Batches(iter(loader), batches.samples, batches.tokens_per_sample,
                       f"{batches.source} ({workers} loader workers{', pinned memory' if pin else ''})")

    def autocast(self, dtype: torch.dtype | None):
        if dtype is None or dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.autocast_type, dtype=dtype)

    def reset_peak_memory(self) -> None:
        pass

    def memory_bytes(self) -> int | None:
        """Resident set size of this process (CPU: weights, activations and allocator slack); from
        /proc, as the worker also runs in environments without psutil (the XLA one)."""
        try:
            with open("/proc/self/statm") as fh:
                return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return None

    def prepare_inference(self, model):
        return model

    def random_init_device(self) -> torch.device | None:
        """Where a model with random weights is made (``models.build``): None = on the host, then
        moved; an adapter whose device initialises faster than the host names it."""
        return None

    def peak_flops(self, dtype: torch.dtype) -> float:
        """Measured matmul ceiling.  On CPU always fp32: bf16/fp16 are emulated on CPUs without
        AVX512-BF16/AMX, so MFU against the fp32 ceiling shows what the emulation costs."""
        return measure_matmul_flops(self, torch.float32, n=1024, budget_s=0.2)


class CudaAdapter(CpuAdapter):
    name = "cuda"
    autocast_type = "cuda"

    def _device(self) -> torch.device:
        if not torch.cuda.is_available():
            raise RuntimeError("device adapter 'cuda' selected but torch.cuda.is_available() is False")
        torch.cuda.set_device(self.local_rank)
        return torch.device("cuda", self.local_rank)

    def device_name(self) -> str:
        return torch.cuda.get_device_name(self.device)

    def sync(self) -> None:
        torch.cuda.synchronize(self.device)

    def reset_peak_memory(self) -> None:
        torch.cuda.reset_peak_memory_stats(self.device)

    def memory_bytes(self) -> int | None:
        return int(torch.cuda.max_memory_allocated(self.device))

    def random_init_device(self) -> torch.device | None:
        return self.device  # a large random model initialises far faster on the GPU than on the host

    def peak_flops(self, dtype: torch.dtype) -> float:
        # measured in the compute dtype, on matrices big enough to fill the device
        return measure_matmul_flops(self, dtype, n=8192, budget_s=0.5)


class HpuAdapter(CpuAdapter):
    """Intel Gaudi through SynapseAI's PyTorch bridge (lazy mode by default)."""

    name = "hpu"
    autocast_type = "hpu"

    def _device(self) -> torch.device:
        try:
            import habana_frameworks.torch.core as htcore
        except ImportError as exc:
            raise RuntimeError("device adapter 'hpu' needs Habana's SynapseAI PyTorch bridge "
                               "(habana_frameworks.torch); it is not installed here") from exc
        if torch.distributed.is_available() and int(os.environ.get("WORLD_SIZE", "1")) > 1:
            import habana_frameworks.torch.distributed.hccl  # noqa: F401  registers the hccl backend
        self.htcore = htcore
        self.lazy = self.settings.lazy_mode
        return torch.device("hpu")

    def device_name(self) -> str:
        return torch.hpu.get_device_name()

    def sync(self) -> None:
        torch.hpu.synchronize()

    def mark_step(self) -> None:
        if self.lazy:
            self.htcore.mark_step()

    def reset_peak_memory(self) -> None:
        torch.hpu.reset_peak_memory_stats()

    def memory_bytes(self) -> int | None:
        return int(torch.hpu.max_memory_allocated())

    def prepare_inference(self, model):
        if self.settings.hpu_graphs:
            from habana_frameworks.torch.hpu import wrap_in_hpu_graph

            return wrap_in_hpu_graph(model)
        return model

    def prepare_training(self, model):
        from accelctl.worker import hpu_extras

        return hpu_extras.cache_training_graphs(model) if self.settings.hpu_graphs else model

    def make_optimizer(self, opt, params) -> torch.optim.Optimizer:
        """Habana's FusedAdamW where the plan's GaudiConfig asks for it (``use_fused_adam``)."""
        from accelctl.worker import hpu_extras

        params = [p for p in params if p.requires_grad]
        return hpu_extras.fused_adamw(params, opt, hpu_extras.gaudi_config()) or super().make_optimizer(opt, params)

    def clip_grad_norm(self, params, max_norm: float) -> None:
        """Habana's FusedClipNorm where the GaudiConfig asks for it (``use_fused_clip_norm``);
        the clipper is built once for the parameter list."""
        from accelctl.worker import hpu_extras

        params = list(params)
        key = tuple(id(p) for p in params)
        if getattr(self, "_clip_key", None) != key:
            self._clip_key = key
            self._clip = hpu_extras.fused_clip(params, max_norm, hpu_extras.gaudi_config())
        if self._clip is not None:
            self._clip()
        else:
            super().clip_grad_norm(params, max_norm)

    def peak_flops(self, dtype: torch.dtype) -> float:
        return measure_matmul_flops(self, dtype, n=8192, budget_s=0.5)


class XlaAdapter(CpuAdapter):
    """torch-xla (Trainium/Inferentia through the Neuron SDK, or TPU)."""

    name = "xla"
    wrap_ddp = False  # xm.optimizer_step all-reduces the gradients itself
    autocast_type = "xla"

    def _device(self) -> torch.device:
        try:
            import torch_xla
            import torch_xla.core.xla_model as xm
        except ImportError as exc:
            raise RuntimeError("device adapter 'xla' needs torch-xla (and torch-neuronx on Trainium/"
                               "Inferentia); it is not installed here") from exc
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:
            import torch_xla.distributed.xla_backend  # noqa: F401  registers the 'xla' process group
        self.torch_xla, self.xm = torch_xla, xm
        return torch_xla.device()

    def device_name(self) -> str:
        return str(self.xm.xla_device_hw(self.device))

    def sync(self) -> None:
        self.torch_xla.sync()
        self.xm.wait_device_ops()

    def mark_step(self) -> None:
        self.torch_xla.sync()

    def autocast(self, dtype: torch.dtype | None):
        # XLA_USE_BF16=1 (the plan sets it for xla_use_bf16 = on, seed 004): torch-xla holds every
        # fp32 tensor in bf16 already, so the model runs without autocast, as the seed's did
        if os.environ.get("XLA_USE_BF16") == "1":
            return contextlib.nullcontext()
        return super().autocast(dtype)

    def optimizer_step(self, optimizer) -> None:
        self.xm.optimizer_step(optimizer)

    def init_process_group(self) -> None:
        from accelctl.worker import xla_extras

        xla_extras.init_process_group()  # "xla" backend, init_method="xla://"

    def wrap_batches(self, batches, job):
        from accelctl.worker import xla_extras

        return xla_extras.device_loader(batches, self.device, xla_extras.dataloader_workers(job))

    def compile_stats(self) -> dict:
        from accelctl.worker import xla_extras

        return xla_extras.compile_stats()  # torch-xla's CompileTime metric

    def memory_bytes(self) -> int | None:
        return None

    def peak_flops(self, dtype: torch.dtype) -> float:
        return measure_matmul_flops(self, dtype, n=4096, budget_s=0.5)


def adapter_for(device: DeviceJob, local_rank: int) -> CpuAdapter:
    """The adapter of the job's device family: the class its family row names
    (``DeviceFamily.worker_adapter``, ``"module:Class"``), imported now."""
    family = FAMILIES.get(device.adapter)
    if family is None:
        raise ValueError(f"device family {device.adapter!r} has no worker adapter; known: {', '.join(FAMILIES)}")
    module, _, cls = family.worker_adapter.partition(":")
    return getattr(importlib.import_module(module), cls)(local_rank, device)


def measure_matmul_flops(adapter: CpuAdapter, dtype: torch.dtype, n: int, budget_s: float) -> float:
    """Best FLOP/s of n x n matmuls over ~budget_s, after ~budget_s / 2 of warm-up (clocks and
    caches settle first).  Run once, before the loop.
    """
    a = torch.randn(n, n, device=adapter.device, dtype=dtype)
    b = torch.randn(n, n, device=adapter.device, dtype=dtype)
    c = torch.empty(n, n, device=adapter.device, dtype=dtype)
    best, spent, warm = 0.0, 0.0, budget_s / 2
    while spent < warm + budget_s:
        t0 = time.perf_counter()
        torch.matmul(a, b, out=c)
        adapter.mark_step()
        adapter.sync()
        dt = time.perf_counter() - t0
        spent += dt
        if spent > warm:
            best = max(best, 2 * n**3 / dt)
    return best
