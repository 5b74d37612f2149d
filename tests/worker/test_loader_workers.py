"""``dataloader_workers`` is real on every eager device (seed 002's loader: num_workers=12,
pin_memory=True): the batches come through a torch DataLoader with that many worker
processes, in the order the rank itself would read them.  Before issue 29 only the XLA
adapter honoured the setting; the CPU/CUDA loop ignored it."""

from __future__ import annotations

import itertools
import os
import types

import torch

from accelctl.contract.job import DeviceJob
from accelctl.worker.data import Batches
from accelctl.worker.devices import CpuAdapter


def _batches():
    def gen():
        for i in itertools.count():
            yield {"x": torch.full((2, 3), float(i)), "pid": torch.tensor(os.getpid())}
    return Batches(gen(), 2, 3, "synthetic")


def test_loader_workers_feed_the_same_batches_in_order_from_other_processes():
    job = types.SimpleNamespace(device=DeviceJob(dataloader_workers=2))
    adapter = CpuAdapter(0, job.device)
    fed = adapter.wrap_batches(_batches(), job)
    got = [next(fed) for _ in range(6)]
    assert [int(b["x"][0, 0]) for b in got] == list(range(6))
    assert {int(b["pid"]) for b in got} - {os.getpid()}, "no batch came from a worker process"
    assert "2 loader workers" in fed.source


def test_no_loader_workers_reads_in_the_rank_itself():
    job = types.SimpleNamespace(device=DeviceJob(dataloader_workers=0))
    read = _batches()
    assert CpuAdapter(0, job.device).wrap_batches(read, job) is read
