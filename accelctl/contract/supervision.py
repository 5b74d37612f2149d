"""Supervision that survives its supervisor: how a launched process learns that the
runner which started it is gone, and how the run store tells a live runner from a dead one.

A process is named by ``<pid>:<start ticks>`` (field 22 of ``/proc/<pid>/stat``): a pid can be
reused, the pair cannot within one boot.  The runner passes its identity in ``ACCELCTL_RUNNER``
and records it in the run folder; ``alive`` says whether that process still exists.
``set_parent_death_signal`` is ``prctl(PR_SET_PDEATHSIG)``: sent when the *thread* that forked the
process ends (so the runner forks from one long-lived thread), kept across ``exec``.  Standard
library only (the worker imports this): psutil's ``create_time()`` cannot be compared exactly with
the recorded ticks, and the store's readers would import psutil for two reads of one /proc file.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first); [] when
    there is no such process (or no /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read().decode("ascii", "replace")
    except OSError:
        return []
    # the command name in parentheses may hold spaces: the fields after its ")" are fixed
    return stat.rsplit(")", 1)[1].split()


def start_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since boot; None when there is no such
    process (or no /proc)."""
    try:
        return int(_stat(pid)[19])
    except (IndexError, ValueError):
        return None


def identity(pid: int | None = None) -> str:
    """``<pid>:<start ticks>`` of ``pid`` (default: this process); "" where /proc is absent."""
    pid = os.getpid() if pid is None else pid
    ticks = start_ticks(pid)
    return "" if ticks is None else f"{pid}:{ticks}"


def parse(ident: str) -> tuple[int, int] | None:
    pid, _, ticks = (ident or "").partition(":")
    try:
        return int(pid), int(ticks)
    except ValueError:
        return None


def alive(ident: str) -> bool:
    """True while the process named by ``ident`` runs; False once it has ended (a zombie
    waiting for its parent has ended) or its pid belongs to another process."""
    parsed = parse(ident)
    if parsed is None:
        return False
    fields = _stat(parsed[0])
    return len(fields) > 19 and fields[0] not in ("Z", "X") and fields[19] == str(parsed[1])


def set_parent_death_signal(sig: int) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent (thread) ends.  False
    where that is not available (not Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # here: the run store imports this module, and ``estimate`` reads the store's path

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class RunnerWatch:
    """Polls the runner named in the environment from a daemon thread; calls ``on_lost``
    once when it is gone.  It watches only a runner it could see when it started: a worker
    on another machine (Slurm, a second torchrun node) or in another pid namespace cannot,
    and is not ended by a runner it never knew."""

    def __init__(self, ident: str, on_lost: Callable[[], None], poll_s: float = 0.5):
        self.ident = ident
        self.on_lost = on_lost
        self.poll_s = poll_s
        self.watching = bool(ident) and alive(ident)
        self._lost = threading.Event()

    @property
    def lost(self) -> bool:
        """True once the runner was seen gone (checked now as well)."""
        if self.watching and not self._lost.is_set() and not alive(self.ident):
            self._lost.set()
        return self._lost.is_set()

    def start(self) -> "RunnerWatch":
        if self.watching:
            threading.Thread(target=self._loop, name="accelctl-runner-watch", daemon=True).start()
        return self

    def _loop(self) -> None:
        while not self.lost:
            time.sleep(self.poll_s)
        self.on_lost()
