"""torch-xla pieces of the xla_neuron backend that the device adapter does not cover.

``init_process_group()`` (the ``xla`` group over ``xla://``), ``device_loader(batches, device,
workers)`` (a ``DataLoader`` with the plan's workers behind ``MpDeviceLoader``, which uploads
batches in the background and cuts the graph once per batch), ``compile_stats()`` (compilation
apart from step time) and ``extracting_graphs_only()`` (true inside ``neuron_parallel_compile``'s
trial run, whose outputs are dummies).  torch_xla is imported inside the functions only;
``accelctl.backends.xla_neuron.check`` checks every torch_xla name here against its source.
"""

from __future__ import annotations

import os
from typing import Any

from accelctl.contract import envnames

#: set by the xla_neuron plan: data-loader worker processes per rank
WORKERS_ENV = envnames.DATALOADER_WORKERS


def init_process_group() -> None:
    """Join the ``xla`` process group (one rank per NeuronCore)."""
    import torch.distributed as dist
    import torch_xla.distributed.xla_backend  # noqa: F401  registers backend 'xla' and the xla:// rendezvous

    dist.init_process_group("xla", init_method="xla://")


def dataloader_workers(job: Any) -> int:
    """The plan's worker count: the xla_neuron plan puts it in the launch's environment
    (the target's ``dataloader_workers``, else by the instance's vCPUs); else the job's."""
    return int(os.environ.get(WORKERS_ENV, job.device.dataloader_workers))


class _Stream:
    """An ``IterableDataset`` over the loop's endless batch iterator: forked worker k keeps batches
    k, k + n, ... of its own copy, and the DataLoader takes from them in turn, so the loop sees the
    order it would see without workers.  Hidden cost: each worker also draws the batches it skips.
    """

    def __init__(self, batches) -> None:
        self.batches = batches

    def __iter__(self):
        import itertools

        import torch.utils.data

        info = torch.utils.data.get_worker_info()
        if info is None:
            return iter(self.batches)
        return itertools.islice(iter(self.batches), info.id, None, info.num_workers)


def host_loader(batches, workers: int, pin_memory: bool = False):
    """``batches`` behind a ``DataLoader`` with ``workers`` processes (the seed's num_workers),
    in page-locked memory with ``pin_memory`` (seed 002's ``pin_memory=True``)."""
    if workers <= 0:
        return batches
    import torch.utils.data

    class StreamDataset(_Stream, torch.utils.data.IterableDataset):
        pass

    dataset = StreamDataset(batches)
    # fork: the workers inherit the iterator (a generator cannot be pickled for spawn)
    return torch.utils.data.DataLoader(dataset, batch_size=None, num_workers=workers, persistent_workers=True,
                                       prefetch_factor=2, multiprocessing_context="fork", pin_memory=pin_memory)


def device_loader(batches, device, workers: int | None = None):
    """The loop's ``Batches`` fed through host workers and ``MpDeviceLoader`` onto ``device``."""
    import torch_xla.distributed.parallel_loader as pl

    from accelctl.worker.data import Batches

    workers = dataloader_workers() if workers is None else workers
    loader = pl.MpDeviceLoader(host_loader(batches, workers), device)
    return Batches(iter(loader), batches.samples, batches.tokens_per_sample,
                   f"{batches.source} (MpDeviceLoader, {workers} loader workers)")


def compile_stats() -> dict[str, float | int]:
    """Graphs compiled so far in this process and the seconds spent compiling them."""
    import torch_xla.debug.metrics as met

    data = met.metric_data("CompileTime")  # (count, total ns, samples) or None
    if not data:
        return {"compiles": 0, "compile_s": 0.0}
    return {"compiles": int(data[0]), "compile_s": float(data[1]) / 1e9}


def extracting_graphs_only() -> bool:
    """Inside ``neuron_parallel_compile``'s trial run (``NEURON_EXTRACT_GRAPHS_ONLY``)."""
    return os.environ.get("NEURON_EXTRACT_GRAPHS_ONLY", "").lower() in ("1", "true", "yes")
