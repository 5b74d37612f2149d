"""A run whose runner is gone for good (SIGKILL, a crash, a reboot): its result, kept.

A run with no summary whose runner (``runner.json``) is gone, and none of whose processes still
run, is *lost*.  Reading never waits and never writes: ``store.read_run`` shows the result
computed in memory (``store.lost_run_result``).  ``keep`` writes it (unmerged rank lines into
``events.jsonl``, then ``summary.json``), taken by the folder's next owner under its claim (``run
--resume``, ``runs gc``); ``record`` writes under a non-blocking exclusive lock on ``runner.json``
(held by another: that one is keeping the same result).  Links are not followed; only regular
files are written.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelctl.contract import boundedfile
from accelctl.run import store

_OPEN = os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | os.O_CLOEXEC


def _open_regular(path: Path, flags: int, mode: int = 0o644) -> int | None:
    """A descriptor of ``path`` opened with ``flags``, only when it is a regular file (no link
    followed, no FIFO waited on); None otherwise."""
    try:
        fd = os.open(path, flags | _OPEN, mode)
    except OSError:
        return None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def record(path: Path, summary: Mapping[str, Any], lines: list[bytes]) -> bool:
    """Keep a lost run's result in its folder, unless another reader holds the lock (it is
    keeping the same one) or has kept it already; True when this call wrote it."""
    lock = _open_regular(path / store.RUNNER_FILE, os.O_RDONLY)
    if lock is None:
        return False
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # someone else is finishing it
        if boundedfile.problem(path / store.SUMMARY_FILE) != "":
            return False  # kept already (or a summary.json that is not ours to replace)
        out = _open_regular(path / store.EVENTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        if out is None:
            return False
        try:
            os.write(out, b"".join(line + b"\n" for line in lines))
        finally:
            os.close(out)
        store.write_summary(path, summary)
        return True
    except OSError:
        return False  # a store we may not write: shown as lost all the same
    finally:
        os.close(lock)


def keep(path: Path) -> bool:
    """Write the result of ``path``'s run into its folder if it is a lost run (readable, no
    ``summary.json``, its runner gone); True when this call wrote it.  The caller owns the
    folder (``ownership.claim``): ``run --resume``, ``runs gc``."""
    summary, _, _, _, why, lines = store.read_files(path)  # the folder read once, as a reader reads it
    if why or not summary or lines is None:
        return False
    return record(path, summary, lines)  # summary.json checked again, under the lock
