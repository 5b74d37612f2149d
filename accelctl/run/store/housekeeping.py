"""``accelctl runs rm`` and ``runs gc``: removing run folders, never one in progress.

A folder is removed only while this process owns it (``ownership.claim``, without waiting):
a run being run or resumed holds that claim, so it is refused, and no ``run --resume`` can
begin on a folder while it is being removed.  Under the claim the run is read again and
refused when it is still in progress without an owner (no summary: starting, or recorded by a
runner on another machine: ``liveness.in_progress``).  A run folder that is a link is refused
(only the store's own folders are removed, never what a link points to).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from accelctl.errors import RunError
from accelctl.run import store
from accelctl.run.store import liveness
from accelctl.run.store.ownership import RunBusy, claim


@dataclass
class Removal:
    """What ``remove`` did: the ids removed (or that would be, ``dry_run``), those refused
    because they are in progress, and those that could not be removed, each with why."""

    removed: list[str] = field(default_factory=list)
    running: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"removed": self.removed, "running": [{"id": i, "why": w} for i, w in self.running],
                "failed": [{"id": i, "why": w} for i, w in self.failed]}


def remove(records: Iterable[store.RunRecord], dry_run: bool = False) -> Removal:
    """Remove each run's folder unless it is in progress (or, ``dry_run``, say which would go)."""
    done = Removal()
    for record in records:
        if record.path.is_symlink():
            done.failed.append((record.id, f"{record.path} is a link, not a run folder of the store"))
            continue
        why = liveness.in_progress(record)
        if why:
            done.running.append((record.id, why))
            continue
        if dry_run:
            done.removed.append(record.id)
            continue
        try:
            owned = claim(record.path, wait_s=0.0)
        except RunBusy as exc:
            done.running.append((record.id, f"in use by accelctl pid {exc.pid}" if exc.pid else str(exc)))
            continue
        except RunError as exc:
            done.failed.append((record.id, str(exc)))
            continue
        with owned:  # no run or resume can begin on it meanwhile
            again = store.read_run(record.path)
            if why := liveness.unfinished(again):  # our own claim apart
                done.running.append((record.id, why))
                continue
            try:
                shutil.rmtree(record.path)
            except OSError as exc:
                done.failed.append((record.id, f"{exc.strerror or exc} removing {exc.filename or record.path}"))
                continue
        done.removed.append(record.id)
    return done


def gc_candidates(records: Iterable[store.RunRecord], *, failed: bool, started_before: float | None,
                  started_unix_s: Callable[[store.RunRecord], float | None]) -> list[store.RunRecord]:
    """The runs ``runs gc`` would remove: with ``failed``, those that failed (a lost runner
    included) or never started; with ``started_before`` (unix seconds), those started before
    it (``started_unix_s`` tells when a run started); both given, both hold.  Runs in progress
    are among them (``remove`` refuses them, saying so); unreadable runs are left alone
    (``runs rm`` takes them by name)."""

    def wanted(r: store.RunRecord) -> bool:
        if r.status.startswith(store.UNREADABLE):
            return False
        if failed and not r.status.startswith(("failed", "not started", "not_started")):
            return False
        if started_before is not None:
            start = started_unix_s(r)
            return start is not None and start < started_before
        return True

    return [r for r in records if wanted(r)]


def keep_lost(records: Iterable[store.RunRecord], dry_run: bool = False) -> list[str]:
    """``runs gc``: write the result of each lost run among ``records`` into its folder
    (``lostrun.keep``), each under its claim, taken without waiting (a folder in use is left
    to its owner); the ids written (``dry_run``: that would be).  Reading never writes it."""
    from accelctl.run.store import lostrun

    kept = []
    for record in records:
        if "runner lost" not in record.status or record.unreadable or record.path.is_symlink():
            continue
        if dry_run:
            kept.append(record.id)
            continue
        try:
            owned = claim(record.path, wait_s=0.0)
        except RunError:  # RunBusy among them: its owner is at it
            continue
        with owned:
            if lostrun.keep(record.path):
                kept.append(record.id)
    return kept


def remove_consoles(root, dry_run: bool = False) -> list[str]:
    """Remove the console files of detached supervisors that have ended (``runs gc``, whatever
    its criterion: a run's own stream is its ``events.jsonl``); their paths."""
    from accelctl.run.store.consoles import VIEWER_PREFIX, ended_consoles, forget_if_empty

    gone = []
    for path in ended_consoles(root):
        try:
            if not dry_run:
                path.unlink()
            gone.append(str(path))
        except OSError:
            continue
        if not dry_run and path.parent.name.startswith(VIEWER_PREFIX):
            forget_if_empty(path.parent)
    return gone
