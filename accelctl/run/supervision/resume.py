"""``accelctl run --resume RUN_ID``: continue a run from its newest complete checkpoint,
into the same run folder.

``prepare_resume`` checks and readies the folder; ``accelctl.api.resume`` launches the run's stored
plan into it (``runner.launch(into=...)``) and the workers go on after the checkpoint's step.
Refused when another ``accelctl`` owns the folder (exit 2, nothing touched), the run completed, a
process of it still lives, it has no complete checkpoint, its folders are not this user's alone
(``accelctl.private_files``), or the workload file changed since.  Readying moves the previous
attempt's ``rank<N>.jsonl`` and ``summary.json`` to ``attempts/<n>/``; ``events.jsonl`` keeps
every line, and the final summary counts re-done steps once (``resume_prior_events``).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

from accelctl import private_files
from accelctl.contract import checkpoint as layout
from accelctl.contract import supervision
from accelctl.contract.events import Event, RunFailed, RunFinished, RunResumed, StepMetrics
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Plan
from accelctl.dsl.source import read_source
from accelctl.errors import RunError, WorkloadError
from accelctl.run import store
from accelctl.run.store import storefiles
from accelctl.run.store.ownership import Ownership, claim
from accelctl.language import settings

ATTEMPTS_DIR = "attempts"


@dataclass(frozen=True)
class ResumePoint:
    run_dir: Path
    plan: Plan
    job: WorkerJob
    #: the checkpoint's step (the run goes on at step + 1) and folder
    step: int
    checkpoint: Path
    #: the run's events up to ``step``, for the summary
    prior_events: list[Event] = field(repr=False, default_factory=list)
    #: this process's claim on the run folder, handed to the launch (``runner.launch(owner=...)``)
    owner: Ownership | None = field(repr=False, compare=False, default=None)


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def live_processes(job_path: Path) -> list[int]:
    """Pids whose command line names ``job_path`` (a worker or launcher of the run); [] where
    no process table can be read."""
    import psutil

    needle = str(job_path)
    pids = []
    try:
        for proc in psutil.process_iter(["cmdline"]):
            if proc.pid != os.getpid() and any(needle in arg for arg in proc.info["cmdline"] or ()):
                pids.append(proc.pid)
    except psutil.Error:
        return pids
    return pids


def resume_prior_events(events: list[Event], step: int) -> list[Event]:
    """The events of earlier attempts that the summary keeps when resuming at ``step``.

    Replayed in order: a ``RunResumed`` of a rank drops that rank's step events after its
    step (they are run again); then every step after ``step``, every event later than
    rank 0's step ``step``, and every ``RunFailed``/``RunFinished`` of an ended attempt go.
    """
    kept: list[Event] = []
    for e in events:
        if isinstance(e, RunResumed):
            kept = [k for k in kept if not (isinstance(k, StepMetrics) and k.rank == e.rank and k.step > e.step)]
        kept.append(e)
    cut = max((e.time_unix_s for e in kept if isinstance(e, StepMetrics) and e.rank == 0 and e.step == step),
              default=None)
    out = []
    for e in kept:
        if isinstance(e, (RunFailed, RunFinished)):
            continue
        if isinstance(e, StepMetrics):
            if e.step <= step:
                out.append(e)
        elif cut is None or getattr(e, "time_unix_s", 0.0) <= cut:
            out.append(e)
    return out


def _refuse(run_id: str, why: str) -> RunError:
    return RunError(f"cannot resume run {run_id}: {why}")


def check_workload_unchanged(run_dir: Path, workload_file: str | Path | None) -> None:
    """The workload file as it is now must hash as the run's stored ``workload.wl``."""
    stored = run_dir / store.WORKLOAD_FILE
    if not stored.is_file():
        raise _refuse(run_dir.name, f"it has no {store.WORKLOAD_FILE} to compare the workload with")
    path = Path(workload_file) if workload_file else Path(store.read_json(run_dir / store.SPEC_FILE).get("path", ""))
    try:
        now = read_source(path)  # never a FIFO or a device, bounded (accelctl.dsl.source)
    except WorkloadError as exc:
        raise _refuse(run_dir.name, f"cannot read its workload file {str(path)!r} ({exc}); give it: "
                                    f"accelctl run FILE --resume {run_dir.name}") from None
    before, why = storefiles.read_text(stored)  # a regular file of the run folder, bounded
    if before is None:
        raise _refuse(run_dir.name, f"its {store.WORKLOAD_FILE} cannot be read ({why})")
    sets = settings.recorded(before)
    if sets:  # the run was started with --set: the same settings written into the file as it is now
        try:
            now = settings.applied(str(path), now, settings.parse_sets(sets))
        except WorkloadError as exc:
            raise _refuse(run_dir.name, f"its --set {' '.join(sets)} no longer applies to {path} ({exc})") from None
    if sha256_text(now) != sha256_text(before):
        raise _refuse(run_dir.name, f"the workload file {path} changed since the run started (sha256 "
                                    f"{sha256_text(now)[:12]} now, {sha256_text(before)[:12]} then); a resumed run "
                                    f"is the run as planned: start a new run for the changed workload")


def prepare_resume(run_id: str, runs_root: str | os.PathLike[str] | None = None,
                   workload_file: str | Path | None = None) -> ResumePoint:
    """Check that run ``run_id`` can be resumed, ready its folder, return where it goes on.

    The folder is claimed first (``accelctl.run.store.ownership``): a run that another process runs
    or resumes is refused at once (``RunBusy``, exit 2), before anything in it is checked or
    moved; the claim travels in the ``ResumePoint`` to the launch, and is given up on a refusal."""
    try:
        found = store.load_run(run_id, runs_root)
    except (store.RunStoreError, OSError) as exc:
        raise RunError(f"cannot resume: {exc}") from None
    problem = private_files.folder_problem(found.path)  # before the claim writes into it
    if problem:
        raise _refuse(found.path.name, f"its folder is not this user's alone ({problem}): a checkpoint "
                                       "others could have written is not loaded")
    owner = claim(found.path)
    try:
        from accelctl.run.store import lostrun

        lostrun.keep(found.path)  # the next owner writes a lost attempt's result before archiving it
        return _prepare_owned(store.read_run(found.path), owner, workload_file)
    except BaseException:
        owner.release()
        raise


def _prepare_owned(record: store.RunRecord, owner: Ownership, workload_file: str | Path | None) -> ResumePoint:
    run_dir, name = record.path, record.path.name
    if record.unreadable:  # a FIFO, a link, a file of the wrong shape: nothing of it is read further
        raise _refuse(name, f"it is {record.status}")
    if record.status == "ok":
        raise _refuse(name, "it completed (status ok); there is nothing left to run")
    job_path = run_dir / store.JOB_FILE
    for stored in (run_dir / store.PLAN_FILE, job_path):  # what the resumed run runs
        problem = private_files.file_problem(stored)
        if problem:
            raise _refuse(name, f"its {stored.name} is not this user's alone ({problem})")
    alive = live_processes(job_path)
    if alive:
        raise _refuse(name, f"it is still running (pid {', '.join(map(str, alive))}); stop it first")
    try:
        plan = Plan.from_dict(store.read_json(run_dir / store.PLAN_FILE))
        job = WorkerJob.load(job_path)
    except (OSError, ValueError, TypeError, KeyError) as exc:
        raise _refuse(name, f"its plan or job cannot be read ({exc})") from None
    if job.checkpoint.every <= 0:
        raise _refuse(name, "it was run without checkpoints (add checkpoint { every = N steps } to the workload "
                            "for the next run)")
    folder = layout.folder_of(job)
    found = layout.latest(folder)
    if found is None:
        raise _refuse(name, f"it has no complete checkpoint in {folder} (it ended before step "
                            f"{job.checkpoint.every}, its first)")
    step, where = found
    for checked in dict.fromkeys((folder, where)):  # a checkpoint folder of its own (checkpoint { dir = ... })
        problem = private_files.folder_problem(checked)
        if problem:
            raise _refuse(name, f"its checkpoint folder is not this user's alone ({problem})")
    check_workload_unchanged(run_dir, workload_file)
    events, why = record.checked_events()
    if why:
        raise _refuse(name, f"it is {store.UNREADABLE}: {why}")
    prior = resume_prior_events(events, step)
    # this process supervises the run from here on: a reader meanwhile (no summary once it is
    # archived) sees a live runner, not a run whose runner was lost
    try:
        store.write_runner(run_dir, supervision.identity(), [])
        archive_attempt(run_dir)
    except OSError as exc:  # a full disk, a store that is not ours to write
        raise _refuse(name, f"run store: {exc.strerror or exc} readying its folder") from None
    return ResumePoint(run_dir=run_dir, plan=plan, job=job, step=step, checkpoint=where, prior_events=prior,
                       owner=owner)


def archive_attempt(run_dir: Path) -> Path:
    """Move the ended attempt's rank files and summary to ``attempts/<n>/``."""
    base = run_dir / ATTEMPTS_DIR
    base.mkdir(exist_ok=True)
    n = 1 + sum(1 for p in base.iterdir() if p.is_dir())
    dest = base / str(n)
    dest.mkdir()
    for path in [*run_dir.glob("rank*.jsonl"), run_dir / store.SUMMARY_FILE]:
        if path.exists():
            os.replace(path, dest / path.name)
    return dest
