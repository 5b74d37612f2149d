"""Engines as schedulers: submit a plan's job, follow it, cancel it -- from any process.

An engine past one machine renders its submission (``wrap``) and keeps what it submits as data in
the plan (``Plan.request``, never re-read from files); its scheduler (TorchX's split) does the
rest: ``dryrun(plan)``; ``submit(request, run_dir, env)`` -> an ``AppHandle``, kept in
``scheduler.json``; ``describe(handle)`` -> one ``AppState`` mapped by the scheduler's ``STATES``
(None once the job is forgotten); ``cancel(handle)``, idempotent and needing only the handle, so
``accelctl cancel`` works after the supervisor is gone; ``log_iter``.  ``cancel_and_wait`` and
``record`` are written once here; the run's supervisor follows a job with ``accelctl.run.supervision.scheduled``.
"""

from __future__ import annotations

import enum
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelctl.contract import scheduler as scheduler_file
from accelctl.errors import first_line
from accelctl.language import plugins
from accelctl.frozen import replace


class AppState(str, enum.Enum):
    """One state for every scheduler's job."""

    SUBMITTED = "SUBMITTED"  # accepted, not yet seen by the scheduler's own queue
    PENDING = "PENDING"  # queued, held, configuring, waiting for nodes or pods
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    UNKNOWN = "UNKNOWN"  # a word the table does not know (a newer scheduler's)

    @property
    def terminal(self) -> bool:
        """The job runs nothing any more."""
        return self in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED)


_HANDLE = re.compile(r"(?P<scheduler>[a-z_]+)://(?P<where>[^/\s]*)/(?P<job>[^\s]+)")


@dataclass(frozen=True)
class AppHandle:
    """``<scheduler>://<where>/<job id>``: where the job is (cluster, namespace, queue) and its id."""

    scheduler: str
    where: str
    job_id: str

    def __str__(self) -> str:
        return f"{self.scheduler}://{self.where}/{self.job_id}"

    @classmethod
    def parse(cls, text: str) -> "AppHandle":
        m = _HANDLE.fullmatch(text.strip())
        if m is None:
            raise ValueError(f"{text!r} is not a scheduler handle (<scheduler>://<where>/<job id>)")
        return cls(m["scheduler"], m["where"], m["job"])


@dataclass(frozen=True)
class Described:
    """A job as the scheduler describes it now: the one state, the scheduler's own word for
    it, the job's exit code (None while it runs or when the scheduler gives none), a reason."""

    state: AppState
    raw: str
    exit_code: int | None = None
    message: str = ""


class Scheduler:
    name: str = ""
    #: the scheduler's own state words -> AppState (every word its documentation lists)
    STATES: Mapping[str, AppState] = {}
    #: seconds between two ``describe`` calls of a follow loop
    poll_s: float = 1.0
    #: seconds ``cancel_and_wait`` waits for the job to run nothing any more
    cancel_timeout_s: float = 120.0
    #: what is recorded of a job the scheduler no longer knows
    gone: Described = Described(AppState.UNKNOWN, "gone")

    def state_of(self, raw: str) -> AppState:
        return self.STATES.get(raw, AppState.UNKNOWN)

    def dryrun(self, plan: Any) -> dict:
        """The request ``submit`` takes: kept in the plan as data when the engine wrapped it."""
        if not isinstance(getattr(plan, "request", None), dict):
            raise ValueError(f"plan of {plan.workload}/{plan.target} holds no {self.name} request")
        return plan.request

    def submit(self, request: dict, run_dir: Path, env: Mapping[str, str]) -> AppHandle:
        raise NotImplementedError

    def describe(self, handle: AppHandle) -> Described | None:
        raise NotImplementedError

    def cancel(self, handle: AppHandle) -> None:
        raise NotImplementedError

    def log_iter(self, handle: AppHandle, run_dir: Path, done: Callable[[], bool]) -> Iterator[str]:
        """The job's output, line by line, until ``done()`` (nothing by default)."""
        return iter(())


def has_scheduler(name: str) -> bool:
    """Engine (or handle scheme) ``name`` submits its job to a scheduler (its row names one)."""
    return name in plugins.ENGINES and bool(plugins.engine_row(name).scheduler)


def scheduler_for(name: str) -> Scheduler:
    """The scheduler of engine (or handle scheme) ``name``; KeyError for an engine without one."""
    if not has_scheduler(name):
        raise KeyError(name)
    return plugins.resolve(plugins.engine_row(name).scheduler)()


def record(run_dir: Path, handle: AppHandle, described: Described | None, fallback: str = "") -> None:
    """The job's handle and state into the run folder's ``scheduler.json``."""
    raw = described.raw if described is not None else fallback
    code = described.exit_code if described is not None else None
    state = described.state.value if described is not None else ""
    scheduler_file.write(run_dir, scheduler_file.SchedulerJob(handle.scheduler, handle.job_id, raw, code,
                                                             handle=str(handle), app_state=state))


def cancel_and_wait(sched: Scheduler, handle: AppHandle, timeout_s: float | None = None,
                    say: Callable[[str], None] = lambda line: None) -> Described:
    """Cancel the job and wait until it runs nothing any more (``describe`` terminal, or the
    job forgotten: the scheduler's ``gone``, cancelled); the last description, also when
    ``timeout_s`` ran out first (UNKNOWN when there was none)."""
    sched.cancel(handle)
    deadline = time.monotonic() + (sched.cancel_timeout_s if timeout_s is None else timeout_s)
    last = None
    while True:
        try:
            last = sched.describe(handle)
        except Exception as exc:  # noqa: BLE001 - a blip (throttling, a network error): ask again
            say(f"accelctl: describing {handle}: {first_line(exc, 200, None)}")
        else:
            if last is None or last.state.terminal:
                done = last or replace(sched.gone, state=AppState.CANCELLED)
                say(f"accelctl: {handle} cancelled ({done.raw})")
                return done
        if time.monotonic() > deadline:
            say(f"accelctl: {handle} still {last.raw if last else '?'} after the cancel and its wait")
            return last or Described(AppState.UNKNOWN, "?")
        time.sleep(sched.poll_s)
