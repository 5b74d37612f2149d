"""Whether a stored run is still going, and who supervises it -- what ``runs rm``, ``runs gc``,
``status``, ``logs -f``, ``attach`` and ``cancel`` ask of the store.

A run is *in progress* while a process owns its folder (``owner.lock``, held by the runner from
the folder's creation to its summary, and by ``run --resume``: ``accelctl.run.store.ownership``) or
while it has no ``summary.json`` and is not lost (``store.read_run`` shows a run whose runner
is gone as ``failed (runner lost)``; a run recorded on another machine cannot be judged from
here and counts as in progress).  Nothing here blocks or writes.
"""

from __future__ import annotations

import calendar
import time
from pathlib import Path

from accelctl.run import store
from accelctl.run.store import ownership, proof

#: seconds a folder with neither an owner nor a ``runner.json`` may still be a run starting (on a
#: machine whose lock this one cannot see); past it nothing can finish it: it is not in progress
STARTING_S = 60.0


def supervisor(run_dir: Path) -> int | None:
    """The pid of the live process proven to supervise the run (``accelctl.run.store.proof``), else None."""
    return proof.supervisor(run_dir)


def in_progress(record: store.RunRecord) -> str:
    """Why ``record`` is still going ("" once it has ended): the owner of its folder, else its
    live supervisor, else "no summary yet"."""
    owner = ownership.held_by(record.path)
    if owner:
        return f"in use by accelctl pid {owner}" if owner is not True else "in use by another accelctl process"
    return unfinished(record)


def unfinished(record: store.RunRecord) -> str:
    """Why ``record``, whoever owns its folder, may still be going ("" when it cannot be): its
    live supervisor, else a summary not written yet by a runner that recorded itself (or one
    starting)."""
    if record.status != "incomplete":
        return ""
    pid = supervisor(record.path)
    if pid is not None:
        return f"supervised by pid {pid}"
    if _never_supervised(record):
        return ""
    return "no summary yet (its runner is on another machine, or the run is starting)"


def _never_supervised(record: store.RunRecord) -> bool:
    """No runner ever recorded itself in the run's folder (no ``runner.json``) and its start
    (``record.started``: its id's, with no summary) is ``STARTING_S`` past: a folder left by a
    crash before its launch, or made by hand."""
    try:
        (record.path / store.RUNNER_FILE).lstat()
        return False
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        started = calendar.timegm(time.strptime(record.started, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:  # no start known: it may be starting
        return False
    return time.time() - started > STARTING_S
