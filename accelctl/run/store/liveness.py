"""Whether a stored run is still going, and who supervises it -- what ``runs rm``, ``runs gc``,
``status``, ``logs -f``, ``attach`` and ``cancel`` ask of the store.

A run is *in progress* while a process owns its folder (``owner.lock``, held by the runner from
the folder's creation to its summary, and by ``run --resume``: ``accelctl.run.store.ownership``) or
while it has no ``summary.json`` and is not lost (``store.read_run`` shows a run whose runner
is gone as ``failed (runner lost)``; a run recorded on another machine cannot be judged from
here and counts as in progress).  Nothing here blocks or writes.
"""

from __future__ import annotations

from pathlib import Path

from accelctl.run import store
from accelctl.run.store import ownership, proof


def supervisor(run_dir: Path) -> int | None:
    """The pid of the live process proven to supervise the run (``accelctl.run.store.proof``), else None."""
    return proof.supervisor(run_dir)


def in_progress(record: store.RunRecord) -> str:
    """Why ``record`` is still going ("" once it has ended): the owner of its folder, else its
    live supervisor, else "no summary yet"."""
    owner = ownership.held_by(record.path)
    if owner:
        return f"in use by accelctl pid {owner}" if owner is not True else "in use by another accelctl process"
    if record.status != "incomplete":
        return ""
    pid = supervisor(record.path)
    if pid is not None:
        return f"supervised by pid {pid}"
    return "no summary yet (its runner is on another machine, or the run is starting)"
