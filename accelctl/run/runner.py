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
``ok``.  A launch that ends non-zero when nobody asked for a stop is a crash even if its
ranks said "stopped" (torchrun stops the others when one dies): ``crashed_rank`` names the
rank and its signal ("rank 1 killed by SIGKILL"), and that rank's death is the run's failure
over what its peers then report.  Commands and environment are resolved by
``accelctl.run.commands``.

A run may share its worker process with the other runs of its file (``shared=``, a
``accelctl.run.shared.SharedWorker``: one process runs their jobs in order): its run then ends
when the worker reports its job's end (``RunFinished`` / ``RunFailed`` of rank 0), the launch's
return code being the one a worker of its own would have had for that job; the process is
neither waited for nor reaped here (it goes on to the next job) unless a stop is under way.

A launcher's own teardown is not the run: once every rank of the last launch reported
``RunFinished`` and its process, a local descendant of the launch, has been gone
``LAUNCHER_TEARDOWN_S``, the launch counts as exited 0 and its group is ended deepest member
first (``procgroup.end_leaves_first``) -- DeepSpeed's launcher otherwise held the run 3.8 s
after the last event.

Supervision that survives the supervisor: every launch is started from one long-lived
thread (``_Forker``) through ``EXEC_PROLOGUE``, which sets the parent-death signal; every
launch carries ``ACCELCTL_RUNNER`` (this process's ``<pid>:<start ticks>``), which the worker
watches; ``runner.json`` in the run folder names this runner, so a reader of the store can
finish a run whose runner was killed (``store.finish_lost_run``).  A run folder that cannot be
written (ENOSPC, EACCES) stops the run, ``failed`` with reason ``store_error`` ("run store:
No space left on device writing events.jsonl"); ``wait()`` always returns.
"""

from __future__ import annotations

import errno
import logging
import os
import queue
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

from accelctl.contract import diskspace, envnames, supervision
from accelctl.contract.events import Event, RunFailed, RunFinished
from accelctl.run.rankwatch import RankWatch
from accelctl.contract.job import WorkerJob
from accelctl.contract.plan import Launch, Plan
from accelctl.run import procgroup, scheduled, store
from accelctl.run.outcome import Crash, crashed_rank, launch_failed, run_failure  # noqa: F401 - Crash, crashed_rank: as before
from accelctl.run.ownership import Ownership, claim
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
from accelctl.run.tracking import check_available, start_tracking

__all__ = ["EVENTS_DIR_ENV", "RunHandle", "RunResult", "launch", "launch_env", "resolve_argv"]

log = logging.getLogger("accelctl.run")

POLL_S = 0.05
#: how long every rank's process must have been gone before a launcher still running is ended
#: (``Runner._ranks_done``): a launcher that exits by itself meanwhile gives its own exit code
LAUNCHER_TEARDOWN_S = 0.3
#: the worker's exit code for a job that ended with this ``RunFailed.reason`` (``accelctl.worker.main``)
from accelctl.contract.ids import JOB_EXIT_CODES  # noqa: E402  (the worker's, stated once)
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


#: ``python -c`` prologue every launch is exec'd through (Linux): it puts SIGINT back to its
#: default (an ignored SIGINT is inherited across exec -- ``accelctl run &`` in a script,
#: nohup, some CI runners -- and then neither torchrun nor Python's KeyboardInterrupt would
#: see the runner's stop), asks for SIGTERM when the runner dies (``PR_SET_PDEATHSIG``
#: survives exec: a SIGKILLed runner leaves no launch behind; torchrun passes the SIGTERM
#: on to its ranks, which also watch the runner themselves), gives up if the runner is
#: already gone, then execs the launch.  exec keeps the pid, so the process group is unchanged.
#: argv after it: the runner's pid, the executable, the launch's argv.
EXEC_PROLOGUE = (
    "import ctypes, os, signal, sys\n"
    "signal.signal(signal.SIGINT, signal.SIG_DFL)\n"
    "try:\n"
    "    ctypes.CDLL(None).prctl(1, signal.SIGTERM, 0, 0, 0)\n"
    "except Exception:\n"
    "    pass\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[3:])"
)


def with_exec_prologue(argv, env: Mapping[str, str] | None = None) -> list[str]:
    """The launch's argv, exec'd through ``EXEC_PROLOGUE`` (no ``preexec_fn``: the runner has
    threads).  Off Linux, only when SIGINT is ignored; for a command that is not there
    (Popen itself then reports it, exit 127), as is."""
    linux = sys.platform.startswith("linux")
    if not linux and signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        return list(argv)
    exe = shutil.which(argv[0], path=(env if env is not None else os.environ).get("PATH"))
    if exe is None:
        return list(argv)
    return [sys.executable, "-c", EXEC_PROLOGUE, str(os.getpid()), exe, *argv]


with_default_sigint = with_exec_prologue  # the name it had before it also set the parent-death signal


class _Forker:
    """Starts every launch from one thread that lives as long as the runner's process.

    The parent-death signal fires when the *thread* that forked a process ends, not the
    process: a launch started from a caller's short-lived thread (or the supervisor thread of
    an earlier run) would be killed when that thread returned.  ``popen`` hands the call to
    this thread and waits; a KeyboardInterrupt while it waits kills what was started, then
    propagates."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while True:
            args, kwargs, box, done = self._jobs.get()
            try:
                box["proc"] = subprocess.Popen(*args, **kwargs)  # noqa: S603 - argv list, never a shell
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                box["error"] = exc
            done.set()

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="accelctl-forker", daemon=True)
                self._thread.start()
        box: dict[str, Any] = {}
        done = threading.Event()
        self._jobs.put((args, kwargs, box, done))
        interrupted: BaseException | None = None
        while not done.is_set():
            try:
                done.wait()
            except KeyboardInterrupt as exc:
                interrupted = exc
        if "error" in box:
            raise box["error"]
        proc = box["proc"]
        if interrupted is not None:
            procgroup.signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            raise interrupted
        return proc


_FORKER = _Forker()


def _unlinked(fh) -> bool:
    """The open file was removed from its folder (``rm -rf`` of a folder that a writer kept
    from going away entirely)."""
    try:
        return os.fstat(fh.fileno()).st_nlink == 0
    except (OSError, ValueError):  # closed: a store error already ends the run
        return False


def _folder_id(path: Path) -> tuple[int, int] | None:
    """The folder's (device, inode); None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class RunHandle:
    """A started run.  ``events()`` streams, ``wait()`` blocks for the result, ``stop()`` ends it."""

    def __init__(self, plan: Plan, run_dir: Path, job: WorkerJob, sinks: Iterable[Any] = (), grace_s: float = DEFAULT_GRACE_S,
                 values: Mapping[str, str] | None = None, only: Iterable[str] | None = None,
                 prior_events: Iterable[Event] = (), shared: Any = None, owner: Ownership | None = None):
        self.plan = plan
        #: this process's claim on the run folder (``accelctl.run.ownership``), given up once the
        #: summary is written: no second ``run --resume`` meanwhile
        self.owner = owner
        #: the worker process this run shares with the other runs of its file
        #: (``accelctl.run.shared.SharedWorker``), or None: a process of its own
        self.shared = shared
        #: the worker reported its job's end (RunFinished / RunFailed of rank 0): the exit code a
        #: worker of its own would have returned for it (a shared worker goes on to its next job)
        self._job_code: int | None = None
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
        self._started_at = time.time()
        #: live logging to experiment trackers (``track { ... }``), off this thread; None: none
        self._tracker = start_tracking(plan, run_dir, self._started_at, self.only)
        self._sinks = FanOut([*sinks, self._tracker] if self._tracker is not None else sinks)
        for event in self.prior_events if self._tracker is not None else ():
            self._tracker.on_event(event)  # a resumed run's MLflow run holds the whole run
        self._events: list[Event] = []
        self._cond = threading.Condition()
        self._lock = threading.RLock()
        self._files = RankFiles(run_dir)
        self._out = open(run_dir / store.EVENTS_FILE, "a", encoding="utf-8")  # noqa: SIM115
        self._failure: RunFailed | None = None
        #: which rank's process went first, for a launcher that does not say (DeepSpeed's)
        self._ranks = RankWatch()
        #: the ranks that reported ``RunFinished``
        self._finished_ranks: set[int] = set()
        #: a launch that starts several ranks is watched rank by rank; a single process is its own
        #: rank, its exit status says how it ended (the watch cost a third of the supervisor's
        #: ~1 % of a core, which a run pinned to one core pays in its steps)
        self._watch_ranks = any(launch.processes > 1 for launch in plan.launches)
        self._stop_kind: str | None = None  # "user" or "failure"
        self._stop_at: float | None = None
        self._failed_at: float | None = None  # a worker reported a failure (not "stopped")
        self._sent: set[int] = set()
        self._result: RunResult | None = None
        #: this process, as its launches and the run store know it (``<pid>:<start ticks>``)
        self._runner_identity = supervision.identity()
        #: the first failure to write the run folder (a full disk): the run is stopped, failed
        self._store_error: str | None = None
        #: the run folder as it was when the run started (device, inode): one removed or replaced
        #: mid-run ends the run (``_check_folder``)
        self._folder_id = _folder_id(run_dir)
        self._thread = threading.Thread(target=self._supervise, name=f"accelctl-run-{self.run_id}", daemon=True)

    # -- public --------------------------------------------------------------------

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._procs if p is not None and p.pid is not None]  # (a scheduler's job has none)

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
        if not self._halted:  # (halted before the start: the store could not take what it needed)
            self._start_more()
        self._thread.start()

    def _start_more(self) -> None:
        """Start launches in order, up to and including the next one marked ``wait``.  A
        ``worker.log`` the store cannot take (a full disk) fails the run ``store_error`` before
        the launch starts (its output would be lost)."""
        try:
            logf = open(self.run_dir / store.LOG_FILE, "ab", buffering=0)  # noqa: SIM115
        except OSError as exc:
            self._store_failed(exc, store.LOG_FILE)
            return
        with self._lock, logf:
            while self._next < len(self.plan.launches) and not self._halted:
                i, launch = self._next, self.plan.launches[self._next]
                self._next += 1
                if self.only is not None and launch.name not in self.only:
                    continue  # started elsewhere (another node), not by this runner
                try:
                    if self.shared is not None and self.shared.proc is not None:
                        # started by an earlier run of this file; it runs this run's job next
                        self.resolved[i], self._procs[i] = self.shared.launch, self.shared.proc
                        self._log_line(logf, f"# accelctl: launch {launch.name}: the shared worker, pid "
                                             f"{self.shared.proc.pid} ({self.shared.jobs_file})")
                        self._times[i] = [time.time()]
                        self._record_runner()
                        continue
                    r = resolve_launch(launch, self.run_dir, self.events_dir, run_values=self.values)
                    if self.shared is not None:
                        r = self.shared.take(r)  # the same command, with the job list for its job
                    self.resolved[i] = r
                    shown = Launch(r.name, r.argv, cwd=r.cwd or "").shell()
                    if not self._log_line(logf, f"# accelctl: launch {launch.name}: {shown}"):
                        return  # the store is full: the run ends store_error, this launch never starts
                    env = {**r.env, envnames.RUNNER: self._runner_identity}
                    if self.plan.request is not None:  # submitted and followed here, run by the cluster
                        self._procs[i] = scheduled.start(self.plan, self.run_dir, r.env, self.run_dir / store.LOG_FILE)
                    else:
                        self._procs[i] = _FORKER.popen(
                            with_exec_prologue(r.argv, env),
                            env=env,
                            cwd=r.cwd,
                            stdin=subprocess.DEVNULL,
                            stdout=logf,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        )
                    self._times[i] = [time.time()]
                    if self.shared is not None:
                        self.shared.proc = self._procs[i]
                    self._record_runner()
                except (OSError, UnresolvedPlaceholder) as exc:
                    self._rcs[i] = 127
                    self._emit(RunFailed(reason="launch_error", message=f"cannot start {launch.name!r}: {exc}"))
                    self._begin_stop("failure")
                    return
                if launch.wait:
                    return  # the launches after it start when it has exited 0

    def _log_line(self, logf, text: str) -> bool:
        """One line of accelctl's own into ``worker.log``; False (the run failing ``store_error``)
        when the store cannot take it."""
        try:
            logf.write(f"{text}\n".encode())
            return True
        except OSError as exc:
            self._store_failed(exc, store.LOG_FILE)
            return False

    def fail_store(self, exc: OSError, name: str) -> None:
        """A file of the run that the caller writes (``series.json``) cannot be written: the run
        stops and ends ``failed``, ``store_error`` ("run store: <why> writing <name>")."""
        self._store_failed(exc, name)

    def _record_runner(self) -> None:
        """``runner.json``: who supervises this run, and its launches' process groups -- how a
        later ``accelctl runs`` tells a run in progress from one whose runner was killed."""
        try:
            store.write_runner(self.run_dir, self._runner_identity, self.pids)
        except OSError as exc:
            self._store_failed(exc, store.RUNNER_FILE)

    def _running(self) -> list[int]:
        return [i for i, p in enumerate(self._procs) if p is not None and self._rcs[i] is None]

    # -- supervisor thread --------------------------------------------------------------

    def _supervise(self) -> None:
        try:
            while True:
                if self._watch_ranks and self._stop_kind != "user":  # before the events a death causes are read
                    self._ranks.poll(self.pids)
                self._drain()
                self._check_folder()
                self._check_processes()
                self._escalate()
                with self._lock:
                    if not self._running() and (self._halted or self._next >= len(self.plan.launches)):
                        self._finishing = True
                        break
                time.sleep(POLL_S)
            self._drain(final=True)
        except BaseException as exc:  # noqa: BLE001 - the run must still end cleanly
            if isinstance(exc, OSError):  # reading the ranks' files, the run folder gone...
                self._store_failed(exc, "the run folder")
            else:
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
            if (self.shared is not None and isinstance(event, (RunFinished, RunFailed)) and event.rank == 0
                    and self._job_code is None):
                self._job_code = 0 if isinstance(event, RunFinished) else JOB_EXIT_CODES.get(event.reason, 1)
            if text:
                self._emit(event, text)
            elif raw.strip():  # (a full disk tears lines as a matter of course)
                (log.debug if self._store_error else log.warning)("skipped a torn event line in %s: %.80r",
                                                                   self.run_dir, raw)

    def _emit(self, event: Event | None, line: str | None = None) -> None:
        if self._store_error is None:
            try:
                self._out.write((line if line is not None else event.to_json()) + "\n")  # type: ignore[union-attr]
                self._out.flush()
            except (OSError, ValueError) as exc:  # ENOSPC, EACCES, EIO...; ValueError: closed
                self._store_failed(exc, store.EVENTS_FILE)
                if isinstance(event, RunFailed) and event.reason == "crashed":
                    return  # a rank that ended on the same full disk: the store error says why
        if event is None:
            return
        if isinstance(event, RunFailed):
            self._failure = run_failure(self._failure, event)
            if event.reason != "stopped" and self._failed_at is None:
                self._failed_at = time.monotonic()
        if isinstance(event, RunFinished) and isinstance(event.rank, int):
            self._finished_ranks.add(event.rank)
        with self._cond:
            self._events.append(event)
            self._cond.notify_all()
        self._sinks.on_event(event)

    def _check_folder(self) -> None:
        """A run folder removed (or replaced by another) while the run runs ends the run at once,
        ``failed`` (``store_error``) naming the folder: nothing of the run is written again, and no
        later write (a checkpoint save) recreates it."""
        if self._store_error is None and self._folder_id is not None and (
                _folder_id(self.run_dir) != self._folder_id or _unlinked(self._out)):
            self._store_failed(None, "", f"run store: the run folder {self.run_dir} was removed while the run ran")

    def _store_failed(self, exc: BaseException | None, name: str, message: str | None = None) -> None:
        """The run folder cannot be written (a full disk, lost permissions): stop the launches
        and end the run ``failed`` with that reason -- never a supervisor that dies silently
        and a ``wait()`` that never returns.  Events still reach the sinks."""
        if self._store_error is not None:
            return
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        self._store_error = message or f"run store: {why} writing {name}"
        log.debug("%s (%s); stopping the run", self._store_error, self.run_dir)
        try:
            self._out.close()
        except (OSError, ValueError):
            pass  # its buffered line is lost with the space it needed
        self._emit(RunFailed(reason="store_error", message=self._store_error))
        self._begin_stop("failure")

    def _check_processes(self) -> None:
        for i in self._running():
            rc = self._procs[i].poll()  # type: ignore[union-attr]
            if self._job_code is not None and (rc is not None or self._stop_at is None):
                # a shared worker's job is over: its run ends here, whatever the process does next
                # (its next job; during a stop, the run waits for the process to end)
                rc = self._job_code
            if rc is None and self._ranks_done(i):
                rc = self._end_launcher(i)
            if rc is None:
                continue
            self._rcs[i] = rc
            self._times[i].append(time.time())
            if rc == 0:
                if self.plan.launches[i].wait and not self._halted:
                    self._start_more()
                continue
            self._drain()  # its last words may have landed since the previous tick
            if self._store_error is not None:
                pass  # the ranks fail because the store does: that is the run's reason already
            elif self._failure is None and diskspace.nearly_full(self.run_dir):
                # a rank that met the full store before it could say so (its rank file takes nothing
                # more), while events.jsonl still had room in its last block
                self._store_failed(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), "the ranks' events")
            else:  # what the exit adds to the run's outcome (accelctl.run.outcome, no process needed)
                user = self._stop_kind == "user"
                ended = launch_failed(self.plan.launches[i].name, rc, self._events, self._failure,
                                      "" if user else store.log_tail(self.run_dir, 400),
                                      "" if user else store.log_tail(self.run_dir, LOG_TAIL_LINES),
                                      self._ranks.first_gone(), lambda: self._explain(i), stopped_by_user=user)
                if ended.event is not None:
                    self._emit(ended.event)
                    if ended.cause and self._store_error is None:
                        self._failure = ended.event
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
            scheduled.signal_launch(self._procs[i], sig)

    def _ranks_done(self, i: int) -> bool:
        """Every rank of launch ``i`` (the run's last, the only one left) reported
        ``RunFinished`` and its process has been gone ``LAUNCHER_TEARDOWN_S``, while the launcher
        still runs: what is left of it is its own teardown.  The DeepSpeed launcher polls its
        ranks once a second, then two interpreters that imported deepspeed shut down: 3.7 s
        after the last event of a 2-rank ZeRO-2 run here (``bench``, ``zero2_step``).  Only
        where the ranks are this machine's descendants of the launch (``RankWatch``): a Slurm
        step's, a pod's or a remote node's ranks are never seen, so their launchers are waited for."""
        launch = self.plan.launches[i]
        if (self.shared is not None or launch.wait or launch.processes < 2 or self._stop_kind is not None
                or self._failure is not None or self._next < len(self.plan.launches) or self._running() != [i]):
            return False
        ranks = set(range(launch.processes))
        return ranks <= self._finished_ranks and self._ranks.all_gone(ranks, LAUNCHER_TEARDOWN_S)

    def _end_launcher(self, i: int) -> int:
        """End launch ``i``'s process group once its ranks are done (``_ranks_done``): the run
        succeeded by their word; the launcher's exit code is not waited for."""
        proc = self._procs[i]
        procgroup.end_leaves_first(proc.pid)  # type: ignore[union-attr]
        try:
            proc.wait(timeout=5)  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            pass  # reaped with the rest in _finish
        log.debug("run %s: every rank finished and exited; launcher %r ended without its teardown",
                  self.run_id, self.plan.launches[i].name)
        return 0

    def _kill_all(self, sig: int) -> None:
        for proc in self._procs:
            if proc is not None:
                scheduled.signal_launch(proc, sig)

    def _finish(self) -> None:
        """Reap, write ``summary.json`` where the store allows, and hand out the result --
        always: ``wait()`` returns whatever failed here."""
        summary: dict[str, Any] = {}
        try:
            if self.shared is None or not self.shared.running():
                procgroup.reap(self.pids)
                self._sweep()
            # else: the shared worker goes on with the next run's job; ``SharedWorker.close`` reaps it
            self._files.close()
            summary = self._summary()
            try:
                self._out.close()  # its last buffered line may meet a full disk too
            except (OSError, ValueError) as exc:
                self._store_failed(exc, store.EVENTS_FILE)
                summary = self._summary()
            if self._store_error is None:
                store.write_summary(self.run_dir, summary)
            else:
                try:  # recorded where possible: a full events.jsonl may leave room for the summary
                    store.write_summary(self.run_dir, summary)
                except OSError:
                    log.warning("run store: summary.json of %s not written either", self.run_dir.name)
                    store.mark_runner_ended(self.run_dir, self._store_error)
        except OSError as exc:
            self._store_failed(exc, store.SUMMARY_FILE)
            summary = self._safe_summary()
            store.mark_runner_ended(self.run_dir, self._store_error or "")
        except Exception as exc:  # noqa: BLE001
            log.exception("could not write the summary of %s", self.run_dir)
            summary = summary or {"status": "failed", "failure": {"reason": "runner_error", "message": str(exc)}}
        finally:
            summary = self._finish_tracking(summary)
            result = RunResult(summary.get("status", "failed"), self.run_dir, summary, self._returncodes())
            try:
                self._sinks.close(result)
            finally:
                if self.owner is not None:
                    self.owner.release()  # the run is recorded: it may be resumed now
                with self._cond:
                    self._result = result
                    self._cond.notify_all()

    def _finish_tracking(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The trackers log the end of the run (after ``summary.json`` is written: it is one of
        their artifacts); a tracker that failed meanwhile is added to ``summary.json``'s warnings."""
        if self._tracker is None or not summary:
            return summary
        try:
            self._tracker.finish(summary, self.run_dir)
            final = self._tracker.annotate(summary)
            if final != summary and (self.run_dir / store.SUMMARY_FILE).is_file():
                store.write_summary(self.run_dir, final)
            return final
        except Exception:  # noqa: BLE001 - tracking never changes how a run ends
            log.exception("tracking the end of %s", self.run_id)
            return summary

    def _sweep(self) -> None:
        """SIGKILL any process of this run still there once its launches have ended: one a
        launcher put in a session of its own (torchrun's ranks) and left behind."""
        left = procgroup.carrying(envnames.EVENTS_DIR, str(self.events_dir))
        if left:
            log.warning("run %s: %d process(es) outlived their launch; killed: %s", self.run_id, len(left), left)
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass

    def _safe_summary(self) -> dict[str, Any]:
        try:
            return self._summary()
        except Exception as exc:  # noqa: BLE001
            return {"status": "failed", "failure": {"reason": "runner_error", "message": str(exc)}}

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
        started = self._started_at
        if self.shared is not None:  # a shared worker may begin this job before the run is supervised
            started = min([started, *(e.time_unix_s for e in self._events if getattr(e, "time_unix_s", None))])
            for t in self._times:
                t[:1] = [min(t[0], started)] if t else []
        launches = [
            {
                "name": ln.name,
                "argv": list(r.argv) if r else None,
                "cwd": r.cwd if r else None,
                "pid": p.pid if p else None,
                "returncode": rc,
                "wall_s": t[1] - t[0] if len(t) == 2 else None,
                # the job list of the worker this run shared with the other runs of its file
                **({"jobs_file": str(self.shared.jobs_file)} if self.shared is not None else {}),
            }
            for ln, r, p, rc, t in zip(self.plan.launches, self.resolved, self._procs, self._rcs, self._times)
        ]
        summary = build_summary(
            plan=self.plan,
            job=self.job,
            run_id=self.run_id,
            events=[*self.prior_events, *self._events],
            stop_kind=self._stop_kind,
            failure=self._failure,
            launches=launches,
            started_unix_s=started,
            finished_unix_s=time.time(),
        )
        return self._tracker.annotate(summary) if self._tracker is not None else summary


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
    owner: Ownership | None = None,
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

    The run folder is owned by this process until the run's summary is written
    (``accelctl.run.ownership``): ``owner``, a claim already taken on ``into`` (the resume's,
    taken before its checks), else claimed here; ``RunBusy`` when another process holds it.
    """
    if only is not None:
        only = list(only)
        unknown = sorted(set(only) - {ln.name for ln in plan.launches})
        if unknown or not only:
            raise ValueError(f"no launch named {', '.join(unknown) or '(none given)'} in the plan "
                             f"(launches: {', '.join(ln.name for ln in plan.launches)})")
    check_available(plan, only)  # a tracker the workload asks for and this Python lacks: E594, not a silent skip
    try:
        run_dir = into if into is not None else store.new_run_dir(plan.workload, plan.target, runs_root)
    except OSError as exc:  # a full disk, a store that is not ours to write
        raise store.RunStoreError(f"run store: {exc.strerror or exc} creating a run folder under "
                                  f"{store.runs_root(runs_root)}") from exc
    values = run_values(plan)  # {free_port}: one port for every launch and file of this run
    try:
        if owner is None:
            owner = claim(run_dir)
        job = store.write_inputs(run_dir, plan, source_text=source_text, spec_json=spec_json, events_dir=run_dir,
                                 run_values=values)
        store.write_runner(run_dir, supervision.identity(), [])
        handle = RunHandle(plan, run_dir, job, sinks, grace_s, values, only, prior_events, owner=owner)
    except BaseException as exc:
        if into is None:
            shutil.rmtree(run_dir, ignore_errors=True)
        if owner is not None:
            owner.release()
        if isinstance(exc, OSError):
            name = Path(exc.filename).name if getattr(exc, "filename", None) else "the run folder"
            raise store.RunStoreError(f"run store: {exc.strerror or exc} writing {name} in {run_dir}") from exc
        raise
    try:
        handle._start()
    except BaseException:  # e.g. KeyboardInterrupt between two launches: leave nothing behind
        handle._kill_all(signal.SIGKILL)
        if handle._tracker is not None:
            handle._tracker.abandon()
        if not handle._thread.is_alive():
            handle._out.close()
            owner.release()
        raise
    return handle
