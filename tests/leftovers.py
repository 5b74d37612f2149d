"""No process outlives the slow test that started it, however the test ended.

A slow test starts real processes (runs, supervisors, launchers, clusters' jobs); its own
``finally`` may SIGKILL only the process it holds -- a foreground ``accelctl run`` is a viewer,
and its run's supervisor (a session of its own) goes on without it, no longer a descendant of
pytest.  Only such processes count: what pytest still holds (a shared fixture's run started from
a thread during the test) is its owner's.  ``tests/conftest.py`` marks
each slow test's processes with ``TOKEN_ENV`` in the environment they inherit, and after the
test ends the ones still there -- given ``GRACE_S`` to end by themselves -- get SIGTERM, then
SIGKILL to their process groups, and are named in the session's warnings summary.
"""

from __future__ import annotations

import os
import signal
import time

import psutil

TOKEN_ENV = "ACCELCTL_TEST_PROCESS_TOKEN"
GRACE_S = 10.0
KILL_AFTER_S = 5.0


def marked(token: str) -> list[psutil.Process]:
    """The live (not zombie) processes whose environment carries ``token`` and that nothing of this
    pytest process holds any more: this process and its descendants excepted (a shared fixture's
    run started from a thread during the test is still owned, and awaited, by that fixture)."""
    me = os.getpid()
    found = []
    for proc in psutil.process_iter(["pid"]):
        if proc.pid == me:
            continue
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get(TOKEN_ENV) != token:
                continue
            # asked of each one found, not of a list taken before: a shared fixture's thread may
            # start its next process between the two looks (seen: a module's queued run killed)
            if any(parent.pid == me for parent in proc.parents()):
                continue
            found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _wait(procs: list[psutil.Process], seconds: float) -> list[psutil.Process]:
    deadline = time.monotonic() + seconds
    while procs and time.monotonic() < deadline:
        time.sleep(0.1)
        procs = [p for p in procs if _alive(p)]
    return procs


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _signal_groups(procs: list[psutil.Process], sig: int) -> None:
    mine = os.getpgid(0)
    for proc in procs:
        try:
            pgid = os.getpgid(proc.pid)
            if pgid != mine:
                os.killpg(pgid, sig)
            else:
                proc.send_signal(sig)
        except (OSError, psutil.Error):
            continue


def end_left(token: str, grace_s: float = GRACE_S) -> list[str]:
    """End what the test of ``token`` left running; what that was."""
    procs = marked(token)
    if not procs:
        return []
    procs = _wait(procs, grace_s)  # a run's last processes ending as the test ends
    if not procs:
        return []
    names = []
    for proc in procs:
        try:
            names.append(f"{proc.pid} {proc.name()} {' '.join(proc.cmdline())[:160]}")
        except psutil.Error:
            names.append(str(proc.pid))
    _signal_groups(procs, signal.SIGTERM)
    rest = _wait(procs, KILL_AFTER_S)
    _signal_groups(rest, signal.SIGKILL)
    return names
