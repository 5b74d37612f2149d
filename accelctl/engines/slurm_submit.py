"""``python -m accelctl.engines.slurm_submit JOB.sbatch``: the launch of a ``slurm`` plan.

Submits the script with ``sbatch --parsable`` from its folder (the run folder: the job's
``$SLURM_SUBMIT_DIR``, where its output and the ranks' events land), then follows the job
with ``scontrol show job -o ID`` (``squeue -h -j ID`` once the controller has forgotten it)
until it ends, and exits with the job's exit code (1 for a job that ended without one:
cancelled, timed out, node failure).  SIGINT or SIGTERM runs ``scancel ID`` and waits until
the job has left the queue, so stopping this process stops the job.  ``sbatch --wait`` is not
used: its client back-off adds seconds to every job.

The job id, its state at every change and its final state and exit code go to the run
folder's ``scheduler.json`` (``accelctl.contract.scheduler``), which the run store copies
into ``summary.json``; ``slurm_job_id`` holds the bare id.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from accelctl.contract import scheduler

POLL_S = 0.25
#: states after which a job runs nothing any more
DONE = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL",
        "DEADLINE", "SPECIAL_EXIT", "REVOKED"}
_stop = {"signal": 0}


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    # a session of its own: the runner's SIGINT to our group must not cut a query short
    return subprocess.run(argv, check=False, capture_output=True, text=True, start_new_session=True)


def job_state(job_id: str) -> tuple[str, int | None]:
    """(state, exit code) of the job; ("", None) once Slurm no longer knows it."""
    r = _run(["scontrol", "show", "job", "-o", job_id])
    if r.returncode == 0 and "JobState=" in r.stdout:
        state = re.search(r"JobState=(\S+)", r.stdout).group(1)  # type: ignore[union-attr]
        m = re.search(r"\bExitCode=(\d+):(\d+)", r.stdout)
        code = None if m is None else (int(m.group(1)) or (128 + int(m.group(2)) if int(m.group(2)) else 0))
        return state, code
    q = _run(["squeue", "-h", "-j", job_id, "-o", "%T"])
    if q.returncode == 0 and q.stdout.strip():
        return q.stdout.split()[0], None
    return "", None


def _on_signal(signum, frame):
    _stop["signal"] = signum


def record(folder: Path, job_id: str, state: str, code: int | None = None) -> None:
    scheduler.write(folder, scheduler.SchedulerJob("slurm", job_id, state, code))


def cancel(job_id: str, timeout_s: float = 120.0, folder: Path | None = None) -> None:
    """scancel the job and wait until it runs nothing any more."""
    _run(["scancel", job_id])
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        state, code = job_state(job_id)
        if not state or (state in DONE and not _run(["squeue", "-h", "-j", job_id]).stdout.strip()):
            print(f"accelctl: slurm job {job_id} cancelled ({state or 'gone'})", flush=True)
            if folder is not None:
                record(folder, job_id, state or "CANCELLED", code)
            return
        time.sleep(POLL_S)
    print(f"accelctl: slurm job {job_id} still in the queue {timeout_s:.0f} s after scancel", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m accelctl.engines.slurm_submit JOB.sbatch", file=sys.stderr)
        return 2
    script = Path(args[0]).resolve()
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    env = dict(os.environ, ACCELCTL_PYTHON=sys.executable)
    t0 = time.time()
    try:
        r = subprocess.run(["sbatch", "--parsable", script.name], cwd=script.parent, env=env, check=False,
                           capture_output=True, text=True, start_new_session=True)
    except FileNotFoundError:
        print("sbatch is not installed (Slurm's client)", file=sys.stderr)
        return 127
    if r.returncode != 0:
        print(f"sbatch: {r.stderr.strip()}", file=sys.stderr)
        return r.returncode
    job_id = r.stdout.strip().split(";")[0]
    print(f"accelctl: submitted slurm job {job_id} ({time.time() - t0:.2f} s)", flush=True)
    (script.parent / "slurm_job_id").write_text(job_id + "\n", encoding="utf-8")
    record(script.parent, job_id, "SUBMITTED")
    last = ""
    while True:
        if _stop["signal"]:
            print(f"accelctl: signal {_stop['signal']}: scancel {job_id}", flush=True)
            cancel(job_id, folder=script.parent)
            return 128 + _stop["signal"]
        state, code = job_state(job_id)
        if state != last:
            print(f"accelctl: slurm job {job_id} {state or 'gone'} ({time.time() - t0:.2f} s)", flush=True)
            if state:
                record(script.parent, job_id, state, code if state in DONE else None)
        if not state:  # forgotten by the controller (MinJobAge) before we saw it end
            return 0 if last == "COMPLETED" else 1
        last = state
        if state in DONE:
            return (code or 0) if state == "COMPLETED" else (code or 1)
        time.sleep(POLL_S)


if __name__ == "__main__":
    sys.exit(main())
