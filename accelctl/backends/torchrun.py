"""torchrun / DDP: one process per device, gloo on CPU, nccl on CUDA."""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelctl.backends import float8_plan
from accelctl.backends.base import WORKER, Backend, Built, process_env, refusal
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Launch, Plan
from accelctl.errors import Diagnostic
from accelctl.catalog import DEVICES
from accelctl.workload.types import TargetSpec, WorkloadSpec

if TYPE_CHECKING:  # plan --check's result type: planning (validate's verdict) needs none
    from accelctl.backends.findings import CheckResult


def check_torchrun_launches(plan: Plan) -> list[CheckResult]:
    """Every ``torchrun`` command of ``plan`` (also behind ``neuron_parallel_compile``) parsed by
    torch's own ``torch.distributed.run`` argument parser."""
    import io
    from contextlib import redirect_stderr

    from accelctl.backends.findings import CheckResult, not_run

    launches = [launch for launch in plan.launches if "torchrun" in launch.argv]
    try:
        from torch.distributed.run import get_args_parser
    except ImportError as exc:
        return [not_run(f"torchrun parser ({launch.name})", f"{exc}; pip install torch") for launch in launches]
    out = []
    for launch in launches:
        argv = list(launch.argv)
        args = argv[argv.index("torchrun") + 1:]
        err = io.StringIO()
        try:
            with redirect_stderr(err):
                get_args_parser().parse_args(args)
            out.append(CheckResult(f"torchrun parser ({launch.name})", True))
        except SystemExit:
            out.append(CheckResult(f"torchrun parser ({launch.name})", False, err.getvalue().strip().splitlines()[-1:]))
    return out


#: strategies the worker's ``sharded`` strategy runs (FSDP2, tensor, pipeline on one DeviceMesh)
SHARDED = ("fsdp", "tensor", "pipeline")


class TorchrunBackend(Backend):
    name = "torchrun"
    strategies = ("none", "data", *SHARDED)
    summary = "torchrun, one process per device, DistributedDataParallel, FSDP2, tensor and pipeline parallel"
    #: fp8 through torchao's float8 training (Transformer Engine's is the te_fp8 subclass's)
    precisions = ("fp32", "bf16", "fp16", "fp8")
    fp8_library = "torchao"

    def strategy_for(self, target: TargetSpec) -> str:
        return "sharded" if target.parallel.strategy in SHARDED else self.worker_strategy

    def unsupported(self, spec: WorkloadSpec, target: TargetSpec) -> list[Diagnostic]:
        out = super().unsupported(spec, target)
        strategy = target.parallel.strategy
        if strategy in SHARDED:
            if not spec.task.training:
                out.append(refusal(spec, target, f"{strategy} parallel runs training here; generate/infer split a "
                                   "model with deepspeed_inference(tp = N)", "parallel"))
            if strategy == "fsdp" and target.parallel.offload == "cpu" and DEVICES[target.device].host:
                out.append(refusal(spec, target, "fsdp(offload = cpu) moves the shards off a GPU into host memory "
                                   "(torch's CPUOffloadPolicy needs CUDA); on a cpu target they are already there: "
                                   "remove offload", "parallel"))
            if target.optimize.compile and (strategy != "fsdp" or target.parallel.tp > 1):
                out.append(refusal(spec, target, f"torch.compile with the {strategy} split"
                                   + (" (tp > 1)" if strategy == "fsdp" else "") + " is not built (it is under "
                                   "fsdp without tp: each block compiled before fully_shard); set optimize "
                                   "{ compile = off }", "optimize.compile"))
        if self.fp8_library == "torchao":
            out += float8_plan.unsupported(spec, target)
        return out

    def build(self, spec: WorkloadSpec, target: TargetSpec, job: WorkerJob) -> Built:
        argv = ["torchrun"]
        if target.nodes == 1:
            argv += ["--standalone", "--nnodes=1"]
        argv += [f"--nproc_per_node={target.devices}", *WORKER]
        env = process_env(job)
        notes = [f"{target.devices} processes x {job.threads} thread(s), process group {job.device.comm}"]
        if job.device.dataloader_workers:
            notes.append(f"{job.device.dataloader_workers} data-loader worker processes per rank (a torch DataLoader "
                         "over the rank's batches, in their order)"
                         + (", pinned host memory" if job.device.pin_memory else ""))
        if target.precision.dtype == "fp8" and self.fp8_library == "torchao":
            notes += float8_plan.notes(spec, target)
        if job.checkpoint.every and target.parallel.strategy in SHARDED:
            notes.append(f"checkpoints every {job.checkpoint.every} steps: torch.distributed.checkpoint (DCP), "
                         "sharded -- every rank writes its own shards of the model and optimizer (a pipeline "
                         "stage its stage's), complete when rank 0's marker follows every rank's files")
        return Built([Launch("torchrun", tuple(argv), env, processes=target.devices)], notes=notes)

    def check(self, plan: Plan, spec: WorkloadSpec) -> list[CheckResult]:
        return check_torchrun_launches(plan)
