"""The live processes carrying a run's marker: ``ACCELCTL_EVENTS_DIR`` naming the run folder in
their environment (every launch gets it, every process a launch starts inherits it), and every
process below them.  What ``accelctl.run.store.proof`` signals, and what tells the store's reader
that a run whose runner is gone has nothing left running.  It reads nothing of the run folder,
so the store can ask it without depending on ``proof``.
"""

from __future__ import annotations

import os
from pathlib import Path

from accelctl.contract import envnames


def marked(run_dir: Path) -> list[int]:
    """The live processes (zombies apart) carrying ``run_dir`` as their events folder, and every
    process below them; [] where none can be read."""
    import psutil  # here: ``runs`` and ``status`` read the store without it

    from accelctl.run import procgroup

    found: set[int] = set()
    for pid in procgroup.carrying(envnames.EVENTS_DIR, str(run_dir)):
        found.add(pid)
        try:
            found.update(child.pid for child in psutil.Process(pid).children(recursive=True))
        except psutil.Error:
            continue
    found.discard(os.getpid())
    return sorted(procgroup.live_members_of(found))
