"""The process every launch starts: ``python -m accelctl.worker JOB.json`` (one run), or
``python -m accelctl.worker jobs.json`` (a worker shared by several runs whose stacks match:
their jobs in order, torch and the model libraries imported once; ``main``).

For each job it reads the job, joins the process group when ``WORLD_SIZE > 1`` (torchrun, deepspeed and
srun set RANK / WORLD_SIZE / LOCAL_RANK), runs the task's loop and reports typed events to
``<events_dir>/rank<N>.jsonl``, the last one saying how the job ended (``ending``: whatever
stop lands while it is decided and written).  Exit codes: 0 done, 1 exception, 3 NaN/inf loss,
130 stopped (SIGINT / SIGTERM).
"""

from __future__ import annotations

import gc
import os
import random
import signal
import sys
import time

import torch  # noqa: E402  (the worker is the child process: torch is what it is for)

from accelctl.contract import envnames, supervision  # noqa: E402
from accelctl.families import FAMILIES as DEVICE_FAMILIES  # noqa: E402
from accelctl.contract.events import PhaseChanged, RunFinished  # noqa: E402
from accelctl.contract.job import WorkerJob, read_queue  # noqa: E402
from accelctl.worker import envinfo, precision  # noqa: E402
from accelctl.worker.context import RunContext  # noqa: E402
from accelctl.worker.devices import adapter_for  # noqa: E402
from accelctl.worker.emit import EventWriter  # noqa: E402
from accelctl.worker.ending import Ending, StopSignals, end_of  # noqa: E402
from accelctl.worker.strategy import strategy_for  # noqa: E402

from accelctl.contract.ids import WORKER_EXCEPTION as EXIT_EXCEPTION  # noqa: E402
from accelctl.contract.ids import WORKER_OK as EXIT_OK  # noqa: E402
from accelctl.contract.ids import WORKER_STOPPED as EXIT_STOPPED  # noqa: E402
#: seconds a worker whose runner is gone has to stop cleanly before it exits regardless
#: (a rank blocked in a collective whose peer is already gone)
RUNNER_LOST_GRACE_S = 5.0


def watch_runner() -> supervision.RunnerWatch:
    """End this worker when the ``accelctl run`` that started it is gone (SIGKILLed): the kernel's
    parent-death SIGTERM, and a thread polling the runner named in ``ACCELCTL_RUNNER``.  The run
    ends as a stop (reason ``runner_lost``); an uninterruptible loop exits after
    ``RUNNER_LOST_GRACE_S``.
    """
    supervision.set_parent_death_signal(signal.SIGTERM)

    def lost() -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(RUNNER_LOST_GRACE_S)
        exit_now(EXIT_STOPPED)

    return supervision.RunnerWatch(os.environ.get(envnames.RUNNER, ""), lost).start()


def pick_loop(job: WorkerJob):
    """The loop module for the job's family and task."""
    if job.rehearsal_of and job.precision.fp8 is not None:  # imported only where it may be wanted
        from accelctl.worker import fp8_rehearsal

        if fp8_rehearsal.wanted(job):  # accelctl run --rehearse --fp8: FP8 emulated beside a baseline
            return fp8_rehearsal
    if job.model.family == "stable_diffusion":
        from accelctl.worker import diffusion_loop

        return diffusion_loop
    if job.task.kind in ("pretrain", "finetune"):
        from accelctl.worker import train_loop

        return train_loop
    if job.task.kind in ("generate", "infer"):
        from accelctl.worker import generate_loop

        return generate_loop
    raise ValueError(f"unknown task {job.task.kind!r} (pretrain, finetune, generate, infer)")


def main(argv: list[str] | None = None) -> int:
    """Run the job (``job.json``) or the jobs of a shared worker (``jobs.json``: several runs'
    jobs, in order, in this one process).  Exit code: the last job's; a stopped job (SIGINT,
    SIGTERM, the runner lost) ends the process at once, EXIT_STOPPED, its later jobs not
    started.  A job that fails (an exception, a NaN loss) is recorded as failed in its own run
    and the next job runs: each job is the run of its own workload, as with a worker each."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m accelctl.worker JOB.json|jobs.json", file=sys.stderr)
        return 2
    started = time.perf_counter()
    queue = read_queue(argv[0])
    if queue[0][0].hub == "offline":  # before anything imports huggingface_hub, which reads these once
        os.environ.setdefault("HF_HUB_OFFLINE", "1")  # (a shared worker's jobs agree on it: the runner checks)
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    stops = StopSignals().install()  # SIGTERM (torchrun, Slurm, the runner) ends the run like Ctrl-C
    runner = watch_runner()
    code = EXIT_OK
    try:
        for index, (job, log) in enumerate(queue):
            if index:
                stops.resume()  # a stop held while the last job ended: raised here, this job not started
                free_device_memory(queue[index - 1][0])
                started = time.perf_counter()
            if log:
                send_output_to(log)
            code = run_job(job, runner, started, stops)
            if code == EXIT_STOPPED:
                break  # a stop ends the process: the runner starts no later job of a stopped run
    except KeyboardInterrupt:  # between two jobs: the next one was not started
        code = EXIT_STOPPED
    finally:
        stops.uninstall()
        stop_compile_workers()
    return code


def stop_compile_workers() -> None:
    """Inductor's pool of compile processes (``optimize { compile = on }``), stopped and waited
    for before the worker exits: left to notice its parent gone, it outlives the launch.
    """
    async_compile = sys.modules.get("torch._inductor.async_compile")
    if async_compile is not None and hasattr(async_compile, "shutdown_compile_workers"):
        async_compile.shutdown_compile_workers()


def free_device_memory(done: WorkerJob) -> None:
    """Between two jobs of a shared worker: on an accelerator, a full collection, so device memory
    held by a reference cycle of the job just done is back before the next one builds its model.
    Not on the host: refcounting frees the model there, and a full collection is costly.
    """
    family = DEVICE_FAMILIES.get(done.device.adapter)
    if family is None or not family.host:
        gc.collect()


def send_output_to(log: str) -> None:
    """Point this process's stdout and stderr (file descriptors 1 and 2, so C++ and child
    processes follow) at ``log``, appended: a shared worker's output for each job lands in that
    job's own run folder, where the runner looks for a crash's last words."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)


def run_job(job: WorkerJob, runner: supervision.RunnerWatch, started: float, stops: StopSignals) -> int:
    """One job, start to end: its events to ``<job.events_dir>/rank<N>.jsonl``, the last one
    saying how it ended whatever stop lands meanwhile (``ending``); the exit code a worker of
    its own would return for it.  Stops stay held when it returns (``stops.resume``)."""
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    writer = EventWriter(job.events_dir, rank)
    try:
        ending = end_of(lambda: run_loop(job, writer, rank, world, local_rank, started), stops, rank,
                        lambda: runner.lost)
        writer.emit(ending.event)
        if ending.code == EXIT_OK:
            leave_together(world)
        return ending.code
    finally:
        writer.close()


def run_loop(job: WorkerJob, writer: EventWriter, rank: int, world: int, local_rank: int, started: float) -> Ending:
    """The job's setup and loop; how it ends when it runs to its end."""
    writer.emit(PhaseChanged(phase="setup", rank=rank))
    if job.threads > 0:
        torch.set_num_threads(job.threads)
    # each rank draws its own data and dropout; the weights are synced by DDP's broadcast
    random.seed(job.seed + rank)
    torch.manual_seed(job.seed + rank)

    adapter = adapter_for(job.device, local_rank)
    ctx = RunContext(job=job, rank=rank, world=world, local_rank=local_rank, adapter=adapter, writer=writer,
                     strategy=strategy_for(job.strategy))
    if world > 1 or ddp_alone(job):
        t0 = time.perf_counter()
        adapter.init_process_group()
        ctx.setup_s["dist_init_s"] = time.perf_counter() - t0
    ctx.precision = precision.resolve(job, adapter, ctx.log)
    ctx.env = envinfo.collect(torch.get_num_threads(), adapter.device_name())
    ctx.env["device"] = str(adapter.device)
    # the device's matmul ceiling for MFU: the stored calibration, else probed once here
    loop = pick_loop(job)
    dtype = ctx.precision.dtype or torch.float32
    t0 = time.perf_counter()
    envinfo.add_ceiling(ctx.env, str(dtype).removeprefix("torch."), lambda: adapter.peak_flops(dtype),
                        wanted=getattr(loop, "reports_mfu", lambda job: True)(job))
    ctx.setup_s["peak_probe_s"] = time.perf_counter() - t0

    steps, results = loop.run(ctx)
    return Ending(EXIT_OK, RunFinished(rank=rank, steps=steps, wall_s=time.perf_counter() - started, results=results))


def ddp_alone(job: WorkerJob) -> bool:
    """``parallel = ddp`` on one device under a launcher that set up a rendezvous (torchrun sets
    ``MASTER_ADDR``): the process group (nccl on a GPU) and the DDP wrapper at world size 1, as
    each rank of a larger run has them, not a bare loop.  Joined once per process: a shared
    worker's later job keeps the group its first one joined."""
    joined = torch.distributed.is_available() and torch.distributed.is_initialized()
    return job.parallel.strategy == "data" and job.strategy == "plain" and "MASTER_ADDR" in os.environ and not joined


def leave_together(world: int, timeout_s: float = 60.0) -> None:
    """Every rank past its last collective before any of them exits: a rank tearing its gloo
    group down while a peer still finished could abort one of them (SIGABRT).  A barrier first, then
    the process ends without the collectives' C++ teardown (``exit_now``).
    """
    if world > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
        from datetime import timedelta

        try:
            if torch.distributed.get_backend() == "gloo":
                torch.distributed.monitored_barrier(timeout=timedelta(seconds=timeout_s))
            else:
                torch.distributed.barrier()
        except Exception:  # noqa: BLE001 - a peer gone already: nothing left to wait for
            pass


def exit_now(code: int) -> None:
    """End the worker process: flush what it printed, then ``os._exit`` -- no interpreter
    shutdown and no C++ destructors of the process group, whose teardown is what aborted ranks;
    the events file is already closed.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
