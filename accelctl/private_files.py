"""Folders and files only this user can write: where accelctl keeps what it reads back later.

A cache (the parsed workloads, the matmul calibration) changes what a command answers, so it is
trusted only where nobody else could have written it -- the checks OpenSSH applies to
``~/.ssh``:

* the folder (symbolic links resolved) is owned by the effective user and not writable by
  group or others; each folder above it is owned by the user or root and not writable by group
  or others unless its sticky bit is set (``/tmp``: nobody can rename another's entries);
* a file is opened without following a link or waiting on a FIFO, and is a regular file owned
  by the user, not writable by group or others.

``make_folder`` creates what is missing mode 0700, whatever the umask; ``store_opener`` creates a
file of the run store at most mode 0644 (others may read it, only its user writes it), whatever
the umask.  A folder that fails the checks is not used: ``distrust`` prints one warning for it on
stderr (once a process) and keeps it for the ``--json`` document's diagnostics
(``take_warnings()``); the command goes on uncached.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from accelctl.errors import Diagnostic

#: the warning's code (docs/language.md, Diagnostics)
CODE = "W010"
_OPEN = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_warned: set[str] = set()  # what ``distrust`` said already in this process
_pending: list[Diagnostic] = []  # ...and the command's document has not taken yet


class Untrusted(OSError):
    """A file or folder that others could have written (``reason`` says why)."""


def _owner_ok(st: os.stat_result, root_too: bool) -> bool:
    return st.st_uid == os.geteuid() or (root_too and st.st_uid == 0)


def _who(mode: int) -> str:
    return {0o020: "its group", 0o002: "others"}.get(mode & 0o022, "its group and others")


def folder_problem(path: Path) -> str:
    """Why ``path`` (an existing folder) is not private to this user; "" when it is."""
    try:
        real = Path(os.path.realpath(path))
        st = os.stat(real)
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    if not stat.S_ISDIR(st.st_mode):
        return f"{path} is not a folder"
    if not _owner_ok(st, root_too=False):
        return f"{real} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"{real} is writable by {_who(st.st_mode)} (mode {st.st_mode & 0o7777:o})"
    for above in real.parents:
        try:
            up = os.stat(above)
        except OSError as exc:
            return f"{above}: {exc.strerror or exc}"
        if not _owner_ok(up, root_too=True):
            return f"{above} (above {real}) is owned by uid {up.st_uid}, neither this user nor root"
        if up.st_mode & 0o022 and not up.st_mode & stat.S_ISVTX:
            return (f"{above} (above {real}) is writable by {_who(up.st_mode)} without the sticky bit "
                    f"(mode {up.st_mode & 0o7777:o})")
    return ""


def make_folder(path: Path) -> str:
    """Create ``path`` and the folders missing above it, mode 0700 whatever the umask; then
    ``folder_problem`` of it ("" when it can be used)."""
    missing = []
    for level in (path, *path.parents):
        if os.path.lexists(level):
            break
        missing.append(level)
    for level in reversed(missing):
        try:
            os.mkdir(level, 0o700)
            os.chmod(level, 0o700)  # mkdir's mode passes through the umask; chmod does not
        except FileExistsError:
            pass
        except OSError as exc:
            return f"{level}: {exc.strerror or exc}"
    return folder_problem(path)


#: a file of the run store: readable by others, writable by its user alone
STORE_FILE_MODE = 0o644


def store_opener(path: str | os.PathLike[str], flags: int) -> int:
    """``open(..., opener=store_opener)``: a new file made at most mode ``STORE_FILE_MODE`` (the
    umask takes away more, never less) -- ``run --resume`` reads back and runs what a run folder
    holds, so a umask of 002 or 000 must not let others change it."""
    return os.open(path, flags | os.O_CLOEXEC, STORE_FILE_MODE)


def open_file(path: Path, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the existing file ``path``, opened without following a link or blocking
    on a FIFO; ``Untrusted`` when it is not a regular file of this user's that only they can
    write (the descriptor closed), ``OSError`` when it cannot be opened."""
    fd = os.open(path, flags | _OPEN)
    try:
        problem = _not_private(path, os.fstat(fd))
        if problem:
            raise Untrusted(problem)
    except BaseException:
        os.close(fd)
        raise
    return fd


def file_problem(path: Path) -> str:
    """Why the file at ``path`` is not one to replace with this user's own ("" when it is, or
    when nothing is there): a link, FIFO, device or folder, or a file others own or could write."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""
    except (OSError, ValueError) as exc:
        return f"{path}: {getattr(exc, 'strerror', None) or exc}"
    return _not_private(path, st)


def _not_private(path: Path, st: os.stat_result) -> str:
    """Why the file ``st`` describes is not this user's own regular file that only they can
    write ("" when it is)."""
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file"
    if not _owner_ok(st, root_too=False) or st.st_mode & 0o022:
        return f"{path} is owned by uid {st.st_uid} with mode {st.st_mode & 0o7777:o}: others could have written it"
    return ""


def read_file(path: Path, limit: int) -> bytes:
    """At most ``limit`` bytes of ``path``, opened as ``open_file`` opens it."""
    fd = open_file(path)
    try:
        chunks, left = [], limit
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def distrust(what: str, path: Path, reason: str) -> None:
    """Say once a process that ``what`` at ``path`` is not used: ``reason``."""
    key = f"{what}\0{path}"
    if key in _warned:
        return
    diag = Diagnostic(CODE, f"{what} not used: {reason}", None, str(path),
                      "make it yours and private (chown $USER, chmod 700), or choose another folder", "warning")
    _warned.add(key)
    _pending.append(diag)
    try:
        print(f"accelctl: warning[{CODE}]: {diag.message}", file=sys.stderr)
    except (OSError, ValueError):
        pass


def new_command() -> None:
    """Forget what earlier commands of this process were told: a command run in-process (the
    TUI, an embedding, a test) gets its own warnings, and its ``--json`` document no others."""
    _warned.clear()
    _pending.clear()


def take_warnings() -> list[Diagnostic]:
    """The warnings ``distrust`` gave since the last call, in order (for a ``--json`` document)."""
    taken = list(_pending)
    _pending.clear()
    return taken
