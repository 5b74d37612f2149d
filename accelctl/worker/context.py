"""What a loop gets from the worker: the job, its rank, the device adapter, and event helpers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelctl.contract.events import PhaseChanged, RunStarted, StepMetrics
from accelctl.contract.mesh import Mesh
from accelctl.worker.emit import EventWriter


class NonFiniteLoss(Exception):
    """The loss became NaN or inf at ``step``: the run stops (worker exit code 3)."""

    def __init__(self, step: int, loss: float) -> None:
        super().__init__(f"loss is {loss} at step {step}")
        self.step = step
        self.loss = loss


class SequenceTooLong(ValueError):
    """A sequence needs more positions than the model embeds (GPT-2, BERT: learned absolute
    positions), found where only the model's tokenizer knows the length: the run stops with
    the failure ``sequence_too_long`` before the model would index past its embeddings."""

    reason = "sequence_too_long"


@dataclass
class RunContext:
    job: Any
    rank: int
    world: int
    local_rank: int
    adapter: Any
    writer: EventWriter
    precision: Any = None
    #: the execution strategy (``accelctl.worker.strategy``) the plan chose
    strategy: Any = None
    #: RunStarted.env (versions, CPU, measured peak ...)
    env: dict[str, Any] = field(default_factory=dict)
    #: seconds spent before the loop, by part (dist init, peak probe, model build ...)
    setup_s: dict[str, float] = field(default_factory=dict)

    @property
    def data_parallel(self) -> int:
        """Ranks holding different samples: the world divided by the tensor- and pipeline-parallel
        groups (those ranks share one batch).  Step events count samples over the whole job, so
        throughput is the job's whichever rank reports it.
        """
        return max(1, self.world // max(1, self.job.parallel.tp * self.job.parallel.pp))

    @property
    def data_rank(self) -> int:
        """Which data shard this rank reads: its dp index on the mesh (``contract.mesh``)."""
        if self.world % (self.job.parallel.tp * self.job.parallel.pp):
            return self.rank
        return Mesh.of(self.world, self.job.parallel.tp, self.job.parallel.pp).coords(self.rank)["dp"]

    def log(self, level: str, message: str) -> None:
        self.writer.log(level, message)

    def phase(self, name: str, repeat: int = 0) -> None:
        self.writer.emit(PhaseChanged(phase=name, rank=self.rank, repeat=repeat))

    def started(self, details: dict[str, Any]) -> None:
        """Emit RunStarted once the model is built: the rank knows what it will run."""
        job = self.job
        base = {"task": job.task.kind, "device_kind": job.device.kind, "adapter": self.adapter.name,
                "precision": self.precision.name if self.precision else job.precision.dtype,
                "precision_requested": job.precision.dtype, "micro_batch": job.batch.micro,
                "accumulation": job.batch.accumulation,
                "global_batch": job.batch.micro * job.batch.accumulation * self.data_parallel,
                "setup_s": {k: round(v, 4) for k, v in self.setup_s.items()}}
        if job.rehearsal_of:
            base["rehearsal_of"] = job.rehearsal_of  # a CPU rehearsal of that accelerator target
        self.writer.emit(RunStarted(run_id=job.run_id, workload=job.workload, target=job.target, backend=job.backend,
                                    rank=self.rank, world_size=self.world, env=self.env, details={**base, **details}))

    def step(self, **fields: Any) -> None:
        self.writer.emit(StepMetrics(rank=self.rank, **fields))

    @property
    def peak_flops(self) -> float | None:
        return self.env.get("peak_flops_measured")

    def mfu(self, flops: float | None, seconds: float) -> float | None:
        """Achieved FLOP/s of this rank over its measured peak."""
        if not flops or not self.peak_flops or seconds <= 0:
            return None
        return flops / seconds / self.peak_flops
