"""Signalling the process groups the runner started (one session per launch).

Nothing here starts a process.  A launch is started with ``start_new_session=True``, so
its pid is also its process-group id and a signal to the group reaches torchrun and
every worker below it, including their own children.  The process table is read with psutil;
a process that is gone, or not ours to read, is
skipped.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterable

import psutil

log = logging.getLogger("accelctl.run")
#: a process that has ended but is not reaped yet: it runs nothing
_ENDED = (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)


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
    """The pids whose process group is ``pgid`` ([] where there is none): what is left of a
    launch, counted."""
    out = []
    for pid in psutil.pids():
        try:
            if os.getpgid(pid) == pgid:
                out.append(pid)
        except (ProcessLookupError, PermissionError):
            continue
    return out


def live_members(pgid: int) -> list[int]:
    """``members`` that still run: a zombie (ended, not yet reaped by its new parent, init)
    does not count."""
    return live_members_of(members(pgid))


def carrying(name: str, value: str) -> list[int]:
    """The live processes (zombies apart) whose environment holds ``name=value`` -- every
    process of a run carries its events folder, including the ones a launcher put in sessions
    of their own (torchrun starts each rank with ``start_new_session``, out of the launch's
    process group) and the ones orphaned by a dead parent.  [] where none can be read."""
    out = []
    for proc in psutil.process_iter():
        if proc.pid == os.getpid():
            continue
        try:
            if proc.environ().get(name) == value and proc.status() not in _ENDED:
                out.append(proc.pid)
        except (psutil.Error, OSError):
            continue
    return out


def live_members_of(pids: Iterable[int]) -> list[int]:
    """Those of ``pids`` that still run (not ended, not a zombie)."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() not in _ENDED:
                out.append(pid)
        except psutil.Error:
            continue
    return out


def _parent_and_status(pid: int) -> tuple[int, str] | None:
    """(parent pid, status) of ``pid``; None when it is gone."""
    try:
        proc = psutil.Process(pid)
        return proc.ppid(), proc.status()
    except psutil.Error:
        return None


def end_leaves_first(leader: int, timeout_s: float = 2.0, poll_s: float = 0.02) -> None:
    """SIGKILL group ``leader``'s members deepest first -- each while its parent still lives to
    reap it -- and the leader last (its parent, the runner, reaps it): killed all at once, the
    children linger as zombies until init reaps them, and the run waits that long.  A member
    already a zombie is left to its parent.  After ``timeout_s`` the rest is killed at once."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        stats = {p: _parent_and_status(p) for p in members(leader) if p != leader}
        stats = {p: f for p, f in stats.items() if f}
        if not stats:
            break
        parents = {ppid for ppid, _ in stats.values()}
        for pid, (_, status) in stats.items():
            if pid not in parents and status not in _ENDED:
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
