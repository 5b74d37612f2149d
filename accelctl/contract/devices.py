"""Device families: what the worker drives a device with, by the catalog's ``adapter`` name.

A family is the runtime a device kind belongs to (``accelctl.spec.catalog.Device.adapter``):
its torch.distributed backend and the worker adapter class that runs loops on it
(``accelctl.worker.devices``).  The planner resolves a target's family into the job
(``WorkerJob.device``), so the worker never maps device kinds itself.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DeviceFamily:
    name: str
    #: torch.distributed backend its ranks join
    comm: str
    #: the stack it needs in the worker, for messages
    stack: str


FAMILIES: dict[str, DeviceFamily] = {
    f.name: f
    for f in (
        DeviceFamily("cpu", "gloo", "PyTorch"),
        DeviceFamily("cuda", "nccl", "PyTorch with CUDA"),
        DeviceFamily("hpu", "hccl", "Habana SynapseAI's PyTorch bridge (habana_frameworks.torch)"),
        DeviceFamily("xla", "xla", "torch-xla (and torch-neuronx on Trainium/Inferentia)"),
    )
}
