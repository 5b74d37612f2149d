"""Where a run's checkpoints live and which one is complete: shared by the worker that
writes them and the ``--resume`` that looks for them.  No torch here.

``folder_of(job)`` holds one ``step-<8 digits>/`` folder per save: the strategy's files (rank 0's
``state.pt``, DeepSpeed's, or ``sharded/`` torch.distributed.checkpoint shards), each rank's
``rank<N>.pt`` and, written last by rank 0, ``complete.json``.  A checkpoint is complete iff that
marker is there: every file is written under a temporary name, fsynced and renamed, the folder
fsynced, the marker last, so a save cut short is skipped by every reader and the previous
checkpoint stays the one to resume from.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

MARKER = "complete.json"
STATE_FILE = "state.pt"
#: the torch.distributed.checkpoint folder of the sharded strategy's model and optimizer
SHARDED_DIR = "sharded"
_STEP_DIR = re.compile(r"^step-(\d{8,})$")


def folder_of(job: Any) -> Path:
    """The checkpoint folder of a ``WorkerJob`` (run id and events folder filled in)."""
    if job.checkpoint.dir:
        return Path(job.checkpoint.dir) / job.run_id
    return Path(job.events_dir) / "checkpoints"


def step_dir(folder: Path, step: int) -> Path:
    return folder / f"step-{step:08d}"


def rank_file(step_folder: Path, rank: int) -> str:
    return str(step_folder / f"rank{rank}.pt")


def complete(folder: Path) -> list[tuple[int, Path]]:
    """The complete checkpoints under ``folder``, oldest first, as (step, folder)."""
    out = []
    try:
        entries = list(folder.iterdir())
    except OSError:
        return []
    for p in entries:
        m = _STEP_DIR.match(p.name)
        if m and (p / MARKER).is_file():
            out.append((int(m.group(1)), p))
    return sorted(out)


def latest(folder: Path) -> tuple[int, Path] | None:
    """The newest complete checkpoint, or None."""
    done = complete(folder)
    return done[-1] if done else None


def incomplete(folder: Path) -> list[Path]:
    """Step folders without their marker (saves that were cut short)."""
    try:
        return sorted(p for p in folder.iterdir() if _STEP_DIR.match(p.name) and not (p / MARKER).is_file())
    except OSError:
        return []


def read_marker(step_folder: Path) -> dict[str, Any]:
    """The step's ``complete.json``; {} where it is not a small regular file of JSON (a link, a
    FIFO: never followed or waited on)."""
    from accelctl.contract import boundedfile

    try:
        data = json.loads((boundedfile.read_regular(step_folder / MARKER, 1 << 20) or b"").decode("utf-8"))
    except (boundedfile.Unreadable, OSError, ValueError, RecursionError):
        return {}
    return data if isinstance(data, dict) else {}


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_atomic(path: Path, write, mode: str = "wb") -> int:
    """``write(fh)`` into a temporary file next to ``path``, fsync, rename over ``path``;
    returns the bytes written.  A failure removes the temporary file and re-raises."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, mode) as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    return path.stat().st_size


def mark_complete(step_folder: Path, info: dict[str, Any]) -> None:
    """The marker, atomically, after the folder's other files are synced."""
    fsync_dir(step_folder)
    write_atomic(step_folder / MARKER, lambda fh: fh.write(json.dumps(info, indent=2, sort_keys=True)), "w")
    fsync_dir(step_folder)
    fsync_dir(step_folder.parent)
