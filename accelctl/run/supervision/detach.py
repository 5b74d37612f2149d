"""Runs that outlive the terminal: ``accelctl run FILE --detach`` and ``accelctl cancel RUN``.

``start`` starts the run's supervisor (``entrypoints.SUPERVISOR``, given the checked and planned
runs on its stdin: ``accelctl.run.supervision.batch``) in a session of its own, its console stream under
``<store>/.detached/``, and returns once a run folder names it in ``runner.json`` (or once it
ended before any run).  It is a runner like any other, so one killed with SIGKILL leaves no
worker behind; it ignores SIGHUP.  A foreground run starts the same supervisor (``spawn``).
``cancel`` stops a run from any process: SIGTERM to its supervisor, then a wait until nothing of
the run is left, killing only what is proven the run's (``accelctl.run.store.proof``); a scheduler's
job left behind by a lost supervisor is cancelled by its handle (``accelctl.run.store.scheduled_job``).
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from accelctl import entrypoints, exitcodes
from accelctl.contract import supervision
from accelctl.errors import RunError
from accelctl.private_files import store_opener
from accelctl.run import store
from accelctl.run.store import liveness, proof, scheduled_job
from accelctl.run.store.consoles import CONSOLE_DIR

POLL_S = 0.05


@dataclass(frozen=True)
class Started:
    """A detached start: the first run's id (None when the supervisor ended before any run),
    the supervisor's pid, its console file, and its exit code when it has already ended."""

    run_id: str | None
    pid: int
    console: Path
    returncode: int | None = None

    def console_text(self, limit: int = 64 * 1024) -> str:
        try:
            with open(self.console, "rb") as fh:
                fh.seek(max(0, fh.seek(0, os.SEEK_END) - limit))
                return fh.read().decode("utf-8", "replace")
        except OSError:
            return ""


@dataclass(frozen=True)
class Spawned:
    """A supervisor just started: its process, its console stream (stdout, and stderr unless
    ``errors``) and, when asked, its stderr in a file of its own (``errors``)."""

    proc: subprocess.Popen
    console: Path
    errors: Path | None = None


def spawn(batch: bytes, root: Path, cwd: str | None = None, split: bool = False,
          folder: Path | None = None) -> Spawned:
    """Start the supervisor (``entrypoints.SUPERVISOR``) of ``batch`` (``accelctl.run.supervision.batch``:
    checked and planned, given on its stdin) in a session of its own, storing into ``root``, and
    return at once; ``split``: its stderr in a file beside its console (``.stderr``); the console
    files in ``folder`` (default: the store's ``CONSOLE_DIR``)."""
    base = store.runs_root(root)
    if folder is None:  # the store too, where it is not there yet: as a run makes it
        folder = store.make_folders(base / CONSOLE_DIR)
    console = folder / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}.console"
    errors = console.with_suffix(".stderr") if split else None
    env = dict(os.environ)
    package_parent = str(Path(__file__).resolve().parents[3])  # this accelctl, whatever the cwd
    env["PYTHONPATH"] = os.pathsep.join([package_parent, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                            if p and p != package_parent]])
    # the batch in an unnamed file: read by the supervisor at its start, never blocking this one
    with tempfile.TemporaryFile() as given, open(console, "ab", opener=store_opener) as out, \
            open(errors or os.devnull, "ab", opener=store_opener) as err:
        given.write(batch)
        given.seek(0)
        proc = subprocess.Popen(  # noqa: S603 - an argv list, never a shell
            [sys.executable, "-m", entrypoints.SUPERVISOR], stdin=given, stdout=out,
            stderr=err if split else subprocess.STDOUT, cwd=cwd, env=env, start_new_session=True, close_fds=True)
    ident = supervision.identity(proc.pid)
    if ident:  # named by its supervisor, so that ``runs gc`` knows when it has ended
        console, errors = (_named(p, ident) if p else None for p in (console, errors))
    return Spawned(proc, console, errors)


def _named(path: Path, ident: str) -> Path:
    try:
        return path.rename(path.with_name(f"{path.stem}-{ident.replace(':', '_')}{path.suffix}"))
    except OSError:
        return path


def start(batch: bytes, root: Path, cwd: str | None = None) -> Started:
    """Start the supervisor of ``batch`` detached, storing into ``root``; return when its first
    run folder exists or it has ended."""
    base = store.runs_root(root)
    before = set(os.listdir(base)) if base.is_dir() else set()
    spawned = spawn(batch, root, cwd)
    proc, console = spawned.proc, spawned.console
    try:
        while True:
            run_id = first_run_of(proc.pid, base, before)
            if run_id is not None:
                return Started(run_id, proc.pid, console)
            code = proc.poll()
            if code is not None:
                run_id = first_run_of(proc.pid, base, before)  # one made in the last poll
                return Started(run_id, proc.pid, console, None if run_id else code)
            time.sleep(POLL_S)
    except KeyboardInterrupt:  # Ctrl-C while it checks or preflights: it goes on, and says where
        raise KeyboardInterrupt(f"the detached supervisor (pid {proc.pid}) goes on; its console: {console}") from None


def first_run_of(pid: int, base: Path, before: set[str]) -> str | None:
    """The oldest new run folder of ``base`` whose ``runner.json`` names process ``pid``."""
    try:
        names = sorted(set(os.listdir(base)) - before)
    except OSError:
        return None
    for name in names:
        if store.is_run_id(name):
            ident = str(store.read_json(base / name / store.RUNNER_FILE).get("runner") or "")
            if ident.partition(":")[0] == str(pid):
                return name
    return None


@dataclass(frozen=True)
class Cancelled:
    """How ``cancel`` ended: the run's status now, whether it was still going when asked, and
    the pids of its processes still alive at the end ([] : none)."""

    status: str
    was_running: bool
    left: list[int]


def run_processes(run_dir: Path) -> list[int]:
    """Every live process proven to be the run's (``accelctl.run.store.proof``): what carries its events
    folder in its environment, and what descends from that; never a recorded pid or group."""
    return proof.processes(run_dir)


def cancel(record: store.RunRecord, timeout_s: float = 60.0) -> Cancelled:
    """Stop ``record``'s run from any process and wait (up to ``timeout_s``) for it to end with
    nothing left running; what is left then is killed (SIGKILL).  Only processes proven to be
    the run's are signalled (``accelctl.run.store.proof``); a run that cannot be read, or one recorded
    in another boot, has none: ``RunError`` says so and nothing is signalled."""
    path = record.path
    if record.unreadable:
        raise RunError(f"run {record.id} is {record.status}: nothing of it is known to be running, and nothing "
                       "was signalled", exit_code=exitcodes.FAILED)
    info = proof.runner_info(path)
    host = (info or {}).get("host") or {}
    job = scheduled_job.live(path)  # a cluster's job goes on without its supervisor: cancelled by its handle
    if not liveness.in_progress(record) and not run_processes(path) and job is None:
        return Cancelled(record.status, False, [])
    pid = proof.supervisor(path, info)
    if pid is None and host.get("name") and host.get("name") != os.uname().nodename:
        raise RunError(f"run {record.id} is supervised on {host.get('name')}, not on this machine: cancel it there",
                       exit_code=exitcodes.USAGE)
    if pid is None and job is None and not run_processes(path):
        raise RunError(f"run {record.id} has no supervisor or process proven to be its own (its runner.json names "
                       f"{(info or {}).get('runner') or 'no runner'}, which does not hold the run folder's lock): "
                       "nothing was signalled", exit_code=exitcodes.FAILED)
    if pid is not None and entrypoints.SUPERVISOR not in _argv(pid):  # the TUI, a sweep: SIGTERM would end more
        raise RunError(f"run {record.id} is run inside pid {pid} ({' '.join(_argv(pid))[:80]}), not by an "
                       "`accelctl run`: stop it there", exit_code=exitcodes.USAGE)
    if pid is not None:
        try:
            os.kill(pid, signal.SIGTERM)  # its runner stops the run as on Ctrl-C, and records it
        except (ProcessLookupError, PermissionError):
            pid = None
    if job is not None and pid is None:
        scheduled_job.cancel(path, *job)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        again = store.read_run(path)
        if not liveness.in_progress(again) and not run_processes(path):
            if job is not None and scheduled_job.live(path) is not None:  # its supervisor ended, the job not
                scheduled_job.cancel(path, *job)
            return Cancelled(again.status, True, [])
        if pid is None or proof.supervisor(path) is None:  # no supervisor to stop it: end what is left
            _kill(run_processes(path))
        time.sleep(0.1)
    _kill(run_processes(path))
    time.sleep(0.2)
    return Cancelled(store.read_run(path).status, True, run_processes(path))


def _argv(pid: int) -> list[str]:
    import psutil

    try:
        return psutil.Process(pid).cmdline()
    except psutil.Error:
        return []


def _kill(pids: list[int]) -> None:
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
