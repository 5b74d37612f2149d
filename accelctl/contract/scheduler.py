"""``scheduler.json``: the scheduler's job behind a run, as the run's supervisor saw it.

The supervisor of a run handed to a scheduler writes it into the run folder, atomically, when it
submits and at every state change.  ``job_id`` and ``state`` are the scheduler's own words (Slurm's
job id and ``JobState``, AWS Batch's ``jobId`` and ``status``, the PyTorchJob's name and latest True
condition); ``exit_code`` is the job's (null while it runs); ``handle`` is its
``<scheduler>://<where>/<id>`` (``accelctl.engines.scheduler.AppHandle``) and ``app_state`` its
state in the one enum; ``ref`` is what earlier versions recorded in place of a handle.  The run
store copies the record into ``summary.json`` (key ``scheduler``).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from accelctl.private_files import store_opener

FILE = "scheduler.json"


@dataclass(frozen=True)
class SchedulerJob:
    scheduler: str
    job_id: str
    state: str = ""
    exit_code: int | None = None
    ref: str = ""
    #: ``<scheduler>://<where>/<job id>`` (``accelctl.engines.scheduler.AppHandle``): what
    #: ``accelctl cancel`` and ``status`` ask the scheduler about, from any process
    handle: str = ""
    #: the one state mapped from ``state`` (``AppState``: PENDING, RUNNING, SUCCEEDED...)
    app_state: str = ""

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for key in ("ref", "handle", "app_state"):
            if not data[key]:
                del data[key]
        return data

    def short(self) -> str:
        """``slurm 12 COMPLETED`` (``exit 3`` added when the job's exit code is not 0)."""
        code = f" exit {self.exit_code}" if self.exit_code not in (None, 0) else ""
        return f"{self.scheduler} {self.job_id} {self.state or '?'}{code}"


def write(run_dir: str | os.PathLike[str], job: SchedulerJob) -> Path:
    path = Path(run_dir) / FILE
    tmp = path.with_name(FILE + ".tmp")
    with open(tmp, "w", encoding="utf-8", opener=store_opener) as fh:  # never others' to change
        fh.write(json.dumps(job.to_dict(), sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path


def read(run_dir: str | os.PathLike[str]) -> SchedulerJob | None:
    """The run's record, or None (no scheduler, or a file that is not one)."""
    from accelctl.contract.boundedfile import Unreadable, read_regular

    try:  # a regular file of bounded size only: never a FIFO that blocks, a link to /dev/zero
        raw = read_regular(Path(run_dir) / FILE)
        return None if raw is None else from_dict(json.loads(raw.decode("utf-8")))
    except (OSError, ValueError, RecursionError, Unreadable):
        return None


def from_dict(data: Any) -> SchedulerJob | None:
    if not isinstance(data, dict) or not data.get("scheduler") or not data.get("job_id"):
        return None
    code = data.get("exit_code")
    return SchedulerJob(str(data["scheduler"]), str(data["job_id"]), str(data.get("state") or ""),
                        code if isinstance(code, int) and not isinstance(code, bool) else None,
                        str(data.get("ref") or ""), str(data.get("handle") or ""),
                        str(data.get("app_state") or ""))
