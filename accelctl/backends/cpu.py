"""cpu: one worker process on this machine's CPU, fp32.  The embedded default."""

from __future__ import annotations

from accelctl.backends.base import WORKER, Backend, Built, process_env, refusal
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Launch
from accelctl.errors import Diagnostic
from accelctl.workload.types import TargetSpec, WorkloadSpec


class CpuBackend(Backend):
    name = "cpu"
    strategies = ("none", "data")
    summary = "one process on the host CPU"
    #: fp8 only in the rehearsal of a torchao fp8 target (a cpu target's fp8 is E501): emulated
    precisions = ("fp32", "bf16", "fp16", "fp8")
    fp8_library = "torchao"

    def selects(self, spec: WorkloadSpec, target: TargetSpec) -> bool:
        return super().selects(spec, target) and target.world_size == 1

    def unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        out = super().unsupported(spec, target)
        if target.world_size > 1:
            out.append(refusal(spec, target, "backend cpu runs one process; use torchrun for devices > 1",
                               "devices", "nodes"))
        return out

    def processes_per_node(self, target: TargetSpec) -> int:
        return 1

    def build(self, spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Built:
        env = process_env(job)
        return Built([Launch("worker", ("python", *WORKER), env, processes=1)],
                     notes=[f"1 process, {job.threads} thread(s)"])
