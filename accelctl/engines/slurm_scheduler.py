"""Slurm as a scheduler: ``sbatch``, ``scontrol``/``squeue``, ``scancel`` and the job's output file.

``submit`` runs ``sbatch --parsable job.sbatch`` in the run folder (``$SLURM_SUBMIT_DIR``) with the
supervisor's environment; the handle names the cluster (``ClusterName`` when ``sbatch`` gives none).
``describe`` reads ``scontrol show job -o``, then ``squeue`` once the controller forgot the job;
``cancel`` is ``scancel``.  ``sbatch --wait`` is not used: its client back-off slows every job.  A
handle of another cluster gets ``-M <cluster>``; the local cluster is asked without it, because
``-M`` needs slurmdbd, and that refusal is one error naming the job, its cluster and the database.
"""

from __future__ import annotations

import os
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
#: what the clients print when ``-M`` cannot reach a cluster (no slurmdbd, an unknown name)
_UNREACHABLE = re.compile(r"Problem talking to database|can't be reached now|invalid entry for --cluster")


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    # a session of its own: a stop signal to the supervisor's group must not cut a query short
    return subprocess.run(argv, check=False, capture_output=True, text=True, start_new_session=True, **kw)


class SlurmScheduler(Scheduler):
    name = "slurm"
    STATES = STATES
    poll_s = 0.25

    def __init__(self) -> None:
        self._local: str | None = None  # this host's controller's ClusterName, read when first needed

    def _clusters(self, handle: AppHandle) -> list[str]:
        """``-M <cluster>`` when the handle's cluster is not the local controller's, else nothing."""
        if not handle.where:
            return []
        if self._local is None:
            self._local = cluster_name(os.environ)
        return [] if handle.where == self._local else ["-M", handle.where]

    def _ask(self, handle: AppHandle, *argv: str) -> subprocess.CompletedProcess:
        """A Slurm client asked about ``handle``'s job on its own cluster; RuntimeError when
        that cluster cannot be reached from here (``-M`` without slurmdbd)."""
        clusters = self._clusters(handle)
        r = _run([argv[0], *clusters, *argv[1:]])
        if clusters and r.returncode != 0 and _UNREACHABLE.search(r.stderr):
            said = " ".join(line.strip() for line in r.stderr.splitlines() if line.strip())[:300]
            raise RuntimeError(
                f"Slurm cluster {handle.where!r} cannot be reached from here (this host's is "
                f"{self._local or 'unknown: no controller answers'!r}): -M needs the accounting database "
                f"(slurmdbd); run accelctl on a login node of {handle.where!r} ({said})")
        return r

    def submit(self, request: dict, run_dir: Path, env: Mapping[str, str]) -> AppHandle:
        r = _run(["sbatch", "--parsable", request["script"]], cwd=run_dir, env=dict(env))
        m = _PARSABLE.fullmatch(r.stdout.strip()) if r.returncode == 0 else None
        if m is None:
            raise RuntimeError(f"sbatch: {r.stderr.strip() or r.stdout.strip() or f'exit code {r.returncode}'}")
        job_id = m[1]
        (run_dir / "slurm_job_id").write_text(job_id + "\n", encoding="utf-8")
        return AppHandle(self.name, m[2] or cluster_name(env), job_id)

    def describe(self, handle: AppHandle) -> Described | None:
        r = self._ask(handle, "scontrol", "show", "job", "-o", handle.job_id)
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
        q = self._ask(handle, "squeue", "-h", "-j", handle.job_id, "-o", "%T")
        # with -M, squeue heads its answer "CLUSTER: <name>"
        words = [w for line in q.stdout.splitlines() if not line.startswith("CLUSTER:") for w in line.split()]
        return words[0] if q.returncode == 0 and words else ""

    def cancel(self, handle: AppHandle) -> None:
        self._ask(handle, "scancel", handle.job_id)  # an ended or unknown job: scancel says so; nothing to do

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
