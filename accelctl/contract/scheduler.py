"""``scheduler.json``: the scheduler's job behind a run, as the engine's submit helper saw it.

An engine that hands the run to a scheduler (``accelctl.engines.slurm_submit``) writes this
file into the run folder when it submits and again at every state change, so it holds the
scheduler's own words: ``scheduler`` (``slurm``), ``job_id``, ``state`` (Slurm's
``JobState``: PENDING, RUNNING, COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL...) and
``exit_code`` (the job's, or ``null`` while it runs or when the scheduler gave none).  The
run store copies it into ``summary.json`` (key ``scheduler``) and ``accelctl runs`` shows it;
a run of the local engine has none.  Written atomically: a reader never sees half a record.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

FILE = "scheduler.json"


@dataclass(frozen=True)
class SchedulerJob:
    scheduler: str
    job_id: str
    state: str = ""
    exit_code: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def short(self) -> str:
        """``slurm 12 COMPLETED`` (``exit 3`` added when the job's exit code is not 0)."""
        code = f" exit {self.exit_code}" if self.exit_code not in (None, 0) else ""
        return f"{self.scheduler} {self.job_id} {self.state or '?'}{code}"


def write(run_dir: str | os.PathLike[str], job: SchedulerJob) -> Path:
    path = Path(run_dir) / FILE
    tmp = path.with_name(FILE + ".tmp")
    tmp.write_text(json.dumps(job.to_dict(), sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read(run_dir: str | os.PathLike[str]) -> SchedulerJob | None:
    """The run's record, or None (no scheduler, or a file that is not one)."""
    try:
        data = json.loads((Path(run_dir) / FILE).read_text(encoding="utf-8"))
        return from_dict(data)
    except (OSError, ValueError):
        return None


def from_dict(data: Any) -> SchedulerJob | None:
    if not isinstance(data, dict) or not data.get("scheduler") or not data.get("job_id"):
        return None
    code = data.get("exit_code")
    return SchedulerJob(str(data["scheduler"]), str(data["job_id"]), str(data.get("state") or ""),
                        code if isinstance(code, int) else None)
