"""Telling a full disk, for the worker (a checkpoint save) and the runner (a rank that could
not write its events): an errno where there is one, the file system's free space where the
writer lost it.  No torch here."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

#: what a full file system answers a write with
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
#: a file system with less free than this (or than 1 % of a smaller one) is taken for full when a
#: write failed without an errno: torch's C++ file writer (``torch.save`` to a path, as DeepSpeed
#: saves) raises "unexpected pos" over "basic_ios::clear: iostream error", its partial file left
NEARLY_FULL_BYTES = 1 << 20


def chain(exc: BaseException | None) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def says_disk_full(exc: BaseException) -> bool:
    """ENOSPC/EDQUOT (or their words) anywhere in ``exc``'s chain."""
    for e in chain(exc):
        if isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS:
            return True
        if "No space left on device" in str(e) or "Disk quota exceeded" in str(e):
            return True
    return False


def _statvfs(path: Path) -> os.statvfs_result | None:
    for p in (path, *path.parents):  # the nearest folder that exists
        try:
            return os.statvfs(p)
        except OSError:
            continue
    return None


def free_bytes(path: Path) -> int | None:
    """Bytes this process may still write on the file system holding ``path`` (root may use the
    reserved blocks); None where that cannot be asked."""
    st = _statvfs(path)
    return None if st is None else (st.f_bfree if os.geteuid() == 0 else st.f_bavail) * st.f_frsize


def nearly_full(path: Path) -> bool:
    """Is the file system holding ``path`` all but full for this process?"""
    st = _statvfs(path)
    free = free_bytes(path)
    return st is not None and free is not None and free < min(NEARLY_FULL_BYTES, st.f_blocks * st.f_frsize // 100)
