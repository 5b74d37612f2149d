"""Which live processes belong to a stored run -- proven, never taken from a number in a file.

After a crash or a reboot the pids a ``runner.json`` lists may be others' (as root, system
services'), and a folder can be copied or forged.  So a process is a run's only when the run was
recorded on this machine in this boot and the process is the run's supervisor (alive as
``runner.json`` names it, holding this folder's ``owner.lock`` open by this folder's path:
``accelctl.run.store.ownership``), or
carries the run's marker (``ACCELCTL_EVENTS_DIR`` naming this folder) or descends from one that
does (``accelctl.run.store.markers``).  A process group id alone is never enough: torchrun's ranks run
in sessions of their own.  Reading here never writes and never waits.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accelctl.contract import supervision
from accelctl.run import store
from accelctl.run.store import ownership
from accelctl.run.store.markers import marked


def recorded_here(info: Mapping[str, Any]) -> bool:
    """``runner.json`` (checked) was written on this machine, in this boot."""
    host, here = info.get("host") or {}, store._host()
    return bool(here["boot_id"]) and host.get("name") == here["name"] and host.get("boot_id") == here["boot_id"]


def runner_info(run_dir: Path) -> dict[str, Any] | None:
    """The run's checked ``runner.json``; None when it is missing or unreadable."""
    info, why = store.read_object(run_dir / store.RUNNER_FILE)
    return info if info and not why else None


def supervisor(run_dir: Path, info: Mapping[str, Any] | None = None) -> int | None:
    """The pid of the run's supervisor, where proven: recorded here in this boot, alive as
    recorded, and holding this folder's ``owner.lock`` (the pid in it, the file open by this
    folder's path); else None."""
    info = runner_info(run_dir) if info is None else info
    if not info or not recorded_here(info):
        return None
    ident = str(info.get("runner") or "")
    parsed = supervision.parse(ident)
    if parsed is None or not supervision.alive(ident):
        return None
    pid = parsed[0]
    return pid if ownership.held_by(run_dir) == pid and ownership.holds_open(pid, run_dir) else None


def processes(run_dir: Path, info: Mapping[str, Any] | None = None) -> list[int]:
    """Every live process proven to be the run's (its supervisor apart); [] for a run recorded
    on another machine or boot, or whose ``runner.json`` cannot be read."""
    info = runner_info(run_dir) if info is None else info
    if not info or not recorded_here(info):
        return []
    return marked(run_dir)
