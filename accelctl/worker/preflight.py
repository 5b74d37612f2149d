"""``python -m accelctl.worker.preflight JOB.json``: join the world, all-reduce once, leave.

Started by ``accelctl run --preflight`` in place of the worker, under the same launcher, engine
and rendezvous and reading the same ``job.json``.  It reports as the worker does: ``RunStarted``
(``details.preflight``), then ``RunFinished`` with ``results.preflight`` (world size, ``init_s``,
``all_reduce_s``, the sum against ``1 + .. + world``: a wrong sum fails) or ``RunFailed``.
No model, no data: a broken rendezvous costs seconds, not an allocation.
"""

from __future__ import annotations

import os
import sys
import time

import torch

from accelctl.contract.events import RunFailed, RunFinished, RunStarted
from accelctl.contract.job import WorkerJob
from accelctl.worker.devices import adapter_for
from accelctl.worker.emit import EventWriter
from accelctl.worker.ending import Ending, StopSignals, end_of
from accelctl.worker.main import EXIT_EXCEPTION, EXIT_OK, exit_now, leave_together


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m accelctl.worker.preflight JOB.json", file=sys.stderr)
        return 2
    started = time.perf_counter()
    job = WorkerJob.load(argv[0])
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    writer = EventWriter(job.events_dir, rank)
    stops = StopSignals().install()
    try:
        ending = end_of(lambda: all_reduce_once(job, writer, rank, world, local_rank, started), stops, rank,
                        lambda: False, prefix="preflight: ")
        writer.emit(ending.event)
        if ending.code == EXIT_OK:
            leave_together(world)
        return ending.code
    finally:
        stops.uninstall()
        writer.close()


def all_reduce_once(job: WorkerJob, writer: EventWriter, rank: int, world: int, local_rank: int,
                    started: float) -> Ending:
    """Join, all-reduce one number per rank, pass a barrier; the preflight's report."""
    writer.emit(RunStarted(run_id=job.run_id, workload=job.workload, target=job.target, backend=job.backend,
                           rank=rank, world_size=world, details={"preflight": True}))
    adapter = adapter_for(job.device, local_rank)
    t0 = time.perf_counter()
    if world > 1:
        adapter.init_process_group()
    init_s = time.perf_counter() - t0
    value = torch.full((1,), float(rank + 1), device=adapter.device)
    t0 = time.perf_counter()
    if world > 1:
        torch.distributed.all_reduce(value)
        torch.distributed.barrier()
    total = float(value.item())
    reduce_s = time.perf_counter() - t0
    expected = world * (world + 1) / 2
    report = {"world_size": world, "init_s": init_s, "all_reduce_s": reduce_s, "sum": total,
              "expected": expected, "comm": job.device.comm}
    if total != expected:
        return Ending(EXIT_EXCEPTION, RunFailed(
            reason="exception", rank=rank,
            message=f"preflight all-reduce over {world} ranks gave {total:g}, not {expected:g}"))
    return Ending(EXIT_OK, RunFinished(rank=rank, steps=0, wall_s=time.perf_counter() - started,
                                       results={"preflight": report}))


if __name__ == "__main__":
    exit_now(main())
