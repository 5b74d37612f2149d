"""Following a run from any process: ``accelctl status``, ``logs`` and ``attach``.

Everything is read from the run folder, never from the process that runs it: ``events.jsonl``
(the runner's merged events) for the step, phase and ETA and for ``attach``'s console stream
(the same ``ConsoleSink`` a foreground run prints through), ``worker.log`` for ``logs``.  A
file is followed only while it is a regular file (no link followed, no FIFO opened), by
complete lines (``tail.JsonlTail``); following ends when the run is no longer in progress
(``liveness``), after a last read.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelctl.contract import boundedfile
from accelctl.contract import scheduler as scheduler_file
from accelctl.contract.events import PhaseChanged, StepMetrics
from accelctl.contract.job import WorkerJob
from accelctl.run import store
from accelctl.run.store import liveness, storefiles
from accelctl.run.store import scheduled_job
from accelctl.run.viewers import eta
from accelctl.run.tail import JsonlTail, parse_line

POLL_S = 0.2


@dataclass(frozen=True)
class RunState:
    """One run as ``accelctl status`` shows it."""

    id: str
    workload: str
    target: str
    #: running, or the stored status (ok, failed, stopped, failed (runner lost), ...)
    state: str
    #: rank 0's steps so far, of ``total`` (warm-up and measured; None when unknown)
    step: int
    total: int | None
    phase: str
    #: seconds left (steps left x the median step time so far); None when unknown or ended
    eta_s: float | None
    #: the live process supervising it, or None
    supervisor_pid: int | None
    #: why it counts as running ("" once ended)
    why: str = ""
    #: a cluster's job: ``<handle> <the scheduler's word> (<the one state>)``, asked now ("" for none)
    scheduler: str = ""

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def line(self) -> str:
        of = f"/{self.total}" if self.total else ""
        parts = [self.id, self.state, f"step {self.step}{of}"]
        parts += [self.phase] if self.phase else []
        parts += [f"eta {eta.duration(self.eta_s)}"] if self.eta_s is not None else []
        parts += [f"supervisor pid {self.supervisor_pid}"] if self.supervisor_pid else []
        parts += [self.scheduler] if self.scheduler else []
        return "  ".join(parts)


def _job(run_dir: Path) -> WorkerJob | None:
    data = store.read_json(run_dir / store.JOB_FILE)
    try:
        return WorkerJob.from_dict(data) if data else None
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


def total_steps(job: WorkerJob | None) -> int | None:
    """The steps rank 0 reports in all: warm-up plus the measured rounds."""
    m = job.measure if job is not None else None
    return m.warmup + m.steps * m.repeat if m is not None else None


def state_of(record: store.RunRecord) -> RunState:
    """``record``'s state now: running or its stored status, rank 0's step, phase and ETA."""
    why = liveness.in_progress(record)
    events = record.events()
    times = [e.step_time_s for e in events if isinstance(e, StepMetrics) and e.rank == 0]
    phases = [e.phase for e in events if isinstance(e, PhaseChanged) and e.rank == 0]
    total = total_steps(_job(record.path))
    left = (total - len(times)) if total is not None else 0
    eta_s = left * eta.median(times) if why and times and left > 0 else None
    return RunState(record.id, record.workload, record.target, "running" if why else record.status, len(times),
                    total, phases[-1] if phases else "", eta_s, liveness.supervisor(record.path) if why else None, why,
                    scheduler_state(record.path))


def scheduler_state(run_dir: Path) -> str:
    """The run's cluster job as its scheduler describes it now (the stored word when it cannot be asked)."""
    found = scheduled_job.describe(run_dir)
    if found is None:
        return ""
    handle, now, why = found
    if now is not None:
        return f"{handle} {now.raw} ({now.state.value})"
    stored = scheduler_file.read(run_dir)
    last = f"{stored.state} ({stored.app_state or '?'})" if stored is not None else "?"
    return f"{handle} {last}, stored: " + (f"the scheduler could not be asked: {why}" if why else
                                            "the scheduler no longer knows the job")


def _regular(path: Path) -> bool:
    return boundedfile.problem(path, storefiles.MAX_INT) is None


def follow_lines(run_dir: Path, name: str, follow: bool, stopped: Callable[[], bool] = lambda: False) -> Iterator[bytes]:
    """The complete lines of ``run_dir/name``; with ``follow``, those written later too, until
    the run is no longer in progress (or ``stopped()``).  A file that is not a regular one (a
    link, a FIFO) is never opened: no lines."""
    path = run_dir / name
    tail: JsonlTail | None = None
    try:
        while True:
            going = follow and bool(liveness.in_progress(store.read_run(run_dir)))
            if tail is None and _regular(path):
                tail = JsonlTail(path)
            if tail is not None:
                yield from tail.each_line(final=not going)
            if not going or stopped():
                return
            time.sleep(POLL_S)
    finally:
        if tail is not None:
            tail.close()


def rank_of(line: bytes, world: int) -> int | None:
    """Which rank wrote a ``worker.log`` line: torch's ``[rankN]:`` tag; every line of a
    one-process run is rank 0's; None for a launcher's own line."""
    if line.startswith(b"[rank"):
        head, sep, _ = line[5:].partition(b"]:")
        if sep and head.isdigit():
            return int(head)
    return 0 if world == 1 else None


def world_size(record: store.RunRecord) -> int:
    """The processes of the run's launches in all (1 when the plan cannot be read)."""
    plan = record.plan()
    return sum(max(1, ln.processes) for ln in plan.launches) if plan is not None and plan.launches else 1


@dataclass(frozen=True)
class Ended:
    """The end of a run as a sink's ``close`` reads it."""

    status: str
    run_dir: Path
    summary: dict[str, Any]


def attach(record: store.RunRecord, sink: Any, stopped: Callable[[], bool] = lambda: False) -> Ended | None:
    """Replay ``record``'s events into ``sink`` from the start, then follow them while the run
    goes on; at its end close the sink with its summary and return it.  None when ``stopped()``
    first (the viewer detached: the run goes on)."""
    for raw in follow_lines(record.path, store.EVENTS_FILE, True, stopped):
        _, event = parse_line(raw)
        if event is not None:
            sink.on_event(event)
    if stopped():
        return None
    final = store.read_run(record.path)
    if liveness.in_progress(final):
        return None
    ended = Ended(final.status.split(" ")[0], final.path, final.summary)
    sink.close(ended)
    return ended
