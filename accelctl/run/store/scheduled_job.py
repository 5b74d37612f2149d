"""A run's job on a cluster, as any process finds it: from the handle in ``scheduler.json``.

``accelctl status`` asks the scheduler for the job's state now (``describe``), and ``accelctl
cancel`` cancels a job whose supervisor is gone (``cancel_and_wait``) -- neither needs the
process that submitted it.
"""

from __future__ import annotations

from pathlib import Path

from accelctl import exitcodes
from accelctl.contract import scheduler as scheduler_file
from accelctl.engines.scheduler import AppHandle, Described, Scheduler, cancel_and_wait, has_scheduler, \
    record, scheduler_for
from accelctl.errors import RunError, first_line


def handle_of(run_dir: Path) -> AppHandle | None:
    """The handle ``scheduler.json`` holds, or None (none, not a handle, a scheduler accelctl lacks)."""
    job = scheduler_file.read(run_dir)
    try:
        handle = AppHandle.parse(job.handle) if job is not None and job.handle else None
    except ValueError:
        return None
    return handle if handle is not None and has_scheduler(handle.scheduler) else None


def describe(run_dir: Path) -> tuple[AppHandle, Described | None, str] | None:
    """(handle, the scheduler's description now or None when it forgot the job, why it could not
    be asked: "" when it was); None for a run without a scheduler's job."""
    handle = handle_of(run_dir)
    if handle is None:
        return None
    try:
        return handle, scheduler_for(handle.scheduler).describe(handle), ""
    except Exception as exc:  # noqa: BLE001 - no client, no credentials, no cluster: said, not raised
        return handle, None, f"{type(exc).__name__}: {first_line(exc, 160)}"


def live(run_dir: Path) -> tuple[Scheduler, AppHandle] | None:
    """The run's job when the scheduler says it still runs (or could not be asked)."""
    found = describe(run_dir)
    if found is None:
        return None
    handle, now, why = found
    if now is None and not why or now is not None and now.state.terminal:
        return None
    return scheduler_for(handle.scheduler), handle


def cancel(run_dir: Path, sched: Scheduler, handle: AppHandle) -> Described:
    """Cancel the job, wait until it runs nothing, record its state in ``scheduler.json``.  A
    scheduler that cannot be asked from here (no client, no credentials, no cluster): RunError."""
    try:
        done = cancel_and_wait(sched, handle)
    except Exception as exc:  # noqa: BLE001 - said in one line, the job named: never a traceback
        why = first_line(exc, 200)
        raise RunError(f"{handle} could not be cancelled from here: {type(exc).__name__}: {why}; cancel it with "
                       f"{sched.name}'s own tools", exit_code=exitcodes.FAILED) from None
    record(run_dir, handle, done)
    return done
