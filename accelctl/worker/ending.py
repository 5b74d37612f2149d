"""How a worker's job ends: the one record its rank writes last (``RunFinished`` or
``RunFailed``), decided and written whatever stop signal lands meanwhile.

A stop (SIGINT, SIGTERM, a lost runner) is a ``KeyboardInterrupt`` in the loop (``StopSignals``).
Once the job's end is known, stops are *held* until the process ends or the next job of a shared
worker starts (``StopSignals.resume``); a stop that lands while the job's own exception is being
handled still records that failure (its ``__context__``); a stop alone is ``stopped``
(``runner_lost`` when the runner is gone).  The first statement of each ``except`` below holds
the stops with a plain attribute store: CPython runs signal handlers only at a call, a backward
jump or a function's start, so no stop lands before it.
"""

from __future__ import annotations

import signal
import traceback
from collections.abc import Callable
from typing import NamedTuple

from accelctl.contract.events import RunFailed, RunFinished
from accelctl.contract.ids import WORKER_EXCEPTION as EXIT_EXCEPTION
from accelctl.contract.ids import WORKER_NAN as EXIT_NAN
from accelctl.contract.ids import WORKER_STOPPED as EXIT_STOPPED
from accelctl.worker.checkpoint import CheckpointDiskFull
from accelctl.worker.context import NonFiniteLoss, SequenceTooLong


class Ending(NamedTuple):
    """The exit code of a job and the event that says how it ended."""

    code: int
    event: RunFinished | RunFailed


class StopSignals:
    """The SIGINT / SIGTERM handler: a ``KeyboardInterrupt`` while the job runs; held (noted in
    ``held``, not raised) once its end is being recorded."""

    __slots__ = ("recording", "held", "_before")

    def __init__(self) -> None:
        #: the job's end is known: stops are held
        self.recording = False
        #: the first stop signal held (0: none)
        self.held = 0
        self._before: dict[int, object] = {}

    def __call__(self, signum: int, frame: object) -> None:
        if self.recording:
            self.held = self.held or signum
            return
        raise _interrupt(signum)

    def install(self) -> "StopSignals":
        """Handle SIGTERM, and SIGINT unless it is ignored (Python's own handler otherwise)."""
        for sig in (signal.SIGTERM, signal.SIGINT):
            before = signal.getsignal(sig)
            if sig == signal.SIGTERM or before is signal.default_int_handler:
                self._before[sig] = before
                signal.signal(sig, self)
        return self

    def uninstall(self) -> None:
        """SIGTERM back to its default (it ends the process), SIGINT to Python's handler."""
        for sig, before in self._before.items():
            signal.signal(sig, signal.SIG_DFL if sig == signal.SIGTERM else before)

    def resume(self) -> None:
        """Stops raise again (a shared worker's next job); one held meanwhile is raised now."""
        self.recording = False
        held, self.held = self.held, 0
        if held:
            raise _interrupt(held)


def _interrupt(signum: int) -> KeyboardInterrupt:
    """SIGINT's ``KeyboardInterrupt()`` as Python raises it; "signal 15" for a SIGTERM."""
    return KeyboardInterrupt() if signum == signal.SIGINT else KeyboardInterrupt(f"signal {signum}")


def end_of(body: Callable[[], Ending], stops: StopSignals, rank: int, runner_lost: Callable[[], bool],
           prefix: str = "") -> Ending:
    """Run the job (``body``: its ending when it runs to the end) and return how it ended, stops
    held from the moment that is known (``stops.recording``, left set: the caller writes the
    record, then ``stops.resume()`` or exits).  ``prefix`` starts a crash's message."""
    try:
        try:
            ending = body()
            stops.recording = True
            return ending
        except (Exception, KeyboardInterrupt) as exc:
            stops.recording = True
            return failure(exc, rank, runner_lost, prefix)
    except KeyboardInterrupt as stop:  # landed as the job's own end was being handled: that end first
        stops.recording = True
        own = stop.__context__
        return failure(own if isinstance(own, (Exception, KeyboardInterrupt)) else stop, rank, runner_lost, prefix)


def failure(exc: BaseException, rank: int, runner_lost: Callable[[], bool], prefix: str = "") -> Ending:
    """The record of a job ended by ``exc``."""
    if isinstance(exc, NonFiniteLoss):
        return Ending(EXIT_NAN, RunFailed(reason="nan_loss", message=str(exc), rank=rank, step=exc.step))
    if isinstance(exc, SequenceTooLong):
        return Ending(EXIT_EXCEPTION, RunFailed(reason=exc.reason, message=str(exc), rank=rank))
    if isinstance(exc, CheckpointDiskFull):  # named, not the writer's own words (torch: "unexpected pos")
        return Ending(EXIT_EXCEPTION, RunFailed(reason="disk_full", message=str(exc), rank=rank, step=exc.step))
    if isinstance(exc, KeyboardInterrupt):
        said = str(exc) or "SIGINT"  # SIGINT raises a KeyboardInterrupt without words
        if runner_lost():
            return Ending(EXIT_STOPPED, RunFailed(reason="runner_lost", message=f"the runner is gone ({said})",
                                                  rank=rank))
        return Ending(EXIT_STOPPED, RunFailed(reason="stopped", message=f"stopped ({said})", rank=rank))
    return Ending(EXIT_EXCEPTION, RunFailed(reason="exception", message=f"{prefix}{type(exc).__name__}: {exc}",
                                            rank=rank, traceback="".join(traceback.format_exception(exc))))
