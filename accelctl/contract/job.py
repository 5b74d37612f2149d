"""The worker's input: one JSON file the plan writes and every launched process reads.

A ``WorkerJob`` is everything the training/inference loop needs, resolved for one target: no
defaults are left for the worker to guess.  It embeds the spec's own frozen types
(``accelctl.workload.types``) resolved by the planner, so a new workload key is one spec field and
one reader in the worker, never a mirror copied field by field.  What the worker needs beyond the
spec is typed here (``DeviceJob``, ``strategy``, the test-only ``DebugJob``).  Plain data: it
prints in a plan and round-trips through JSON (``accelctl.contract.codec``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accelctl.contract import codec
from accelctl.frozen import Value, field
from accelctl.workload.types import (
    BatchSpec,
    CheckpointSpec,
    DatasetSpec,
    MeasureSpec,
    ModelSpec,
    OptimizerSpec,
    OptimizeSpec,
    ParallelSpec,
    PrecisionSpec,
    TaskSpec,
)

class DeviceJob(Value):
    """How the worker drives the device: the family's adapter and collective backend,
    resolved by the planner from the device catalog, and the device options a target set."""

    #: device kind from the catalog (cpu, a100, h100, gaudi2, trn1 ...), for the record
    kind: str = "cpu"
    #: device family whose worker adapter runs the loop: cpu, cuda, hpu, xla
    adapter: str = "cpu"
    #: torch.distributed backend of the family: gloo, nccl, hccl, xla
    comm: str = "gloo"
    #: HPU: wrap the model in HPU graphs (inference)
    hpu_graphs: bool = False
    #: HPU: lazy mode (``mark_step`` cuts the graph)
    lazy_mode: bool = True
    #: DataLoader worker processes per rank (0 = load in the rank itself)
    dataloader_workers: int = 0
    #: CUDA: the loader's batches in page-locked host memory (``DataLoader(pin_memory=True)``)
    pin_memory: bool = False
    #: XLA: this launch only compiles the graphs (``neuron_parallel_compile``), untimed
    precompile: bool = False


class DebugJob(Value):
    """Test hooks.  No workload key sets them; tests write them into a job directly."""

    #: poison the loss with NaN at this optimizer step (0 = never)
    inject_nan_at_step: int = 0
    #: report a checksum of the parameters after the run (proves DDP keeps ranks equal)
    report_param_checksum: bool = False
    #: synthetic data: batches in the pool each rank cycles through
    synthetic_pool: int = 8
    #: synthetic data: token ids drawn from a window of this many ids
    synthetic_vocab: int = 128
    #: kill this rank (SIGKILL) in the middle of the checkpoint save of this step: its files
    #: written, the ``complete.json`` marker not (0 = never)
    kill_in_checkpoint_at_step: int = 0
    #: settings of the test suite's fake workers (``tests/*/fake_worker.py``: which script
    #: to play, which rank crashes ...); the real worker never reads it
    fake: dict[str, Any] = field(default_factory=dict)


class WorkerJob(Value):
    run_id: str
    workload: str
    target: str
    #: the plan's backend, for the record (the worker never branches on it: see ``strategy``)
    backend: str
    device: DeviceJob
    task: TaskSpec
    model: ModelSpec
    #: the architecture the worker builds, in the family's shape keys (random weights unless
    #: real ones are loaded): the real model's on an accelerator target, the stand-in on the
    #: host (a cpu target) or in a rehearsal; empty = the Hub config of ``model.ref``
    architecture: dict[str, Any]
    data: DatasetSpec
    precision: PrecisionSpec
    optimizer: OptimizerSpec
    measure: MeasureSpec
    #: per-device micro-batch and gradient accumulation
    batch: BatchSpec = field(default_factory=BatchSpec)
    parallel: ParallelSpec = field(default_factory=ParallelSpec)
    #: how the worker runs the model (``accelctl.worker.strategy.STRATEGIES``): ``plain`` runs
    #: it itself (one process, or DDP when the launcher starts several); ``deepspeed`` hands
    #: model and optimizer to ``deepspeed.initialize``; ``deepspeed_inference`` to
    #: ``deepspeed.init_inference``
    strategy: str = "plain"
    gradient_checkpointing: bool = False
    #: torch.compile / channels-last of the model the worker builds (``accelctl.worker.optimize``)
    optimize: OptimizeSpec = field(default_factory=OptimizeSpec)
    seed: int = 0
    #: checkpoints: every N steps, kept K, in ``dir`` (absolute) or the run folder's ``checkpoints/``
    #: (``accelctl.contract.checkpoint``); a worker that finds a complete one of its run resumes from it
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)
    #: "real" (the model the target names) or "stand_in" (the small model of the same family)
    scale: str = "real"
    #: the accelerator target this CPU run rehearses ("" = not a rehearsal)
    rehearsal_of: str = ""
    #: Hugging Face Hub access of the worker: "online", or "offline" (HF_HUB_OFFLINE=1: the
    #: local cache and paths only)
    hub: str = "offline"
    #: intra-op threads per process (torch.set_num_threads)
    threads: int = 1
    debug: DebugJob = field(default_factory=DebugJob)
    #: folder where each rank appends ``rank<N>.jsonl``; filled in by the runner
    events_dir: str = ""

    def to_dict(self) -> dict[str, Any]:
        return codec.to_dict(self)

    def to_json(self) -> str:
        """``job.json``: data, never a template (no filler of a plan's placeholders reads it, so a
        prompt's ``{run_dir}`` reaches the worker as written)."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "WorkerJob":
        return codec.from_dict(cls, d)

    @classmethod
    def load(cls, path: str | Path) -> "WorkerJob":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


#: the job list of a worker shared by several runs, in the first of their run folders
JOBS_FILE = "jobs.json"


class QueuedJob(Value):
    """One job of a shared worker's list: its ``job.json`` and the ``worker.log`` of its run
    folder (the worker's stdout and stderr go there while it runs this job)."""

    job: str
    log: str = ""


class JobList(Value):
    """``python -m accelctl.worker jobs.json``: one worker process runs these jobs in order
    (the runner's ``accelctl.run.supervision.shared``), importing torch and the model libraries once.
    Each job writes its own run folder's events exactly as a worker of its own would."""

    jobs: tuple[QueuedJob, ...]

    def to_json(self) -> str:
        return json.dumps(codec.to_dict(self), indent=2, sort_keys=True)


def read_queue(path: str | Path) -> list[tuple[WorkerJob, str]]:
    """``[(job, log)]`` from a worker's argument: a ``JobList`` file (``{"jobs": [...]}``),
    or a single ``job.json`` (log "": the output stays where the runner sent it)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if isinstance(data, dict) and set(data) == {"jobs"}:
        queue = codec.from_dict(JobList, data)
        return [(WorkerJob.load(q.job), q.log) for q in queue.jobs]
    return [(WorkerJob.from_dict(data), "")]
