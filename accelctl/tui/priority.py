"""The display yields the CPU to the run it watches.

On a small machine the worker and the TUI share cores; the TUI must not slow the run.
So the TUI's own threads run at a lower CPU priority (``nice`` +``NICE``, Linux: per
thread), while everything that belongs to the run keeps normal priority:

* the supervisors of the runs ``r`` starts (``accelctl.tui.supervised.start``) are spawned
  from ``Launcher``'s thread, created before the display lowers its own priority: a process
  inherits the priority of the thread that forks it (Linux: per thread), so the supervisor
  and the workers it starts run at the normal priority (an unprivileged process could not
  raise it back afterwards);
* ``lower_this_thread()`` is called from the display's main thread once the app is up;
  threads it starts later (the feed) inherit the lower priority.

``ACCELCTL_TUI_NICE=0`` turns it off.  Elsewhere than Linux it is a no-op.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from accelctl.contract import envnames

NICE = 10


def _nice() -> int:
    try:
        return max(0, int(os.environ.get(envnames.TUI_NICE, NICE)))
    except ValueError:
        return NICE


def lower_this_thread() -> bool:
    """Lower the calling thread's CPU priority (Linux); True when it was lowered."""
    step = _nice()
    if not step or not sys.platform.startswith("linux"):
        return False
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + step))
    except (OSError, AttributeError):
        return False
    return True


class Launcher:
    """One thread, started now (at the caller's priority), that starts the runs' supervisors on request."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="accelctl-launcher")
        self._pool.submit(lambda: None).result()  # create the thread before any priority change

    def submit(self, fn, *args, **kwargs) -> Future:
        return self._pool.submit(fn, *args, **kwargs)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=False)
