"""The console files of supervisors: a detached one's under ``<store>/.detached/``, a viewed
one's in a folder of its own under ``$TMPDIR`` that names its store; ``runs gc`` removes those
of supervisors that have ended.  Reads and removes files; starts and signals nothing."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from accelctl.contract import boundedfile, supervision
from accelctl.run import store

#: the folder of the store holding the detached supervisors' console streams
CONSOLE_DIR = ".detached"
#: the prefix of a viewed supervisor's console folder in ``$TMPDIR`` (``viewer_folder``)
VIEWER_PREFIX = "accelctl-run-"
STORE_NOTE = "store"
#: ``<utc time>-<hex>-<pid>_<start ticks>.console``: a supervisor's console, named by its identity
CONSOLE_NAME = re.compile(r"^\d{8}-\d{6}-[0-9a-f]+-(\d+)_(\d+)\.(console|stderr)$")


def viewer_folder(root) -> Path:
    """A folder of its own (under ``$TMPDIR``, out of the store: a full store must not stop the
    supervisor's prints) for the console files of a supervisor a foreground ``run`` views; its
    ``store`` file names the store, whose ``runs gc`` removes what a viewer left there."""
    folder = Path(tempfile.mkdtemp(prefix=VIEWER_PREFIX))
    try:
        (folder / STORE_NOTE).write_text(str(store.runs_root(root).resolve()), encoding="utf-8")
    except OSError:
        pass
    return folder


def viewer_folders(base: Path) -> list[Path]:
    """The viewers' console folders in ``$TMPDIR`` that name the store ``base``."""
    try:
        folders = sorted(Path(tempfile.gettempdir()).glob(VIEWER_PREFIX + "*"))
    except OSError:
        return []
    mine = str(base.resolve()).encode("utf-8", "surrogateescape")
    found = []
    for folder in folders:
        try:  # this user's own folder (another's in a shared $TMPDIR is never ours to remove), its note
            if os.lstat(folder).st_uid == os.geteuid() and boundedfile.read_regular(folder / STORE_NOTE, 4096) == mine:
                found.append(folder)
        except (OSError, boundedfile.Unreadable):
            continue
    return found


def ended_consoles(root: Path) -> list[Path]:
    """The console (and ``.stderr``) files of supervisors that have ended, detached ones' in the store
    and those a viewer left in ``$TMPDIR`` when it detached (``runs gc`` removes them: each run's own
    stream is its ``events.jsonl``, replayed by ``attach``)."""
    base = store.runs_root(root)
    folders = [base / CONSOLE_DIR, *viewer_folders(base)]
    ended = []
    for folder in folders:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            m = CONSOLE_NAME.match(entry.name)
            if m and entry.is_file(follow_symlinks=False) and not supervision.alive(f"{m[1]}:{m[2]}"):
                ended.append(Path(entry.path))
    return sorted(ended)


def forget_if_empty(folder: Path) -> None:
    """A viewer's console folder once no console file is left in it (its ``store`` note goes too)."""
    if not any(CONSOLE_NAME.match(p.name) for p in folder.iterdir()):
        shutil.rmtree(folder, ignore_errors=True)


def forget_console(console: Path | None) -> None:
    """A viewer that detached from a run it can name: its supervisor's console folder goes now (the
    supervisor writes on into the unlinked files, freed when it ends; the run is in the store)."""
    if console is not None and console.parent.name.startswith(VIEWER_PREFIX):
        shutil.rmtree(console.parent, ignore_errors=True)
