"""A plan's job on a scheduler, followed by the run's supervisor in its own process.

``start`` submits ``Plan.request`` through the engine's scheduler (``accelctl.engines.scheduler``)
from a thread and returns a ``ScheduledJob``, held by the runner where it holds a ``Popen``:
``poll``/``wait`` give the job's exit code once it has ended, ``send_signal`` cancels it.  The one
follow loop of every scheduler: ``describe`` every ``poll_s`` (each change a ``worker.log`` line and
a new ``scheduler.json``), the job's output copied into ``worker.log``, and on a stop signal
``cancel_and_wait`` then exit ``128 + signal``.  The handle is in ``scheduler.json`` first, so
``accelctl cancel`` reaches the job even when this process was SIGKILLed.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from accelctl.contract import envnames
from accelctl.engines.scheduler import AppHandle, AppState, Described, Scheduler, cancel_and_wait, record, \
    scheduler_for
from accelctl.errors import first_line
from accelctl.private_files import store_opener
from accelctl.run import procgroup

#: how long the end of a job waits for the rest of its output
LOG_DRAIN_S = 10.0


class ScheduledJob:
    """A submitted job, as the runner sees a launch's process (no pid: it runs elsewhere)."""

    pid = None

    def __init__(self, sched: Scheduler, request: dict, run_dir: Path, env: Mapping[str, str], log_path: Path):
        self.sched, self.request, self.run_dir, self.log_path = sched, request, run_dir, log_path
        # the job does not live and die with this process: `accelctl cancel` ends it, from anywhere
        self.env = {k: v for k, v in env.items() if k != envnames.RUNNER}
        self.env["ACCELCTL_PYTHON"] = sys.executable  # the nodes' interpreter (a shared environment)
        self.returncode: int | None = None
        self.handle: AppHandle | None = None
        self._signal = 0
        self._wake = threading.Event()
        self._ended = threading.Event()
        self._thread = threading.Thread(target=self._main, name=f"accelctl-{sched.name}-job", daemon=True)
        self._thread.start()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise subprocess.TimeoutExpired(f"{self.sched.name} job", timeout or 0)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, sig: int) -> None:
        """The runner's stop (SIGINT, then SIGTERM, SIGKILL): the first one cancels the job."""
        if not self._signal:
            self._signal = int(sig)
            self._wake.set()

    # -- the follow loop ------------------------------------------------------------------

    def _main(self) -> None:
        code = 1
        with open(self.log_path, "ab", buffering=0, opener=store_opener) as log:
            def say(line: str) -> None:
                log.write(f"{line}\n".encode("utf-8", "replace"))

            try:
                code = self._follow(say)
            except Exception as exc:  # noqa: BLE001 - the run must end, and the job with it
                say(f"accelctl: following the {self.sched.name} job failed: {type(exc).__name__}: {exc}")
                if self.handle is not None:
                    self._cancel(say)
            finally:
                self.returncode = code

    def _follow(self, say) -> int:
        t0 = time.time()
        try:
            self.handle = self.sched.submit(self.request, self.run_dir, self.env)
        except (OSError, RuntimeError, ValueError) as exc:
            say(f"accelctl: {self.sched.name}: {exc}")
            return 127 if isinstance(exc, FileNotFoundError) else 1
        say(f"accelctl: submitted {self.handle} ({time.time() - t0:.2f} s)")
        record(self.run_dir, self.handle, None, "SUBMITTED")
        last: Described | None = None
        logger: threading.Thread | None = None
        while True:
            if self._signal:
                say(f"accelctl: signal {self._signal}: cancelling {self.handle}")
                self._cancel(say)
                return 128 + self._signal
            try:
                now = self.sched.describe(self.handle)
            except Exception as exc:  # noqa: BLE001 - throttling, a network blip: ask again
                say(f"accelctl: describing {self.handle}: {first_line(exc, 200, None)}")
                self._wake.wait(self.sched.poll_s)
                continue
            if now is None:  # forgotten before we saw it end (or deleted by someone else)
                say(f"accelctl: {self.handle} is gone ({time.time() - t0:.2f} s)")
                record(self.run_dir, self.handle, self.sched.gone)
                return 0 if last is not None and last.state is AppState.SUCCEEDED else 1
            if last is None or now.raw != last.raw:
                why = f": {now.message}" if now.message and now.state.terminal else ""
                say(f"accelctl: {self.handle} {now.raw} ({now.state.value}){why} ({time.time() - t0:.2f} s)")
                record(self.run_dir, self.handle, now)
            last = now
            if logger is None and (now.state is AppState.RUNNING or now.state.terminal):
                logger = threading.Thread(target=self._copy_log, args=(log_writer(say),), daemon=True)
                logger.start()
            if now.state.terminal:
                self._ended.set()
                if logger is not None:
                    logger.join(LOG_DRAIN_S)
                return (now.exit_code or 0) if now.state is AppState.SUCCEEDED else (now.exit_code or 1)
            self._wake.wait(self.sched.poll_s)

    def _cancel(self, say) -> None:
        assert self.handle is not None
        done = cancel_and_wait(self.sched, self.handle, say=say)
        self._ended.set()
        record(self.run_dir, self.handle, done)

    def _copy_log(self, write) -> None:
        try:
            for line in self.sched.log_iter(self.handle, self.run_dir, self._ended.is_set):  # type: ignore[arg-type]
                write(line)
        except Exception as exc:  # noqa: BLE001 - the log is a courtesy; the job's state decides
            write(f"accelctl: the log of {self.handle} ended: {first_line(exc, 200, None)}")


def log_writer(say):
    return lambda line: say(line.rstrip("\n"))


def start(plan, run_dir: Path, env: Mapping[str, str], log_path: Path) -> ScheduledJob:
    """Submit ``plan``'s request (its engine's scheduler's ``dryrun``) and follow the job."""
    sched = scheduler_for(plan.engine)
    return ScheduledJob(sched, sched.dryrun(plan), run_dir, env, log_path)


def signal_launch(proc, sig: int) -> None:
    """A stop signal to a launch: a submitted job is cancelled, a process group signalled."""
    if isinstance(proc, ScheduledJob):
        proc.send_signal(sig)
    else:
        procgroup.signal_group(proc.pid, sig)
