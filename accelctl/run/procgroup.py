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
