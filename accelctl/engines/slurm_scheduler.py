"""Slurm as a scheduler: ``sbatch``, ``scontrol``/``squeue``, ``scancel`` and the job's output file.

``submit`` runs ``sbatch --parsable job.sbatch`` in the run folder (the job's
``$SLURM_SUBMIT_DIR``, where its ``slurm-<id>.out`` and the ranks' events land) with the
supervisor's environment (``--export=ALL``, Slurm's default).  ``--parsable`` prints
``<id>`` or ``<id>;<cluster>``; without a cluster there the handle names the controller's
``ClusterName`` (``scontrol show config``).  ``describe`` reads ``scontrol show job -o`` and,
once the controller has forgotten a job (``MinJobAge``), ``squeue``; ``cancel`` is
``scancel`` (a job that has ended already is no error).  ``sbatch --wait`` is not used: its
client back-off adds seconds to every job.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from accelctl.engines.scheduler import AppHandle, AppState, Described, Scheduler

#: every job state ``squeue(1)`` documents (JOB STATE CODES) -> the one state
STATES: Mapping[str, AppState] = {
    "BOOT_FAIL": AppState.FAILED, "CANCELLED": AppState.CANCELLED, "COMPLETED": AppState.SUCCEEDED,
    "CONFIGURING": AppState.PENDING, "COMPLETING": AppState.RUNNING, "DEADLINE": AppState.FAILED,
    "FAILED": AppState.FAILED, "NODE_FAIL": AppState.FAILED, "OUT_OF_MEMORY": AppState.FAILED,
    "PENDING": AppState.PENDING, "PREEMPTED": AppState.FAILED, "RUNNING": AppState.RUNNING,
    "RESV_DEL_HOLD": AppState.PENDING, "REQUEUE_FED": AppState.PENDING, "REQUEUE_HOLD": AppState.PENDING,
    "REQUEUED": AppState.PENDING, "RESIZING": AppState.RUNNING, "REVOKED": AppState.CANCELLED,
    "SIGNALING": AppState.RUNNING, "SPECIAL_EXIT": AppState.FAILED, "STAGE_OUT": AppState.RUNNING,
    "STOPPED": AppState.RUNNING, "SUSPENDED": AppState.PENDING, "TIMEOUT": AppState.FAILED,
}
#: what ``--parsable`` prints: ``<id>`` or ``<id>;<cluster>``
_PARSABLE = re.compile(r"(\d+(?:_\d+)?)(?:;([A-Za-z0-9_.-]+))?")


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    # a session of its own: a stop signal to the supervisor's group must not cut a query short
    return subprocess.run(argv, check=False, capture_output=True, text=True, start_new_session=True, **kw)


class SlurmScheduler(Scheduler):
    name = "slurm"
    STATES = STATES
    poll_s = 0.25

    def submit(self, request: dict, run_dir: Path, env: Mapping[str, str]) -> AppHandle:
        r = _run(["sbatch", "--parsable", request["script"]], cwd=run_dir, env=dict(env))
        m = _PARSABLE.fullmatch(r.stdout.strip()) if r.returncode == 0 else None
        if m is None:
            raise RuntimeError(f"sbatch: {r.stderr.strip() or r.stdout.strip() or f'exit code {r.returncode}'}")
        job_id = m[1]
        (run_dir / "slurm_job_id").write_text(job_id + "\n", encoding="utf-8")
        return AppHandle(self.name, m[2] or cluster_name(env), job_id)

    def describe(self, handle: AppHandle) -> Described | None:
        r = _run(["scontrol", "show", "job", "-o", handle.job_id])
        if r.returncode == 0 and "JobState=" in r.stdout:
            raw = re.search(r"JobState=(\S+)", r.stdout).group(1)  # type: ignore[union-attr]
            m = re.search(r"\bExitCode=(\d+):(\d+)", r.stdout)
            code = None if m is None else (int(m[1]) or (128 + int(m[2]) if int(m[2]) else 0))
            why = re.search(r"\bReason=(\S+)", r.stdout)
            state = self.state_of(raw)
            if state.terminal:  # ended, but a job still in the queue (COMPLETING) has processes left
                queued = self._queued(handle)
                if queued and not self.state_of(queued).terminal:
                    return Described(self.state_of(queued), queued)
            return Described(state, raw, code if state.terminal else None,
                             why[1] if why and why[1] != "None" else "")
        queued = self._queued(handle)
        return Described(self.state_of(queued), queued) if queued else None

    def _queued(self, handle: AppHandle) -> str:
        """The job's state as ``squeue`` lists it ("" once it has left the queue)."""
        q = _run(["squeue", "-h", "-j", handle.job_id, "-o", "%T"])
        return q.stdout.split()[0] if q.returncode == 0 and q.stdout.strip() else ""

    def cancel(self, handle: AppHandle) -> None:
        _run(["scancel", handle.job_id])  # an ended or unknown job: scancel says so; nothing to do

    def log_iter(self, handle: AppHandle, run_dir: Path, done: Callable[[], bool]) -> Iterator[str]:
        """``slurm-<id>.out`` of the run folder (``#SBATCH --output``), followed until ``done()``."""
        return follow_file(run_dir / f"slurm-{handle.job_id}.out", done)


def cluster_name(env: Mapping[str, str]) -> str:
    r = _run(["scontrol", "show", "config"], env=dict(env))
    m = re.search(r"^ClusterName\s*=\s*(\S+)", r.stdout, re.M)
    return m[1] if m else ""


def follow_file(path: Path, done: Callable[[], bool], poll_s: float = 0.25) -> Iterator[str]:
    """The lines of ``path`` as they are written, until ``done()`` and all is read."""
    pos, rest = 0, b""
    while True:
        ended = done()
        try:
            with open(path, "rb") as fh:
                fh.seek(pos)
                chunk = fh.read()
        except OSError:
            chunk = b""
        pos += len(chunk)
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            yield line.decode("utf-8", "replace")
        if ended:
            if rest:
                yield rest.decode("utf-8", "replace")
            return
        time.sleep(poll_s)
