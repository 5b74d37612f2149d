"""Device adapters: the few places where a loop differs between CPU, CUDA, Gaudi and XLA.

A job names a device *kind* from the catalog (cpu, a100, gaudi2, trn1 ...); ``KIND_TO_ADAPTER``
maps it to an adapter, and ``job.options["adapter"]`` overrides the mapping.  Each adapter
imports its stack only when selected: CPU and CUDA run here, HPU and XLA are written against
Habana's and torch-xla's documented APIs and fail with a clear message when absent.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Any

import torch

#: catalog device kind -> adapter name
KIND_TO_ADAPTER = {
    "cpu": "cpu",
    **{k: "cuda" for k in ("cuda", "gpu", "a100", "a100_40gb", "a100_80gb", "h100", "h200", "a10g", "l4",
                            "l40s", "v100", "t4")},
    **{k: "hpu" for k in ("hpu", "gaudi", "gaudi1", "gaudi2", "gaudi3")},
    **{k: "xla" for k in ("xla", "trn1", "trn2", "inf2", "tpu")},
}

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp8": torch.bfloat16}


class CpuAdapter:
    """The default: eager PyTorch on the host; gloo for collectives."""

    name = "cpu"
    dist_backend = "gloo"
    #: gradients are averaged by a DDP wrapper (XLA does it in ``optimizer_step`` instead)
    wrap_ddp = True
    autocast_type = "cpu"

    def __init__(self, local_rank: int, options: dict[str, Any]) -> None:
        self.local_rank = local_rank
        self.options = options
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

    def init_process_group(self) -> None:
        """Join the job's process group (env:// rendezvous set up by the launcher)."""
        torch.distributed.init_process_group(self.dist_backend)

    def compile_stats(self) -> dict:
        """Graph compilation so far (count, seconds), reported apart from step time; eager: none."""
        return {}

    def wrap_batches(self, batches, job):
        """Feed batches to the device; eager devices take them as they come."""
        return batches

    def autocast(self, dtype: torch.dtype | None):
        if dtype is None or dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(self.autocast_type, dtype=dtype)

    def reset_peak_memory(self) -> None:
        pass

    def memory_bytes(self) -> int | None:
        """Resident set size of this process (CPU: weights, activations and allocator slack)."""
        try:
            with open("/proc/self/statm") as fh:
                return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, ValueError, IndexError):
            return None

    def prepare_inference(self, model):
        return model

    def peak_flops(self, dtype: torch.dtype) -> float:
        """Measured matmul ceiling.  On CPU always fp32: bf16/fp16 are emulated on CPUs without
        AVX512-BF16/AMX, so MFU against the fp32 ceiling shows what the emulation costs."""
        return measure_matmul_flops(self, torch.float32, n=1024, budget_s=0.2)


class CudaAdapter(CpuAdapter):
    name = "cuda"
    dist_backend = "nccl"
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

    def peak_flops(self, dtype: torch.dtype) -> float:
        # measured in the compute dtype, on matrices big enough to fill the device
        return measure_matmul_flops(self, dtype, n=8192, budget_s=0.5)


class HpuAdapter(CpuAdapter):
    """Intel Gaudi through SynapseAI's PyTorch bridge (lazy mode by default)."""

    name = "hpu"
    dist_backend = "hccl"
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
        self.lazy = bool(self.options.get("lazy_mode", True))
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
        if self.options.get("hpu_graphs"):
            from habana_frameworks.torch.hpu import wrap_in_hpu_graph

            return wrap_in_hpu_graph(model)
        return model

    def peak_flops(self, dtype: torch.dtype) -> float:
        return measure_matmul_flops(self, dtype, n=8192, budget_s=0.5)


class XlaAdapter(CpuAdapter):
    """torch-xla (Trainium/Inferentia through the Neuron SDK, or TPU)."""

    name = "xla"
    dist_backend = "xla"
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


ADAPTERS = {a.name: a for a in (CpuAdapter, CudaAdapter, HpuAdapter, XlaAdapter)}


def adapter_for(device_kind: str, options: dict[str, Any], local_rank: int) -> CpuAdapter:
    """The adapter of a device kind (``options["adapter"]`` wins)."""
    name = options.get("adapter") or KIND_TO_ADAPTER.get(device_kind.lower())
    if name is None:
        raise ValueError(f"device kind {device_kind!r} has no adapter; known kinds: {', '.join(sorted(KIND_TO_ADAPTER))}"
                         f" (or set options.adapter to one of {', '.join(ADAPTERS)})")
    if name not in ADAPTERS:
        raise ValueError(f"unknown device adapter {name!r}; known: {', '.join(ADAPTERS)}")
    return ADAPTERS[name](local_rank, options)


def measure_matmul_flops(adapter: CpuAdapter, dtype: torch.dtype, n: int, budget_s: float) -> float:
    """Best FLOP/s of n x n matmuls over ~budget_s, after ~budget_s / 2 of warm-up (clocks and
    caches settle; on this VM the first ~0.1 s run at half speed).  Run once, before the loop."""
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
