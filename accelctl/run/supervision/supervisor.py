"""The process supervisor of a run: the launches' processes, from start to reaping.

It starts each launch in its own session (a signal to the group reaches torchrun and every
worker below it) through ``EXEC_PROLOGUE`` (the parent-death signal: a SIGKILLed runner leaves
no launch behind), from one long-lived thread (``_Forker``); it polls them, escalates a stop
(SIGINT to each process group, SIGTERM after ``grace_s``, SIGKILL after twice ``grace_s``),
ends a launcher whose ranks are done (``end_launcher``) and, once the run is over, reaps what is
left of the groups and of the run (``reap``).  It decides nothing about the run's outcome: which
exit is a failure, and what the run records for it, is ``accelctl.run.store.outcome``'s, applied by
the ``RunHandle`` (``accelctl.run.supervision.runner``).
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelctl.contract import envnames
from accelctl.run import procgroup
from accelctl.run.supervision import scheduled

log = logging.getLogger("accelctl.run")

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


def launch_umask() -> int:
    """This process's umask with write for group and others taken away: what a run writes (its
    checkpoints among it) only its user can change, whatever the site's umask (002 on many
    clusters), so ``run --resume`` can trust it.  /proc's ``Umask:`` line, which psutil does
    not give, reads it without changing it."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            current = next(int(line.split()[1], 8) for line in fh if line.startswith("Umask:"))
    except (OSError, StopIteration, ValueError, IndexError):
        current = os.umask(0o022)  # no /proc: read it by setting it (back at once)
        os.umask(current)
    return current | 0o022


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


class ProcessSupervisor:
    """The processes of one run's launches (one slot per launch of the plan, in plan order)."""

    def __init__(self, launches: int, grace_s: float) -> None:
        #: one per launch; None until started (and for ever when it never starts); a scheduled
        #: job (``accelctl.run.supervision.scheduled``) stands for a launch a cluster runs
        self.procs: list[Any] = [None] * launches
        #: one per launch: its exit code once seen (127: could not be started), else None
        self.rcs: list[int | None] = [None] * launches
        #: one per launch: [start, end] unix seconds
        self.times: list[list[float]] = [[] for _ in range(launches)]
        self.grace_s = grace_s
        #: when the stop began (monotonic); None: no stop under way
        self.stop_at: float | None = None
        self._sent: set[int] = set()

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self.procs if p is not None and p.pid is not None]  # (a scheduler's job has none)

    def running(self) -> list[int]:
        """The launches started and not seen exited."""
        return [i for i, p in enumerate(self.procs) if p is not None and self.rcs[i] is None]

    def start(self, i: int, argv: list[str], env: Mapping[str, str], cwd: str | None, logf) -> Any:
        """Start launch ``i`` in a session of its own, its output to ``logf``."""
        self.adopt(i, _FORKER.popen(with_exec_prologue(argv, env), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL,
                                    stdout=logf, stderr=subprocess.STDOUT, start_new_session=True,
                                    umask=launch_umask()))
        return self.procs[i]

    def adopt(self, i: int, proc: Any) -> None:
        """Launch ``i`` is ``proc``, started elsewhere (a shared worker, a submitted job)."""
        self.procs[i] = proc
        self.times[i] = [time.time()]

    def poll(self, i: int) -> int | None:
        return self.procs[i].poll()

    def exited(self, i: int, rc: int) -> None:
        self.rcs[i] = rc
        self.times[i].append(time.time())

    def begin_stop(self) -> None:
        """SIGINT to every launch still running, once: the stop's escalation counts from here."""
        if self.stop_at is None and self.running():
            self.stop_at = time.monotonic()
            self.signal_alive(signal.SIGINT)

    def escalate(self) -> None:
        """SIGTERM ``grace_s`` after the stop began, SIGKILL after twice that."""
        if self.stop_at is None:
            return
        elapsed = time.monotonic() - self.stop_at
        for sig, after in ((signal.SIGTERM, self.grace_s), (signal.SIGKILL, 2 * self.grace_s)):
            if elapsed >= after and sig not in self._sent:
                self._sent.add(sig)
                self.signal_alive(sig)

    def signal_alive(self, sig: int) -> None:
        for i in self.running():
            scheduled.signal_launch(self.procs[i], sig)

    def kill_all(self, sig: int) -> None:
        for proc in self.procs:
            if proc is not None:
                scheduled.signal_launch(proc, sig)

    def wait_all(self) -> None:
        """Wait for every launch not seen exited (after ``kill_all``)."""
        for i in self.running():
            self.rcs[i] = self.procs[i].wait()

    def end_launcher(self, i: int) -> int:
        """End launch ``i``'s process group, deepest member first (``procgroup.end_leaves_first``):
        its ranks are done, what is left is the launcher's own teardown.  0: the run succeeded by
        their word; the launcher's exit code is not waited for."""
        proc = self.procs[i]
        procgroup.end_leaves_first(proc.pid)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass  # reaped with the rest in reap()
        return 0

    def reap(self, events_dir: Path, run_id: str) -> None:
        """SIGKILL what is left of the launches' groups and wait for them; then SIGKILL any process
        of this run still there -- one a launcher put in a session of its own (torchrun's ranks)
        and left behind, found by the events folder in its environment."""
        procgroup.reap(self.pids)
        left = procgroup.carrying(envnames.EVENTS_DIR, str(events_dir))
        if left:
            log.warning("run %s: %d process(es) outlived their launch; killed: %s", run_id, len(left), left)
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
