"""torchrun / DDP: one process per device, gloo on CPU, nccl on CUDA."""

from __future__ import annotations

from accelctl.backends.base import WORKER, Backend, Built, process_env
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Launch
from accelctl.spec.types import TargetSpec, WorkloadSpec


class TorchrunBackend(Backend):
    name = "torchrun"
    adapters = ("cpu", "cuda")
    strategies = ("none", "data")
    summary = "torchrun, one process per device, DistributedDataParallel"

    def build(self, spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Built:
        argv = ["torchrun"]
        if target.nodes == 1:
            argv += ["--standalone", "--nnodes=1"]
        argv += [f"--nproc_per_node={target.devices}", *WORKER]
        env = process_env(job)
        return Built([Launch("torchrun", tuple(argv), env, processes=target.devices)],
                     notes=[f"{target.devices} processes x {job.threads} thread(s), "
                            f"process group {job.device.comm}"])
