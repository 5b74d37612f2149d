"""One owner per run folder: the ``accelctl`` process that runs it or resumes it.

``claim(run_dir)`` takes an exclusive ``flock`` on ``<run_dir>/owner.lock`` through a close-on-exec
descriptor and writes its pid there; the kernel drops the lock when the descriptor closes, however
the process ends, so no dead owner leaves it behind.  A second claim fails at once (``RunBusy``,
exit 2) and writes nothing.  ``accelctl run`` holds it from the folder's creation to its
``summary.json``, ``run --resume`` from before its checks to the resumed summary.  Readers never
take it: ``held_by`` tells, without blocking, whether some process holds it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import time
from pathlib import Path

from accelctl import exitcodes
from accelctl.errors import RunError

OWNER_FILE = "owner.lock"
#: how long a claim that found the lock taken waits for the owner's pid to appear in the file
#: (the owner writes it right after taking the lock)
PID_WAIT_S = 0.5
#: how long a claim retries before it refuses: ``held_by`` holds a shared lock for an instant
CLAIM_RETRY_S = 0.25


class RunBusy(RunError):
    """The run folder is owned by another process (running or resuming it)."""

    def __init__(self, run_dir: Path, pid: int | None) -> None:
        self.run_dir, self.pid = run_dir, pid
        who = f"accelctl pid {pid}" if pid else "another accelctl process"
        super().__init__(f"run {run_dir.name} is in use by {who} (running or resuming it); "
                         "wait for it to end or stop it, then try again", exit_code=exitcodes.USAGE)


class Ownership:
    """A held claim on one run folder; ``release()`` (idempotent) gives it up."""

    def __init__(self, run_dir: Path, fd: int) -> None:
        self.run_dir = run_dir
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)  # no stale pid for the next reader
        except OSError:
            pass
        os.close(fd)  # the kernel drops the lock with the descriptor

    def __enter__(self) -> "Ownership":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:  # a claim nobody released explicitly still ends with its object
        try:
            self.release()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _open(run_dir: Path) -> int:
    """The lock file's descriptor: a regular file, never followed through a symlink, never
    blocking on open (a FIFO put in its place)."""
    fd = os.open(run_dir / OWNER_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunError(f"cannot own run {run_dir.name}: its {OWNER_FILE} is not a regular file")
    return fd


def _pid_in(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        return True
    return True


def claim(run_dir: Path, wait_s: float = CLAIM_RETRY_S) -> Ownership:
    """Own ``run_dir`` or raise ``RunBusy`` (after up to ``wait_s`` seconds of retries: a
    reader's ``held_by`` holds the lock, shared, for an instant).  ``RunError`` when the lock file
    cannot be made (a full disk still takes an empty file: it needs no data block)."""
    try:
        fd = _open(run_dir)
    except OSError as exc:
        raise RunError(f"cannot own run {run_dir.name}: {exc.strerror or exc} opening {run_dir / OWNER_FILE}") from None
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise RunError(f"cannot own run {run_dir.name}: {exc.strerror or exc}") from None
            if time.monotonic() >= deadline:
                pid = _owner_pid(fd)
                os.close(fd)
                raise RunBusy(run_dir, pid) from None
            time.sleep(0.02)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    except OSError:
        pass  # a full disk: the lock holds all the same; only the pid in a refusal is missing
    return Ownership(run_dir, fd)


def _owner_pid(fd: int) -> int | None:
    """The pid the lock's holder wrote, once it is a live process (the holder writes it just
    after taking the lock: a moment's wait; an older owner's pid left by a SIGKILL is dead)."""
    deadline = time.monotonic() + PID_WAIT_S
    while True:
        pid = _pid_in(fd)
        if (pid is not None and _alive(pid)) or time.monotonic() >= deadline:
            return pid if pid is not None and _alive(pid) else None
        time.sleep(0.01)


def holds_open(pid: int, run_dir: Path) -> bool:
    """Whether process ``pid`` has this folder's lock file open by this folder's path: what the
    owner that claimed it has, and what a copy of the folder (its ``owner.lock`` hard-linked to a
    live run's) or a forged pid in the file never has."""
    import psutil  # here: readers of the store need it only to prove an owner

    want = os.path.realpath(run_dir / OWNER_FILE)
    try:
        return any(f.path == want for f in psutil.Process(pid).open_files())
    except psutil.Error:
        return False


def held_by(run_dir: Path) -> int | None | bool:
    """Whether a process owns ``run_dir``, without blocking and without taking the lock: the
    owner's pid, True when owned by a process whose pid is not known, False when not owned (or
    when the folder has no lock file: a run from before owner.lock, or a reader's store)."""
    try:
        fd = os.open(run_dir / OWNER_FILE, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        try:  # a shared lock conflicts only with the owner's exclusive one, and is dropped at once
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            return _pid_in(fd) or True
        return False
    finally:
        os.close(fd)
