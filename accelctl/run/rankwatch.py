"""Which rank of a launch died first, seen from /proc (Linux).

A launcher answers a dead rank by ending the others: torchrun names the rank in its report,
the DeepSpeed launcher only logs an exit code ("exits with return code = -9") and then
SIGTERMs the survivors.  A survivor usually reports ``stopped`` before it goes, which leaves
the dead rank the only silent one (``runner.crashed_rank``); on a loaded machine a survivor
can be killed before it reports, and then two ranks are silent.  ``RankWatch`` tells them
apart by time: while the run runs, the supervisor asks it every few ticks which worker
processes under the launch are still alive, and the first rank whose process is gone (or a
zombie) while nobody asked for a stop is the one that died.

The worker processes are found as descendants of the launch processes accelctl started
(``/proc/PID/task/TID/children``) whose command line runs ``accelctl.worker`` and whose
environment names their ``RANK`` (a single worker has none: rank 0).  Nothing here signals or
waits for a process; a /proc file that cannot be read is a process that is gone, or not ours.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

#: a worker runs this module (``python [-u] -m accelctl.worker JOB``); a launcher's command line
#: may name it too, after its own ``-m`` (``python -m deepspeed.launcher.launch ... -m
#: accelctl.worker JOB``): the FIRST ``-m`` is what a process runs
_WORKER = b"accelctl.worker"


def _children(pid: int) -> list[int]:
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


def _runs_worker(argv: list[bytes]) -> bool:
    """The interpreter's own options end at ``-m MODULE``, ``-c CODE`` or a script: a worker
    is a process whose first of those is ``-m accelctl.worker``."""
    for i, arg in enumerate(argv[1:], 1):
        if arg == b"-m":
            return argv[i + 1:i + 2] == [_WORKER]
        if arg == b"-c" or not arg.startswith(b"-"):
            return False
    return False


def _rank_of(pid: int) -> int | None:
    """The RANK of worker process ``pid``; None when it is not a worker (or is gone)."""
    try:
        if not _runs_worker(Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")):
            return None
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    for var in env:
        if var.startswith(b"RANK="):
            try:
                return int(var[5:])
            except ValueError:
                return None
    return 0


def _state(pid: int) -> tuple[bool, int | None]:
    """(alive, return code): running, or gone; a zombie (ended, not yet reaped by its
    launcher) also gives its return code as ``subprocess`` writes it (-9: SIGKILL), from the
    wait status in /proc/PID/stat's field 52 (Linux 3.5+)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False, None
    fields = stat[stat.rfind(")") + 2:].split()
    if not fields or fields[0] not in ("Z", "X"):
        return True, None
    try:
        status = int(fields[49])  # field 52 of the whole line: pid and comm come before
    except (IndexError, ValueError):
        return False, None
    return False, (-(status & 0x7F) if status & 0x7F else (status >> 8) & 0xFF)


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
