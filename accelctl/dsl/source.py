"""Reading a workload file: the one function every verb opens a workload path with.

``read_source(path)`` returns the file's text or raises ``WorkloadError`` with one diagnostic
(``file: error[E00x]: ...``), never an ``OSError``, and never blocks or reads without limit: E001
nothing there; E004 over ``MAX_SOURCE_BYTES`` (from its size, and again from what was read); E002
anything else that is not a readable regular UTF-8 file (a directory, FIFO, device, link loop,
no permission, bad bytes: positioned).  The path is ``stat``-ed first, so a device or FIFO is
refused unopened, then opened with ``O_NONBLOCK`` and read with a bound of ``MAX_SOURCE_BYTES + 1``.
"""

from __future__ import annotations

import errno
import os
import stat

from accelctl.errors import Diagnostic, Span, WorkloadError

#: a workload file larger than this is refused before it is read (E004), far above any shipped
#: workload.  It also bounds parsing's memory (docs/language.md, Limits)
MAX_SOURCE_BYTES = 2**20

#: what ``stat`` says a path is, for "not a regular file" messages
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))

_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def read_source(path: str | os.PathLike[str]) -> str:
    """A workload file's text; ``WorkloadError`` (E001, E002, E004) when it cannot be one."""
    name = os.fspath(path)
    try:
        return _decode(_read_bounded(name), name)
    except OSError as exc:
        raise WorkloadError(diagnostics=[_os_error(exc, name)]) from None
    except ValueError:  # a NUL in the name, or a character no file name can hold
        raise WorkloadError(diagnostics=[Diagnostic("E002", f"cannot read {name!r}: not a possible file name",
                                                    path=name, hint="check the path")]) from None


def absent(path: str | os.PathLike[str]) -> bool:
    """Nothing at all at ``path`` (not even a broken link): the command line named a file
    that does not exist.  Any other trouble is ``read_source``'s to report."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except (OSError, ValueError):
        return False
    return False


def too_large(size: int, path: str, read: bool = False) -> Diagnostic:
    """E004: ``size`` bytes (``read``: at least, as read so far) is over ``MAX_SOURCE_BYTES``."""
    what = f"holds more than {MAX_SOURCE_BYTES:,} bytes" if read else f"is {size:,} bytes"
    return Diagnostic("E004", f"file {what}, over the limit of {MAX_SOURCE_BYTES / 2**20:g} MiB "
                      f"({MAX_SOURCE_BYTES:,} bytes)", Span.point(1, 1), path,
                      "split it into several workload files")


def _read_bounded(name: str) -> bytes:
    """The bytes of regular file ``name``, at most ``MAX_SOURCE_BYTES + 1`` of them."""
    _refuse_unless_regular(os.stat(name), name)  # before opening: a device or FIFO is never opened
    fd = os.open(name, _OPEN_FLAGS)
    try:
        _refuse_unless_regular(os.fstat(fd), name)  # what was opened, if the path changed meanwhile
        limit = MAX_SOURCE_BYTES + 1
        chunks, got = [], 0
        while got < limit:
            chunk = os.read(fd, min(limit - got, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
    finally:
        os.close(fd)
    if got > MAX_SOURCE_BYTES:  # grew since the stat, or a size the file system does not report
        raise WorkloadError(diagnostics=[too_large(got, name, read=True)])
    return b"".join(chunks)


def _refuse_unless_regular(st: os.stat_result, name: str) -> None:
    if not stat.S_ISREG(st.st_mode):
        what = next((kind for test, kind in _KINDS if test(st.st_mode)), "not a regular file")
        hint = ("give a workload file (workloads/*.wl)" if stat.S_ISDIR(st.st_mode)
                else "give a regular workload file; to read a pipe or a device, save it to a file first")
        raise WorkloadError(diagnostics=[Diagnostic("E002", f"cannot read {name}: it is {what}, not a regular file",
                                                    path=name, hint=hint)])
    if st.st_size > MAX_SOURCE_BYTES:  # refused unread
        raise WorkloadError(diagnostics=[too_large(st.st_size, name)])


def _os_error(exc: OSError, name: str) -> Diagnostic:
    """The diagnostic of an ``OSError`` met opening or reading ``name``."""
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        where = _broken_link(name)
        why = (f" (a symbolic link to {where!r}, which does not exist)" if where is not None
               else " (a part of the path before it is a file, not a folder)" if exc.errno == errno.ENOTDIR else "")
        return Diagnostic("E001", f"no such file: {name}{why}", path=name,
                          hint="check the path; workloads live in workloads/*.wl")
    hints = {errno.ELOOP: "the symbolic links in the path lead back to themselves: point one at a real file",
             errno.ENAMETOOLONG: "shorten the path (a name is at most 255 bytes, a path 4096)",
             errno.EACCES: "check the file's permissions", errno.EPERM: "check the file's permissions",
             errno.EISDIR: "give a workload file (workloads/*.wl)",
             errno.EAGAIN: "give a regular workload file", errno.ENXIO: "give a regular workload file"}
    why = exc.strerror or type(exc).__name__
    return Diagnostic("E002", f"cannot read {name}: {why}", path=name,
                      hint=hints.get(exc.errno, "check that the path names a readable workload file"))


def _broken_link(name: str) -> str | None:
    """Where ``name`` points if it is a symbolic link to nothing, else None."""
    try:
        return os.readlink(name) if os.path.islink(name) else None
    except (OSError, ValueError):
        return None


def _decode(data: bytes, name: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise WorkloadError(diagnostics=[_not_utf8(data, exc, name)]) from None


def _not_utf8(data: bytes, exc: UnicodeDecodeError, path: str) -> Diagnostic:
    """E002 at the first byte that is not UTF-8 (line and column of the text before it)."""
    before = data[: exc.start].decode("utf-8", errors="replace")
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    return Diagnostic("E002", f"cannot read {path}: byte 0x{data[exc.start]:02x} at offset {exc.start} is not UTF-8",
                      Span.point(line, column), path, "save it as UTF-8 text")
