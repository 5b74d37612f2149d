"""The runner: the only module of accelctl that starts processes.

``launch(plan, ...)`` materialises a plan into a run folder (``accelctl.run.store``),
starts every ``Launch`` in its own session (so a signal reaches the whole process
group: torchrun and all its workers), and returns a ``RunHandle`` at once.  One
supervisor thread then, every ``POLL_S``:

1. tails every ``rank<N>.jsonl`` the workers append to (a partial last line waits for
   its newline), writes each event line to ``events.jsonl`` (flushed per line) and
   hands the typed event to every sink;
2. polls the processes: a process that exits non-zero without any ``RunFailed`` seen
   gets a synthesised ``RunFailed(reason="crashed")`` carrying the tail of
   ``worker.log``; any non-zero exit stops the other launches;
3. escalates a stop: SIGINT to each process group, SIGTERM after ``grace_s``,
   SIGKILL after twice ``grace_s``.

When every process has exited it drains the files a last time, makes sure no member of
the process groups is left, writes ``summary.json`` and calls each sink's ``close``.

Status: ``stopped`` when ``stop()`` was asked for (or a worker reported
``RunFailed(reason="stopped")``), else ``failed`` when any rank failed or crashed, else
``ok``.  Beside the plan's environment the runner sets ``ACCELCTL_EVENTS_DIR``,
``PYTHONUNBUFFERED=1`` (unless set) and puts accelctl's own folder on ``PYTHONPATH``.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelctl.plan.model import Launch, Plan
from accelctl.run import store
from accelctl.run.events import Event, RunFailed
from accelctl.run.job import WorkerJob
from accelctl.run.sinks import FanOut
from accelctl.run.summary import build_summary
from accelctl.run.tail import RankFiles, parse_line

log = logging.getLogger("accelctl.run")

EVENTS_DIR_ENV = "ACCELCTL_EVENTS_DIR"
POLL_S = 0.05
DEFAULT_GRACE_S = 5.0
LOG_TAIL_LINES = 30
_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])


@dataclass(frozen=True)
class RunResult:
    #: ok, failed or stopped
    status: str
    run_dir: Path
    #: the content of summary.json
    summary: dict[str, Any] = field(repr=False)
    #: one per launch, in plan order (127: the command could not be started)
    returncodes: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status == "ok"


# --------------------------------------------------------------------------- plan → argv/env


def resolve_argv(argv: Iterable[str], run_dir: Path) -> list[str]:
    """Substitute ``{run_dir}`` and map the symbolic heads ``python`` and ``torchrun``."""
    args = [store.substitute(a, run_dir) for a in argv]
    if args and args[0] == "python":
        args[0] = sys.executable
    elif args and args[0] == "torchrun":
        args[:1] = [sys.executable, "-m", "torch.distributed.run"]
    return args


def launch_env(launch: Launch, run_dir: Path, events_dir: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.update({k: store.substitute(v, run_dir) for k, v in launch.env.items()})
    env[EVENTS_DIR_ENV] = str(events_dir)
    env.setdefault("PYTHONUNBUFFERED", "1")
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _PACKAGE_PARENT not in paths:
        env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_PARENT, *paths])
    return env


def log_tail(path: Path, lines: int = LOG_TAIL_LINES, max_bytes: int = 64 * 1024) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - max_bytes))
            data = fh.read()
    except OSError:
        return ""
    return "\n".join(data.decode("utf-8", "replace").splitlines()[-lines:])


# --------------------------------------------------------------------------- the handle


class RunHandle:
    """A started run.  ``events()`` streams, ``wait()`` blocks for the result, ``stop()`` ends it."""

    def __init__(self, plan: Plan, run_dir: Path, job: WorkerJob, sinks: Iterable[Any] = (), grace_s: float = DEFAULT_GRACE_S):
        self.plan = plan
        self.run_dir = run_dir
        self.run_id = run_dir.name
        self.job = job
        self.events_dir = run_dir
        self.grace_s = grace_s
        self.argvs: list[list[str]] = []
        self._procs: list[subprocess.Popen | None] = []
        self._sinks = FanOut(sinks)
        self._events: list[Event] = []
        self._cond = threading.Condition()
        self._lock = threading.Lock()
        self._files = RankFiles(run_dir)
        self._out = open(run_dir / store.EVENTS_FILE, "a", encoding="utf-8")  # noqa: SIM115
        self._started_at = time.time()
        self._failure: RunFailed | None = None
        self._stop_kind: str | None = None  # "user" or "failure"
        self._stop_at: float | None = None
        self._sent: set[int] = set()
        self._exited: set[int] = set()
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
        if not self.done:
            self.stop()
        self.wait()

    # -- starting --------------------------------------------------------------------

    def _start(self) -> None:
        with open(self.run_dir / store.LOG_FILE, "ab", buffering=0) as logf:
            for launch in self.plan.launches:
                argv = resolve_argv(launch.argv, self.run_dir)
                self.argvs.append(argv)
                logf.write(f"# accelctl: launch {launch.name}: {Launch(launch.name, tuple(argv)).shell()}\n".encode())
                try:
                    proc = subprocess.Popen(  # noqa: S603 - argv list, never a shell
                        argv,
                        env=launch_env(launch, self.run_dir, self.events_dir),
                        stdin=subprocess.DEVNULL,
                        stdout=logf,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                except OSError as exc:
                    self._procs.append(None)
                    self._emit(RunFailed(reason="launch_error", message=f"cannot start {launch.name!r}: {exc}"))
                    self._begin_stop("failure")
                    break
                self._procs.append(proc)
        self._thread.start()

    # -- supervisor thread --------------------------------------------------------------

    def _supervise(self) -> None:
        try:
            while True:
                self._drain()
                self._check_processes()
                self._escalate()
                if len(self._exited) == sum(p is not None for p in self._procs):
                    break
                time.sleep(POLL_S)
            self._drain(final=True)
            self._check_processes()
        except BaseException as exc:  # noqa: BLE001 - the run must still end cleanly
            log.exception("runner supervisor failed")
            self._emit(RunFailed(reason="runner_error", message=f"{type(exc).__name__}: {exc}"))
            self._kill_all(signal.SIGKILL)
            for p in self._procs:
                if p is not None:
                    p.wait()
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
        if isinstance(event, RunFailed) and (self._failure is None or (self._failure.reason == "stopped" and event.reason != "stopped")):
            self._failure = event
        with self._cond:
            self._events.append(event)
            self._cond.notify_all()
        self._sinks.on_event(event)

    def _check_processes(self) -> None:
        for i, proc in enumerate(self._procs):
            if proc is None or i in self._exited or proc.poll() is None:
                continue
            self._exited.add(i)
            rc = proc.returncode
            if rc == 0:
                continue
            self._drain()  # its last words may have landed since the previous tick
            name = self.plan.launches[i].name
            if self._failure is None:
                how = f"signal {-rc}" if rc < 0 else f"exit code {rc}"
                if self._stop_kind == "user":
                    self._emit(RunFailed(reason="stopped", message=f"{name!r} ended by stop ({how})"))
                else:
                    tail = log_tail(self.run_dir / store.LOG_FILE)
                    msg = f"{name!r} exited with {how} without reporting a failure; last lines of worker.log:\n{tail}"
                    self._emit(RunFailed(reason="crashed", message=msg))
            self._begin_stop("failure")

    def _begin_stop(self, kind: str) -> None:
        """Start (once) the SIGINT → SIGTERM → SIGKILL sequence; ``kind`` is user or failure."""
        with self._lock:
            if self._result is not None:
                return
            if kind == "user" or self._stop_kind is None:
                self._stop_kind = kind
            if self._stop_at is None:
                self._stop_at = time.monotonic()
                self._signal_alive(signal.SIGINT)

    def _escalate(self) -> None:
        with self._lock:
            if self._stop_at is None:
                return
            elapsed = time.monotonic() - self._stop_at
            for sig, after in ((signal.SIGTERM, self.grace_s), (signal.SIGKILL, 2 * self.grace_s)):
                if elapsed >= after and sig not in self._sent:
                    self._sent.add(sig)
                    self._signal_alive(sig)

    def _signal_alive(self, sig: int) -> None:
        for i, proc in enumerate(self._procs):
            if proc is not None and i not in self._exited and proc.returncode is None:
                _killpg(proc.pid, sig)

    def _kill_all(self, sig: int) -> None:
        for proc in self._procs:
            if proc is not None:
                _killpg(proc.pid, sig)

    def _reap_groups(self, timeout_s: float = 5.0) -> None:
        """No member of a launched process group may outlive the run."""
        pgids = [p.pid for p in self._procs if p is not None]
        alive = [g for g in pgids if _group_alive(g)]
        for g in alive:
            _killpg(g, signal.SIGKILL)
        deadline = time.monotonic() + timeout_s
        while alive and time.monotonic() < deadline:
            time.sleep(POLL_S)
            alive = [g for g in alive if _group_alive(g)]
        if alive:
            log.warning("process groups %s still have members after SIGKILL", alive)

    def _finish(self) -> None:
        try:
            self._reap_groups()
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

    def _returncodes(self) -> tuple[int, ...]:
        return tuple(127 if p is None else (p.returncode if p.returncode is not None else -1) for p in self._procs)

    def _summary(self) -> dict[str, Any]:
        launches = [
            {"name": ln.name, "argv": argv, "pid": p.pid if p else None, "returncode": rc}
            for ln, argv, p, rc in zip(self.plan.launches, self.argvs, self._procs, self._returncodes())
        ]
        return build_summary(
            plan=self.plan,
            job=self.job,
            run_id=self.run_id,
            events=list(self._events),
            stop_kind=self._stop_kind,
            failure=self._failure,
            launches=launches,
            started_unix_s=self._started_at,
            finished_unix_s=time.time(),
        )


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# --------------------------------------------------------------------------- entry point


def launch(
    plan: Plan,
    *,
    source_text: str | None,
    spec_json: str | Mapping[str, Any] | None,
    runs_root: str | os.PathLike[str] | None = None,
    sinks: Iterable[Any] = (),
    grace_s: float = DEFAULT_GRACE_S,
) -> RunHandle:
    """Materialise ``plan`` into a new run folder, start its launches, return at once.

    ``sinks`` are callables or objects with ``on_event``/``close`` (``accelctl.run.sinks``).
    A plan whose generated files escape the run folder raises ``RunStoreError`` before
    anything starts.
    """
    run_dir = store.new_run_dir(plan.workload, plan.target, runs_root)
    job = store.write_inputs(run_dir, plan, source_text=source_text, spec_json=spec_json, events_dir=run_dir)
    handle = RunHandle(plan, run_dir, job, sinks, grace_s)
    handle._start()
    return handle
