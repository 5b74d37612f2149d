"""One worker process for the workloads of one file whose stacks match.

Each workload is still a run of its own (folder, events, summary, status), but where the plans'
stacks match (``signature``) ``SharedRuns`` starts ONE worker with a job list (``jobs.json`` in the
first run's folder), so the worker's start-up (``import torch`` and what it pulls in) is paid
once.  Each run is supervised by its own ``RunHandle`` (``shared=``) and ends when the worker
reports its job's end.  A failed job leaves the worker to run the next; a dead worker fails its
run and the later jobs get a fresh one; a stop ends the worker after the job it is in, and
``close`` removes the folders of the jobs never started and returns their workloads.  ``close``
always reaps the worker: no orphan.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelctl.backends.base import WORKER
from accelctl.contract import supervision
from accelctl.contract.job import JOBS_FILE, JobList, QueuedJob, WorkerJob
from accelctl.contract.plan import FREE_PORT, RUN_DIR, Plan
from accelctl.run import store
from accelctl.run import procgroup
from accelctl.run.supervision.commands import ResolvedLaunch, run_values
from accelctl.run.store.ownership import Ownership, claim
from accelctl.run.supervision.runner import DEFAULT_GRACE_S, RunHandle
from accelctl.frozen import replace
from accelctl.private_files import store_opener

#: seconds ``close`` gives a worker to exit by itself after its last job (``os._exit`` right
#: after the last event: well under this) before its process group is killed
EXIT_WAIT_S = 10.0


def signature(plan: Plan) -> tuple | None:
    """What must be equal for two plans to share a worker process, or None when ``plan`` cannot
    share one: more than one launch or process (a launcher: torchrun, deepspeed, a scheduler),
    a launch that is not the worker itself reading ``{run_dir}/job.json`` (a vendor example
    script), generated files, or a per-run value (``{run_dir}``, ``{free_port}``) anywhere in its
    command, environment or folder.  The Hub access is in it: the worker sets
    ``HF_HUB_OFFLINE`` once, before the first import."""
    if len(plan.launches) != 1 or plan.files:
        return None
    launch = plan.launches[0]
    argv = tuple(launch.argv)
    if launch.processes != 1 or launch.wait or argv[-len(WORKER):] != WORKER:
        return None
    fixed = [*argv[:-1], *launch.env.values(), launch.cwd]
    if any(RUN_DIR in t or FREE_PORT in t for t in fixed):
        return None
    return (plan.backend, plan.engine, argv, tuple(sorted(launch.env.items())), launch.cwd, plan.job.hub,
            plan.job.device.adapter)


def groups(plans: Sequence[Plan | None]) -> list[list[int]]:
    """Indexes of ``plans`` in order, consecutive plans of one signature grouped (a None plan,
    or one without a signature, alone): each group is one worker process."""
    out: list[list[int]] = []
    last = None
    for i, p in enumerate(plans):
        sig = signature(p) if p is not None else None
        if sig is not None and out and sig == last:
            out[-1].append(i)
        else:
            out.append([i])
        last = sig
    return out


class SharedWorker:
    """The worker process serving the runs of a job list, from the first job it lists; the first
    ``RunHandle`` to need it starts it (``take``), the later ones adopt ``proc``."""

    def __init__(self, jobs_file: Path) -> None:
        self.jobs_file = jobs_file
        self.proc: subprocess.Popen | None = None
        #: the command as started (the first run's launch, with the job list for its job)
        self.launch: ResolvedLaunch | None = None

    def take(self, launch: ResolvedLaunch) -> ResolvedLaunch:
        """The first run's resolved launch, reading the job list instead of its ``job.json``."""
        self.launch = replace(launch, argv=(*launch.argv[:-1], str(self.jobs_file)))
        return self.launch

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def close(self, grace_s: float) -> None:
        """Wait for the process to end (it exits after its last job, or after a stop), SIGKILL
        its group after ``grace_s``, and reap it."""
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            procgroup.signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        procgroup.reap([self.proc.pid], timeout_s=1.0)


@dataclass
class _Run:
    plan: Plan
    run_dir: Path
    job: WorkerJob
    values: dict[str, str]
    handle: RunHandle | None = None
    #: this process's claim on the run folder (``accelctl.run.store.ownership``), handed to its handle
    owner: Ownership | None = None


class SharedRuns:
    """The runs of plans that share a worker (``signature`` equal), supervised one after the other.

    All run folders are written at once (the worker reads each job when it gets to it); ``start``
    begins the supervision of the next run (in order) and returns its ``RunHandle``; ``close``
    ends what is left (see the module doc)."""

    def __init__(self, plans: Sequence[Plan], *, source_text: str | None, spec_jsons: Sequence[Any],
                 runs_root: Any = None, grace_s: float = DEFAULT_GRACE_S) -> None:
        sigs = {signature(p) for p in plans}
        if None in sigs or len(sigs) != 1:
            raise ValueError("these plans cannot share a worker process (their stacks differ)")
        self.grace_s = grace_s
        self.runs: list[_Run] = []
        self.worker: SharedWorker | None = None
        self._next = 0
        try:
            for p, spec_json in zip(plans, spec_jsons):
                run = _Run(p, store.new_run_dir(p.workload, p.target, runs_root), p.job, run_values(p))
                self.runs.append(run)
                run.owner = claim(run.run_dir)
                run.job = store.write_inputs(run.run_dir, p, source_text=source_text, spec_json=spec_json,
                                             events_dir=run.run_dir, run_values=run.values)
                # queued runs name their runner too: a runner killed before it reached them leaves
                # runs that the next reader finishes (runner lost), never ones "incomplete" for ever
                store.write_runner(run.run_dir, supervision.identity(), [])
        except OSError as exc:
            self._remove(self.runs)
            name = Path(exc.filename).name if getattr(exc, "filename", None) else "a run folder"
            raise store.RunStoreError(f"run store: {exc.strerror or exc} writing {name}") from exc
        except BaseException:
            self._remove(self.runs)
            raise

    def _new_worker(self, first: int) -> tuple[SharedWorker, OSError | None]:
        """A job list of the runs from ``first`` on, in that run's folder; with the error that kept
        it from being written (a full disk: the worker is then never started)."""
        run_dir = self.runs[first].run_dir
        jobs = JobList(tuple(QueuedJob(job=str(r.run_dir / store.JOB_FILE), log=str(r.run_dir / store.LOG_FILE))
                             for r in self.runs[first:]))
        path = run_dir / JOBS_FILE
        try:
            with open(path, "w", encoding="utf-8", opener=store_opener) as fh:
                fh.write(jobs.to_json())
        except OSError as exc:
            path.unlink(missing_ok=True)  # never half a job list
            return SharedWorker(path), exc
        return SharedWorker(path), None

    def start(self, sinks: Iterable[Any] = ()) -> RunHandle:
        """Supervise the next run: in the running worker, or -- when the worker has ended before
        reaching this job (it died in an earlier one) -- in a fresh worker for this job on.  A job
        list the store cannot take (a full disk) fails that run as a run of its own fails on it:
        ``store_error``, "run store: No space left on device writing jobs.json"; the next run
        tries again."""
        run = self.runs[self._next]
        unwritten = None
        if self.worker is None or (not self.worker.running() and not _has_events(run.run_dir)):
            if self.worker is not None:
                self.worker.close(0.0)
            self.worker, unwritten = self._new_worker(self._next)
        self._next += 1
        run.handle = RunHandle(run.plan, run.run_dir, run.job, sinks, self.grace_s, run.values, None, (),
                               shared=self.worker, owner=run.owner)
        if unwritten is not None:
            run.handle.fail_store(unwritten, JOBS_FILE)  # halted: nothing starts, the run ends failed
        try:
            run.handle._start()
        except BaseException:
            run.handle._kill_all(signal.SIGKILL)
            raise
        return run.handle

    @property
    def pending(self) -> int:
        """Runs not started yet."""
        return len(self.runs) - self._next

    def stop(self) -> None:
        """Stop the worker whatever run it is in (SIGINT to its process group)."""
        if self.worker is not None and self.worker.running():
            procgroup.signal_group(self.worker.proc.pid, signal.SIGINT)  # type: ignore[union-attr]

    def close(self) -> list[str]:
        """End the batch: the worker reaped; a run the worker began but nobody supervised (a stop
        that came as it moved on to it) is supervised to its end here (its summary written); the
        run folders of jobs never started are removed.  Returns the workloads not run."""
        try:
            if self.worker is not None:
                self.worker.close(self.grace_s if self._next else 0.0)
            not_run = []
            for run in self.runs[self._next:]:
                if self.worker is not None and _has_events(run.run_dir):
                    self._next += 1
                    run.handle = RunHandle(run.plan, run.run_dir, run.job, (), self.grace_s, run.values, None, (),
                                           shared=self.worker, owner=run.owner)
                    run.handle._start()
                    run.handle.wait()
                else:
                    not_run.append(run.plan.workload)
                    self._remove([run])
            return not_run
        finally:
            for run in self.runs:
                if run.handle is not None and not run.handle.done:
                    run.handle.stop(grace_s=0.0)
                    run.handle.wait()

    @staticmethod
    def _remove(runs: Iterable[_Run]) -> None:
        for run in runs:
            shutil.rmtree(run.run_dir, ignore_errors=True)
            if run.owner is not None:
                run.owner.release()


def _has_events(run_dir: Path) -> bool:
    """The worker began this run's job (its rank file exists and is not empty)."""
    try:
        return any(p.stat().st_size > 0 for p in run_dir.glob("rank*.jsonl"))
    except OSError:
        return False
