"""Reading a file that someone else may have put there: only a regular file, of bounded size.

A folder a reader is pointed at may hold a FIFO, a link to ``/dev/zero``, a directory or a
device in place of a file.  ``read_regular`` never blocks and never reads past its cap: it
refuses links and anything but a regular file (``lstat``, then ``open`` with ``O_NOFOLLOW |
O_NONBLOCK`` and ``fstat``: the file ``lstat`` saw, within the cap) and reads at most ``cap`` + 1
bytes.  Every refusal is an ``Unreadable`` whose ``reason`` names the file.  Nothing heavy is
imported.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

#: the default cap: a JSON record of a run (summary, plan, job) and a workload file
CAP_BYTES = 16 * 1024 * 1024

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0) | os.O_CLOEXEC


class Unreadable(Exception):
    """A file that is not read: ``reason`` says why, naming the file."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def kind(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO", "a directory" ...)."""
    return ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file")


def _oserror(name: str, exc: OSError) -> Unreadable:
    return Unreadable(f"{name}: {exc.strerror or exc}")


def problem(path: str | os.PathLike[str], cap: int = CAP_BYTES) -> str | None:
    """Why ``path`` would not be read, found without opening it: ``""`` when it is missing,
    None when it is a regular file (not a link) of at most ``cap`` bytes."""
    path = Path(path)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return _oserror(path.name, exc).reason
    except ValueError as exc:  # an embedded NUL
        return f"{path.name!r} is not a path ({exc})"
    return _refusal(path, st, cap)


def _refusal(path: Path, st: os.stat_result, cap: int) -> str | None:
    if stat.S_ISLNK(st.st_mode):
        try:
            os.stat(path)
        except OSError as exc:  # a loop, a dangling link: as the kernel says it
            if exc.errno in (errno.ELOOP, errno.ENOENT):
                return _oserror(path.name, exc).reason
        return f"{path.name} is a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return f"{path.name} is {kind(st.st_mode)}"
    if st.st_size > cap:
        return f"{path.name} is too large ({st.st_size} bytes; at most {cap})"
    return None


def read_regular(path: str | os.PathLike[str], cap: int = CAP_BYTES) -> bytes | None:
    """The bytes of ``path``, a regular file of at most ``cap`` bytes; None when it is missing;
    ``Unreadable`` for anything else (see the module doc)."""
    path = Path(path)
    why = problem(path, cap)
    if why == "":
        return None
    if why is not None:
        raise Unreadable(why)
    try:
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link since the lstat
            raise Unreadable(f"{path.name} is a symbolic link") from None
        raise _oserror(path.name, exc) from None
    try:
        why = _refusal(path, os.fstat(fd), cap)
        if why is not None:
            raise Unreadable(why)
        chunks, left = [], cap + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise _oserror(path.name, exc) from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > cap:
        raise Unreadable(f"{path.name} is too large (it grew past {cap} bytes while read)")
    return data
