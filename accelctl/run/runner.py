"""The runner: the only module of accelctl that starts processes.

``launch(plan, ...)`` materialises a plan into a run folder (``accelctl.run.store``),
starts every ``Launch`` in its own session (so a signal reaches the whole process
group: torchrun and all its workers), and returns a ``RunHandle`` at once.  Launches
start together, except that one marked ``wait`` must exit 0 before the launches after
it start (a pre-compilation pass).  One supervisor thread then, every ``POLL_S``:

1. tails every ``rank<N>.jsonl`` the workers append to (a partial last line waits for
   its newline), writes each event line to ``events.jsonl`` (flushed per line) and
   hands the typed event to every sink;
2. polls the processes: a process that exits non-zero without any ``RunFailed`` seen
   gets a synthesised ``RunFailed(reason="crashed")`` carrying the tail of
   ``worker.log``; any non-zero exit stops the other launches;
3. escalates a stop: SIGINT to each process group, SIGTERM after ``grace_s``,
   SIGKILL after twice ``grace_s``.  A rank that reported ``RunFailed`` while some
   process still runs ``grace_s`` later also starts this stop.

When every process has exited it drains the files a last time, makes sure no member of
the process groups is left, writes ``summary.json`` and calls each sink's ``close``.

Status: ``stopped`` when ``stop()`` was asked for (or a worker reported
``RunFailed(reason="stopped")``), else ``failed`` when any rank failed or crashed, else
``ok``.  Commands and environment are resolved by ``accelctl.run.commands``.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelctl.contract.events import Event, RunFailed
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Launch, Plan
from accelctl.run import procgroup, store
from accelctl.run.commands import (
    EVENTS_DIR_ENV,
    ResolvedLaunch,
    UnresolvedPlaceholder,
    launch_env,
    resolve_argv,
    resolve_launch,
    run_values,
)
from accelctl.run.sinks import FanOut
from accelctl.run.summary import build_summary
from accelctl.run.tail import RankFiles, parse_line

__all__ = ["EVENTS_DIR_ENV", "RunHandle", "RunResult", "launch", "launch_env", "resolve_argv"]

log = logging.getLogger("accelctl.run")

POLL_S = 0.05
DEFAULT_GRACE_S = 5.0
LOG_TAIL_LINES = 30


@dataclass(frozen=True)
class RunResult:
    #: ok, failed or stopped
    status: str
    run_dir: Path
    #: the content of summary.json
    summary: dict[str, Any] = field(repr=False)
    #: one per launch, in plan order; 127: the command could not be started; None: never
    #: started (an earlier launch failed, or the run was stopped first)
    returncodes: tuple[int | None, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# --------------------------------------------------------------------------- the handle


#: ``python -c`` prologue that puts SIGINT back to its default and execs the launch: an
#: ignored SIGINT is inherited across exec (``accelctl run &`` in a script, nohup, some CI
#: runners start it so), and then neither torchrun nor Python's KeyboardInterrupt would see
#: the runner's stop.  exec keeps the pid, so the launch's process group is unchanged.
SIGINT_DEFAULT = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "os.execv(sys.argv[1], sys.argv[2:])")


def with_default_sigint(argv, env: Mapping[str, str] | None = None) -> list[str]:
    """The launch's argv, started with SIGINT at its default whatever accelctl inherited
    (no ``preexec_fn``: the runner has threads).  Without an inherited SIG_IGN, or for a
    command that is not there (Popen itself then reports it, exit 127), as is."""
    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return list(argv)
    exe = shutil.which(argv[0], path=(env if env is not None else os.environ).get("PATH"))
    if exe is None:
        return list(argv)
    return [sys.executable, "-c", SIGINT_DEFAULT, exe, *argv]


class RunHandle:
    """A started run.  ``events()`` streams, ``wait()`` blocks for the result, ``stop()`` ends it."""

    def __init__(self, plan: Plan, run_dir: Path, job: WorkerJob, sinks: Iterable[Any] = (), grace_s: float = DEFAULT_GRACE_S,
                 values: Mapping[str, str] | None = None, only: Iterable[str] | None = None,
                 prior_events: Iterable[Event] = ()):
        self.plan = plan
        #: a resumed run's events before its resume point (``accelctl.run.resume``): in the summary
        self.prior_events = list(prior_events)
        #: the launches this runner starts (None: all); the others run elsewhere (one per node)
        self.only = None if only is None else frozenset(only)
        #: the placeholders picked once for this run ({free_port})
        self.values = dict(values or {})
        self.run_dir = run_dir
        self.run_id = run_dir.name
        self.job = job
        self.events_dir = run_dir
        self.grace_s = grace_s
        n = len(plan.launches)
        self.resolved: list[ResolvedLaunch | None] = [None] * n
        #: one per launch; None until started (and for ever when it never starts)
        self._procs: list[subprocess.Popen | None] = [None] * n
        self._rcs: list[int | None] = [None] * n  # 127: could not be started
        self._times: list[list[float]] = [[] for _ in range(n)]  # [start, end] unix seconds
        self._next = 0  # the next launch to start
        self._halted = False  # a failure or a stop: no further launch starts
        self._finishing = False
        self._sinks = FanOut(sinks)
        self._events: list[Event] = []
        self._cond = threading.Condition()
        self._lock = threading.RLock()
        self._files = RankFiles(run_dir)
        self._out = open(run_dir / store.EVENTS_FILE, "a", encoding="utf-8")  # noqa: SIM115
        self._started_at = time.time()
        self._failure: RunFailed | None = None
        self._stop_kind: str | None = None  # "user" or "failure"
        self._stop_at: float | None = None
        self._failed_at: float | None = None  # a worker reported a failure (not "stopped")
        self._sent: set[int] = set()
        self._result: RunResult | None = None
        self._thread = threading.Thread(target=self._supervise, name=f"accelctl-run-{self.run_id}", daemon=True)

    # -- public --------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs if p is not None]

    @property
    def done(self) -> bool:
        return self._result is not None

    def events(self) -> Iterator[Event]:
        """Every event of the run from its start, blocking for new ones until the run ends."""
        i = 0
        while True:
            with self._cond:
                while i >= len(self._events) and self._result is None:
                    self._cond.wait(0.1)
                batch = self._events[i:]
                if not batch and self._result is not None:
                    return
            i += len(batch)
            yield from batch

    def wait(self, timeout: float | None = None) -> RunResult:
        """Block until the run has ended and ``summary.json`` is written.

        ``KeyboardInterrupt`` while waiting stops the run (``stop()``), waits for the
        processes to end and *returns* the result, status ``stopped`` (callers map that
        to exit code 130); a second ``KeyboardInterrupt`` kills the process groups at
        once.  ``TimeoutError`` when ``timeout`` passes first (the run goes on).
        """
        try:
            self._wait_done(timeout)
        except KeyboardInterrupt:
            self.stop()
            while True:
                try:
                    self._wait_done(None)
                    break
                except KeyboardInterrupt:
                    self.stop(grace_s=0.0)
        assert self._result is not None
        return self._result

    def stop(self, grace_s: float | None = None) -> None:
        """Ask the run to end: SIGINT now, SIGTERM after ``grace_s``, SIGKILL after twice
        ``grace_s``.  Returns at once; ``wait()`` gives the result (status ``stopped``)."""
        if grace_s is not None:
            self.grace_s = grace_s  # escalation is measured from the first stop request
        self._begin_stop("user")

    def __enter__(self) -> "RunHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        """Leaving a ``with`` block stops a run that is still going, then waits for it."""
        if not self.done:
            self.stop()
        self.wait()

    # -- starting --------------------------------------------------------------------

    def _start(self) -> None:
        self._start_more()
        self._thread.start()

    def _start_more(self) -> None:
        """Start launches in order, up to and including the next one marked ``wait``."""
        with self._lock, open(self.run_dir / store.LOG_FILE, "ab", buffering=0) as logf:
            while self._next < len(self.plan.launches) and not self._halted:
                i, launch = self._next, self.plan.launches[self._next]
                self._next += 1
                if self.only is not None and launch.name not in self.only:
                    continue  # started elsewhere (another node), not by this runner
                try:
                    r = self.resolved[i] = resolve_launch(launch, self.run_dir, self.events_dir, run_values=self.values)
                    shown = Launch(r.name, r.argv, cwd=r.cwd or "").shell()
                    logf.write(f"# accelctl: launch {launch.name}: {shown}\n".encode())
                    self._procs[i] = subprocess.Popen(  # noqa: S603 - argv list, never a shell
                        with_default_sigint(r.argv, r.env),
                        env=r.env,
                        cwd=r.cwd,
                        stdin=subprocess.DEVNULL,
                        stdout=logf,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                    self._times[i] = [time.time()]
                except (OSError, UnresolvedPlaceholder) as exc:
                    self._rcs[i] = 127
                    self._emit(RunFailed(reason="launch_error", message=f"cannot start {launch.name!r}: {exc}"))
                    self._begin_stop("failure")
                    return
                if launch.wait:
                    return  # the launches after it start when it has exited 0

    def _running(self) -> list[int]:
        return [i for i, p in enumerate(self._procs) if p is not None and self._rcs[i] is None]

    # -- supervisor thread --------------------------------------------------------------

    def _supervise(self) -> None:
        try:
            while True:
                self._drain()
                self._check_processes()
                self._escalate()
                with self._lock:
                    if not self._running() and (self._halted or self._next >= len(self.plan.launches)):
                        self._finishing = True
                        break
                time.sleep(POLL_S)
            self._drain(final=True)
        except BaseException as exc:  # noqa: BLE001 - the run must still end cleanly
            log.exception("runner supervisor failed")
            self._emit(RunFailed(reason="runner_error", message=f"{type(exc).__name__}: {exc}"))
            self._kill_all(signal.SIGKILL)
            for i, p in enumerate(self._procs):
                if p is not None and self._rcs[i] is None:
                    self._rcs[i] = p.wait()
        finally:
            self._finish()

    def _drain(self, final: bool = False) -> None:
        for raw in self._files.lines(final):
            text, event = parse_line(raw)
            if text:
                self._emit(event, text)
            elif raw.strip():
                log.warning("skipped a torn event line in %s: %.80r", self.run_dir, raw)

    def _emit(self, event: Event | None, line: str | None = None) -> None:
        self._out.write((line if line is not None else event.to_json()) + "\n")  # type: ignore[union-attr]
        self._out.flush()
        if event is None:
            return
        if isinstance(event, RunFailed):
            if self._failure is None or (self._failure.reason == "stopped" and event.reason != "stopped"):
                self._failure = event
            if event.reason != "stopped" and self._failed_at is None:
                self._failed_at = time.monotonic()
        with self._cond:
            self._events.append(event)
            self._cond.notify_all()
        self._sinks.on_event(event)

    def _check_processes(self) -> None:
        for i in self._running():
            rc = self._procs[i].poll()  # type: ignore[union-attr]
            if rc is None:
                continue
            self._rcs[i] = rc
            self._times[i].append(time.time())
            if rc == 0:
                if self.plan.launches[i].wait and not self._halted:
                    self._start_more()
                continue
            self._drain()  # its last words may have landed since the previous tick
            name = self.plan.launches[i].name
            if self._failure is None:
                how = f"signal {-rc}" if rc < 0 else f"exit code {rc}"
                if self._stop_kind == "user":
                    self._emit(RunFailed(reason="stopped", message=f"{name!r} ended by stop ({how})"))
                else:
                    tail = store.log_tail(self.run_dir, LOG_TAIL_LINES)
                    msg = f"{name!r} exited with {how} without reporting a failure; last lines of worker.log:\n{tail}"
                    why = self._explain(i)
                    self._emit(RunFailed(reason="crashed", message=f"{why}\n{msg}" if why else msg))
            self._begin_stop("failure")

    def _explain(self, failed: int) -> str | None:
        """The plan's engine's reading of a launch that exited without reporting why (a torchrun
        rendezvous that timed out names the nodes that never joined)."""
        from accelctl.plan.registry import ENGINES

        engine = ENGINES.get(self.plan.engine)
        if engine is None:
            return None
        started = {ln.name: self._procs[i] is not None and (i == failed or self._rcs[i] is None)
                   for i, ln in enumerate(self.plan.launches)}
        try:
            return engine.explain_failure(self.plan, store.log_tail(self.run_dir, 400), started, dict(self.values))
        except Exception:  # noqa: BLE001 - an explanation must never break the run's ending
            log.exception("engine %s could not explain a failure", self.plan.engine)
            return None

    def _begin_stop(self, kind: str) -> None:
        """Start (once) the SIGINT → SIGTERM → SIGKILL sequence; ``kind`` is user or failure.
        No further launch starts after this."""
        with self._lock:
            if self._result is not None or self._finishing:
                return  # the run has already ended; nothing to stop
            self._halted = True
            cancels = self._next < len(self.plan.launches) and any(r is None for r in self._rcs[self._next :])
            if kind == "user" or (self._stop_kind is None and (self._running() or cancels)):
                self._stop_kind = kind
            if self._stop_at is None and self._running():
                self._stop_at = time.monotonic()
                self._signal_alive(signal.SIGINT)

    def _escalate(self) -> None:
        if self._stop_at is None and self._failed_at is not None and time.monotonic() - self._failed_at > self.grace_s:
            self._begin_stop("failure")  # a rank reported a failure but some process lingers
        with self._lock:
            if self._stop_at is None:
                return
            elapsed = time.monotonic() - self._stop_at
            for sig, after in ((signal.SIGTERM, self.grace_s), (signal.SIGKILL, 2 * self.grace_s)):
                if elapsed >= after and sig not in self._sent:
                    self._sent.add(sig)
                    self._signal_alive(sig)

    def _signal_alive(self, sig: int) -> None:
        for i in self._running():
            procgroup.signal_group(self._procs[i].pid, sig)  # type: ignore[union-attr]

    def _kill_all(self, sig: int) -> None:
        for proc in self._procs:
            if proc is not None:
                procgroup.signal_group(proc.pid, sig)

    def _finish(self) -> None:
        try:
            procgroup.reap(self.pids)
            self._files.close()
            summary = self._summary()
            store.write_summary(self.run_dir, summary)
        except Exception as exc:  # noqa: BLE001
            log.exception("could not write the summary of %s", self.run_dir)
            summary = {"status": "failed", "failure": {"reason": "runner_error", "message": str(exc)}}
        finally:
            self._out.close()
        result = RunResult(summary["status"], self.run_dir, summary, self._returncodes())
        self._sinks.close(result)
        with self._cond:
            self._result = result
            self._cond.notify_all()

    def _wait_done(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._result is None:
                left = 0.1 if deadline is None else min(0.1, deadline - time.monotonic())
                if left <= 0:
                    raise TimeoutError(f"run {self.run_id} still running after {timeout} s")
                self._cond.wait(left)

    # -- summary ---------------------------------------------------------------------

    def _returncodes(self) -> tuple[int | None, ...]:
        return tuple(self._rcs)

    def _summary(self) -> dict[str, Any]:
        launches = [
            {
                "name": ln.name,
                "argv": list(r.argv) if r else None,
                "cwd": r.cwd if r else None,
                "pid": p.pid if p else None,
                "returncode": rc,
                "wall_s": t[1] - t[0] if len(t) == 2 else None,
            }
            for ln, r, p, rc, t in zip(self.plan.launches, self.resolved, self._procs, self._rcs, self._times)
        ]
        return build_summary(
            plan=self.plan,
            job=self.job,
            run_id=self.run_id,
            events=[*self.prior_events, *self._events],
            stop_kind=self._stop_kind,
            failure=self._failure,
            launches=launches,
            started_unix_s=self._started_at,
            finished_unix_s=time.time(),
        )


# --------------------------------------------------------------------------- entry point


def launch(
    plan: Plan,
    *,
    source_text: str | None,
    spec_json: str | Mapping[str, Any] | None,
    runs_root: str | os.PathLike[str] | None = None,
    sinks: Iterable[Any] = (),
    grace_s: float = DEFAULT_GRACE_S,
    only: Iterable[str] | None = None,
    into: Path | None = None,
    prior_events: Iterable[Event] = (),
) -> RunHandle:
    """Materialise ``plan`` into a new run folder, start its launches, return at once.

    ``only``: the names of the launches to start here (e.g. ``["node1"]`` on node 1 of a
    torchrun rendezvous); None starts them all.  An unknown name raises ``ValueError``.

    ``sinks`` are callables or objects with ``on_event``/``close`` (``accelctl.run.sinks``).
    A plan whose generated files escape the run folder raises ``RunStoreError`` before
    anything starts (and leaves no run folder behind).

    ``into``: an existing run folder to launch into (``accelctl run --resume``,
    ``accelctl.run.resume``; pass ``source_text``/``spec_json`` None to keep its own): plan,
    job and generated files are written again with this launch's placeholder values, and
    ``prior_events`` (its events before the resume point) enter the summary.
    """
    if only is not None:
        only = list(only)
        unknown = sorted(set(only) - {ln.name for ln in plan.launches})
        if unknown or not only:
            raise ValueError(f"no launch named {', '.join(unknown) or '(none given)'} in the plan "
                             f"(launches: {', '.join(ln.name for ln in plan.launches)})")
    run_dir = into if into is not None else store.new_run_dir(plan.workload, plan.target, runs_root)
    values = run_values(plan)  # {free_port}: one port for every launch and file of this run
    try:
        job = store.write_inputs(run_dir, plan, source_text=source_text, spec_json=spec_json, events_dir=run_dir,
                                 run_values=values)
    except BaseException:
        if into is None:
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    handle = RunHandle(plan, run_dir, job, sinks, grace_s, values, only, prior_events)
    try:
        handle._start()
    except BaseException:  # e.g. KeyboardInterrupt between two launches: leave nothing behind
        handle._kill_all(signal.SIGKILL)
        if not handle._thread.is_alive():
            handle._out.close()
        raise
    return handle
