"""Which rank of a launch died first, seen from the process table (Linux).

A launcher answers a dead rank by ending the others; a survivor killed before it reports leaves
two silent ranks (``outcome.crashed_rank``).  ``RankWatch`` tells them apart by time: every
supervisor tick it sees which worker processes under the launch live (descendants running
``accelctl.worker``, rank from ``RANK``), and the first one gone while nobody asked for a stop is
the one that died.  psutil reads each process; a process's children
(``/proc/PID/task/TID/children``: psutil's ``children()`` scans the whole table, too slow per tick)
and a zombie's exit status (``/proc/PID/stat`` field 52) are read from /proc.  Nothing here
signals or waits; a process gone, or not ours to read, is skipped.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil

from accelctl import entrypoints

#: a worker runs this module (``python [-u] -m accelctl.worker JOB``); a launcher's command line
#: may name it too, after its own ``-m`` (``python -m deepspeed.launcher.launch ... -m
#: accelctl.worker JOB``): the FIRST ``-m`` is what a process runs
_WORKER = entrypoints.WORKER
#: a process that has ended: a zombie not yet reaped by its launcher, or one on its way out
_ENDED = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


def _children(pid: int) -> list[int]:
    """The children of every thread of ``pid`` (see the module's note: not psutil's scan)."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            out += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
        except (OSError, ValueError):
            continue
    return out


def _runs_worker(argv: list[str]) -> bool:
    """The interpreter's own options end at ``-m MODULE``, ``-c CODE`` or a script: a worker
    is a process whose first of those is ``-m accelctl.worker``."""
    for i, arg in enumerate(argv[1:], 1):
        if arg == "-m":
            return argv[i + 1:i + 2] == [_WORKER]
        if arg == "-c" or not arg.startswith("-"):
            return False
    return False


def _rank_of(pid: int) -> int | None:
    """The RANK of worker process ``pid``; None when it is not a worker (or is gone)."""
    try:
        proc = psutil.Process(pid)
        if not _runs_worker(proc.cmdline()):
            return None
        rank = proc.environ().get("RANK", "0")
    except psutil.Error:
        return None
    try:
        return int(rank)
    except ValueError:
        return None


def _exit_status(pid: int) -> int | None:
    """A zombie's return code as ``subprocess`` writes it (-9: SIGKILL), from the wait status in
    /proc/PID/stat's field 52; None where it cannot be read."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        status = int(stat[stat.rfind(")") + 2:].split()[49])  # field 52 of the whole line: pid and comm come before
    except (OSError, IndexError, ValueError):
        return None
    return -(status & 0x7F) if status & 0x7F else (status >> 8) & 0xFF


def _state(pid: int) -> tuple[bool, int | None]:
    """(alive, return code): running, or gone; a zombie (ended, not yet reaped by its
    launcher) also gives its return code."""
    try:
        status = psutil.Process(pid).status()
    except psutil.Error:
        return False, None
    if status not in _ENDED:
        return True, None
    return False, _exit_status(pid)


class RankWatch:
    """The worker processes of one run's launches, and when each was first seen gone."""

    def __init__(self) -> None:
        self._pids: dict[int, int] = {}  # rank -> pid
        self._gone: dict[int, float] = {}  # rank -> monotonic time first seen gone
        self._codes: dict[int, int] = {}  # rank -> its return code, where seen as a zombie

    def poll(self, launch_pids: list[int]) -> None:
        self._discover(launch_pids)  # a launcher starts its ranks when it likes: look each time
        now = time.monotonic()
        for rank, pid in self._pids.items():
            if rank not in self._gone:
                alive, code = _state(pid)
                if not alive:
                    self._gone[rank] = now
                    if code is not None:
                        self._codes[rank] = code

    def _discover(self, launch_pids: list[int]) -> None:
        known = set(self._pids.values())
        todo, seen = list(launch_pids), set()
        while todo:
            pid = todo.pop()
            if pid in seen or pid in known:
                continue  # a worker's own children (data loaders, inductor's compile pool) are not ranks
            seen.add(pid)
            rank = _rank_of(pid)
            if rank is not None and rank not in self._pids:
                self._pids[rank] = pid
                known.add(pid)
                continue
            todo += _children(pid)

    def all_gone(self, ranks: set[int], for_s: float) -> bool:
        """Every one of ``ranks`` was found as a worker process and has been gone ``for_s``."""
        now = time.monotonic()
        return all(r in self._pids and r in self._gone and now - self._gone[r] >= for_s for r in ranks)

    def first_gone(self) -> dict[int, int | None]:
        """{rank: its return code, or None where it was not seen} of the ranks whose processes
        were seen gone in the earliest poll that saw one gone (two that ended within one poll
        cannot be told apart by time); {} when none was."""
        if not self._gone:
            return {}
        first = min(self._gone.values())
        return {r: self._codes.get(r) for r, t in sorted(self._gone.items()) if t == first}
