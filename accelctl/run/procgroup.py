"""Signalling the process groups the runner started (one session per launch).

Nothing here starts a process.  A launch is started with ``start_new_session=True``, so
its pid is also its process-group id and a signal to the group reaches torchrun and
every worker below it, including their own children.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("accelctl.run")


def signal_group(pgid: int, sig: int) -> None:
    """``killpg`` that ignores a group already gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """True while any member of the group exists (a zombie not yet reaped counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def members(pgid: int) -> list[int]:
    """The pids whose process group is ``pgid`` (read from /proc; [] where there is none):
    what is left of a launch, counted."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
            except OSError:
                continue
            # the command name in parentheses may hold spaces: the fields after its ")" are fixed
            if int(stat.rsplit(")", 1)[1].split()[2]) == pgid:
                out.append(int(d.name))
    return out


def live_members(pgid: int) -> list[int]:
    """``members`` that still run: a zombie (ended, not yet reaped by its new parent, init)
    does not count."""
    return live_members_of(members(pgid))


def carrying(name: str, value: str) -> list[int]:
    """The live processes (zombies apart) whose environment holds ``name=value`` -- every
    process of a run carries its events folder, including the ones a launcher put in sessions
    of their own (torchrun starts each rank with ``start_new_session``, out of the launch's
    process group) and the ones orphaned by a dead parent.  [] where /proc is absent."""
    needle = f"{name}={value}".encode()
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if needle not in (d / "environ").read_bytes().split(b"\0"):
                    continue
            except OSError:
                continue
            if int(d.name) in live_members_of([int(d.name)]):
                out.append(int(d.name))
    return out


def live_members_of(pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` that still run (not ended, not a zombie)."""
    out = []
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in ("Z", "X"):
            out.append(pid)
    return out


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name: [state, ppid, pgrp, ...]; [] when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return stat.rsplit(")", 1)[1].split()


def end_leaves_first(leader: int, timeout_s: float = 2.0, poll_s: float = 0.02) -> None:
    """SIGKILL group ``leader``'s members deepest first -- each while its parent still lives to
    reap it -- and the leader last (its own parent, the runner, reaps it).  Killed all at once,
    a launcher's children outlive their parent as zombies until init reaps them, which took
    1.6 s on the lab machine (its init reaps in passes): the group, and the run, waited that
    long.  A member already a zombie is left to its parent's own reaping (DeepSpeed's launcher
    polls its ranks once a second).  After ``timeout_s`` the rest of the group is killed at once."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stats = {p: _stat_fields(p) for p in members(leader) if p != leader}
        stats = {p: f for p, f in stats.items() if f}
        if not stats:
            break
        parents = {int(f[1]) for f in stats.values()}
        for pid, fields in stats.items():
            if pid not in parents and fields[0] not in ("Z", "X"):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        time.sleep(poll_s)
    signal_group(leader, signal.SIGKILL)


def reap(pgids: Iterable[int], timeout_s: float = 5.0, poll_s: float = 0.05) -> list[int]:
    """SIGKILL what is left of each group, then wait (up to ``timeout_s``) until the
    groups are gone.  Orphans are reaped by init, which can take a moment.  Returns the
    groups still present at the end (logged)."""
    alive = [g for g in pgids if group_alive(g)]
    for g in alive:
        signal_group(g, signal.SIGKILL)
    deadline = time.monotonic() + timeout_s
    while alive and time.monotonic() < deadline:
        time.sleep(poll_s)
        alive = [g for g in alive if group_alive(g)]
    if alive:
        log.warning("process groups %s still have members after SIGKILL", alive)
    return alive
