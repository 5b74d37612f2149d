"""Where ``accelctl report --tensorboard/--mlflow/--wandb`` writes: checked before anything is
exported, each failure one line naming the path and the errno, and what a failed export made
removed again.

* ``refusal(flag, path, exc)``: the ``AccelctlError`` (exit 1) of a path an export cannot write,
  ``--tensorboard: cannot export to PATH: No space left on device (ENOSPC)``; a path holding a
  newline (or anything else a terminal would not show as itself) is quoted as Python's repr.
* ``os_error(exc)``: the OS error behind a library's exception: an ``OSError`` in its chain,
  SQLite's ``SQLITE_FULL`` (what a failed write of its file is), or an errno's text ending its
  message (wandb-core, in Go: ``write PATH: no space left on device``).
* ``writable_folder(path)``: makes the folder (and the folders missing above it), then writes,
  syncs and removes a probe file in it: a full, read-only, unsearchable, missing or special
  place fails here, before any export starts, with the errno the system gave.
* ``Undo``: the paths an export is about to create (the topmost missing one of each); ``undo()``
  removes them, never anything that was there before; ``keep()`` once the export is whole.
* ``write_file(path, data)``: one file a command writes (``-o FILE``, ``--plot FILE``, ``init -o``)
  whole or not at all; ``refusal(flag, path, exc, "write")`` is its line.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
import tempfile
from pathlib import Path

from accelctl.errors import AccelctlError

#: SQLite's primary result codes that are one errno (``SQLITE_FULL``: a write that failed for space)
_SQLITE_ERRNO = {13: errno.ENOSPC}


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` as one line of text: itself, or its repr where it is empty or holds a newline, a
    control character or bytes that are not text."""
    text = os.fspath(path)
    return text if text and text.isprintable() else repr(text)


def os_error(exc: BaseException) -> OSError | None:
    """The OS error behind ``exc`` (itself, its causes, a DB-API error's ``orig``, the text of
    its message); None where none is known."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        x = todo.pop(0)
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, OSError) and x.errno:
            return x
        code = getattr(x, "sqlite_errorcode", None)
        if isinstance(code, int) and (code & 0xFF) in _SQLITE_ERRNO:
            no = _SQLITE_ERRNO[code & 0xFF]
            return OSError(no, os.strerror(no))
        todo += [x.__cause__, x.__context__, getattr(x, "orig", None)]
    return errno_in(str(exc))


def errno_in(text: str) -> OSError | None:
    """The errno whose text ends ``text`` (or one of its lines), in any case: how Go and C
    tools end an error (``open PATH: permission denied``)."""
    for line in reversed(text.lower().splitlines()):
        line = line.strip().rstrip(".\"'}")
        for no in sorted(errno.errorcode, key=lambda n: -len(os.strerror(n))):
            if line.endswith(": " + os.strerror(no).lower()):
                return OSError(no, os.strerror(no))
    return None


def refusal(flag: str, path: str | os.PathLike[str], exc: BaseException, verb: str = "export to") -> AccelctlError:
    """The one line (exit 1) of an export (or a file: ``verb`` "write") that could not write ``path``."""
    err = exc if isinstance(exc, OSError) and exc.errno else os_error(exc)
    if err is not None and err.errno:
        text = err.strerror if isinstance(err, NotWritable) else os.strerror(err.errno)
        why = f"{text} ({errno.errorcode.get(err.errno, err.errno)})"
    else:
        why = " ".join(str(getattr(exc, "message", exc)).split())[:300] or type(exc).__name__
    return AccelctlError(f"{flag}: cannot {verb} {shown(path)}: {why}")


class NotWritable(OSError):
    """A place ``write_file`` refuses; its ``strerror`` says why in words of its own."""


def _not(no: int, path: Path) -> OSError:
    return OSError(no, os.strerror(no), os.fspath(path))


def writable_folder(path: Path) -> None:
    """Make ``path`` a folder this process can write, or raise the ``OSError`` that says why not
    (``ENOTDIR`` for a file, FIFO or device in its place, ``ENOENT`` for a link to nothing)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # something that is not a folder is there (or a link to nothing)
        pass
    if not stat.S_ISDIR(os.stat(path).st_mode):
        raise _not(errno.ENOTDIR, path)
    fd, probe = tempfile.mkstemp(prefix=".accelctl-probe-", dir=path)
    try:
        os.write(fd, b"\0")
        os.fsync(fd)
    finally:
        os.close(fd)
        os.unlink(probe)


def writable_file(path: Path) -> None:
    """``path`` is a regular file this process can open for writing, or nothing yet in a
    writable folder (which is not made: a database's folder is the user's)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.lexists(path):  # a link to nothing
            raise
        writable_folder_exists(path.parent)
        return
    if stat.S_ISDIR(st.st_mode):
        raise _not(errno.EISDIR, path)
    if not stat.S_ISREG(st.st_mode):  # a FIFO, a device, a socket: not a file a store can live in
        raise _not(errno.EINVAL, path)
    os.close(os.open(path, os.O_RDWR | os.O_CLOEXEC))
    writable_folder_exists(path.parent)  # SQLite writes its journal beside the file


def writable_folder_exists(path: Path) -> None:
    """``writable_folder`` of a folder that must be there already."""
    if not os.path.lexists(path):
        raise _not(errno.ENOENT, path)
    writable_folder(path)


class Undo:
    """What an export will create, removed again if it does not finish."""

    def __init__(self) -> None:
        self._made: list[Path] = []

    def track(self, path: str | os.PathLike[str]) -> None:
        """Call before ``path`` may be created: remembers the topmost of it and the folders
        above it that is not there (nothing when ``path`` is; a place that cannot be looked
        at counts as there).  Its ``..`` are kept, as ``mkdir -p`` walks them: ``new/../x``
        makes ``new``."""
        p, top = Path(os.getcwd(), path), None
        while True:
            try:
                os.lstat(p)
                break
            except FileNotFoundError:
                top = p
            except OSError:
                return
            if p.parent == p:
                break
            p = p.parent
        if top is not None and top not in self._made:
            self._made.append(top)

    def keep(self) -> None:
        """The export is whole: what it made stays."""
        self._made.clear()

    def undo(self) -> None:
        for p in reversed(self._made):
            remove(p)
        self._made.clear()


def remove(path: Path) -> None:
    """Remove ``path`` (a folder with what it holds, a file or a link), whatever is in the way."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


# ----------------------------------------------------------------------------- one file


def write_file(path: str | os.PathLike[str], data: bytes, make_folders: bool = False) -> None:
    """Write ``data`` as the file ``path``, whole or not at all, or raise the ``OSError`` saying why.

    A regular file (or nothing yet; not a link to one) is written to a temporary
    file in its folder, synced and renamed over it: a failure (a full disk) leaves no temporary
    file and an earlier file as it was (its mode kept).  A FIFO or a character device
    (``/dev/null``, ``/dev/stdout``) is written as it is, opened without waiting for a reader: a
    FIFO nobody reads is ENXIO at once, never a hang.  A folder (EISDIR) or anything else
    (a block device, a socket) is refused unopened.  ``make_folders``: the missing folders above
    are made, and removed again if the write fails."""
    given = os.fspath(path)
    if not given:  # no file at all, not the folder "" stands for elsewhere
        raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), given)
    try:
        st = os.stat(given)
    except FileNotFoundError:
        st = None
    if st is None and given.endswith(os.sep):
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), given)
    if st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        return _write_stream(given, data, st.st_mode)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OSError(errno.EISDIR, os.strerror(errno.EISDIR), given)
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise NotWritable(errno.EINVAL, "not a regular file, a FIFO or a character device", given)
    if st is not None and not os.access(given, os.W_OK):
        raise OSError(errno.EACCES, os.strerror(errno.EACCES), given)
    if os.path.islink(given):  # replacing what a link names would pass by the kernel's checks of links
        raise NotWritable(errno.ELOOP, "a symbolic link: give the file it names", given)
    real = Path(os.path.realpath(given))
    undo = Undo()
    if make_folders:
        undo.track(real.parent)
    tmp, fd = real.parent / f".{real.name[:50]}.{secrets.token_hex(6)}.partial", -1
    try:
        if make_folders:
            try:
                os.makedirs(real.parent, exist_ok=True)
            except FileExistsError:  # a file where a folder goes
                raise OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), os.fspath(real.parent)) from None
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        try:
            if st is not None:
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, real)
    except BaseException:
        if fd != -1:  # made by this call (never another's file of that name)
            remove(tmp)
        undo.undo()
        raise


def _write_stream(path: str, data: bytes, st_mode: int) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ENXIO and stat.S_ISFIFO(st_mode):
            raise NotWritable(errno.ENXIO, "a FIFO no process reads", path) from None
        raise
    try:
        os.set_blocking(fd, True)  # a reader is there: wait on it as any writer to a pipe does
        _write_all(fd, data)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
