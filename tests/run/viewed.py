"""A foreground ``accelctl run`` only views its run (``accelctl.run.supervision.foreground``): the runner --
what owns the run folder, starts the launches and records the run -- is the supervisor it
started, its child in a session of its own.  The tests that SIGKILL "the runner" or read its
pid find it here."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from accelctl.entrypoints import SUPERVISOR


def supervisor_of(viewer: subprocess.Popen, timeout_s: float = 60) -> int:
    """The pid of the supervisor a foreground ``accelctl run`` (``viewer``) started."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            children = Path(f"/proc/{viewer.pid}/task/{viewer.pid}/children").read_text().split()
        except OSError:
            children = []
        for pid in children:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if SUPERVISOR.encode() in argv:
                return int(pid)
        if viewer.poll() is not None:
            break
        time.sleep(0.05)
    raise AssertionError(f"accelctl run (pid {viewer.pid}) started no supervisor")
