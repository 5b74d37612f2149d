"""``python -m accelctl.engines.batch_submit JOB_DEFINITION.json SUBMIT_JOB.json``: the launch of
an ``aws_batch`` plan.

1. Registers the job definition, then submits the job against the exact revision AWS
   returned (not "the latest of that name", which another registration could change in
   between), with botocore and the caller's usual AWS configuration (profile, region,
   credentials).  An error: AWS's message, exit 1.
2. Follows the job with ``DescribeJobs`` every ``ACCELCTL_BATCH_POLL_S`` seconds (default
   5), printing each status change (SUBMITTED, PENDING, RUNNABLE, STARTING, RUNNING,
   SUCCEEDED, FAILED), and exits with the job's exit code: 0 on SUCCEEDED, the main node's
   container exit code on FAILED (1 when AWS gave none: a job that never started).  For a
   multi-node parallel job AWS fills the parent job's ``status``, ``statusReason`` and exit
   information from the main node ("The final job status (SUCCEEDED or FAILED) is determined
   by the final job status of the main node", https://docs.aws.amazon.com/batch/latest/userguide/multi-node-parallel-jobs.html);
   where the parent carries no exit code this asks for the main node itself (``JOBID#N``).
3. SIGINT/SIGTERM call ``TerminateJob`` (it cancels a job that has not started and stops one
   that runs) and wait until the job is SUCCEEDED or FAILED, then exit 128 + the signal.

The job id, its status at every change, its final status and exit code go to the run
folder's ``scheduler.json`` (``accelctl.contract.scheduler``: scheduler ``aws_batch``, ``ref``
the job's ARN), which the run store copies into ``summary.json`` and ``accelctl runs`` shows.
The run folder is the folder of ``JOB_DEFINITION.json``.  The events of the ranks stay on the
nodes (``ACCELCTL_RUN_DIR`` in the containers); what comes back here is the job's status.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

from accelctl.contract import scheduler

NAME = "aws_batch"
DEFAULT_POLL_S = 5.0
TERMINATE_TIMEOUT_S = 600.0
#: statuses after which a Batch job runs nothing any more
DONE = {"SUCCEEDED", "FAILED"}
_stop = {"signal": 0}


def _on_signal(signum, frame):
    _stop["signal"] = signum


def poll_interval() -> float:
    try:
        return max(0.0, float(os.environ.get("ACCELCTL_BATCH_POLL_S", DEFAULT_POLL_S)))
    except ValueError:
        return DEFAULT_POLL_S


def submit(client, definition: dict, request: dict) -> dict:
    """RegisterJobDefinition, then SubmitJob against the revision it returned; SubmitJob's answer."""
    registered = client.register_job_definition(**definition)
    print(f"accelctl: registered {registered['jobDefinitionArn']}", flush=True)
    return client.submit_job(**dict(request, jobDefinition=registered["jobDefinitionArn"]))


def _exit_code(job: dict) -> int | None:
    container = job.get("container") or {}
    if isinstance(container.get("exitCode"), int):
        return container["exitCode"]
    for attempt in reversed(job.get("attempts") or []):
        code = (attempt.get("container") or {}).get("exitCode")
        if isinstance(code, int):
            return code
    return None


def job_state(client, job_id: str) -> tuple[str, int | None, str]:
    """(status, exit code, statusReason) of the job; ("", None, "") once AWS no longer knows it
    (DescribeJobs answers for about a week after a job ends)."""
    jobs = client.describe_jobs(jobs=[job_id])["jobs"]
    if not jobs:
        return "", None, ""
    job = jobs[0]
    status, code = job["status"], _exit_code(job)
    if status in DONE and code is None and job.get("nodeProperties"):
        main = client.describe_jobs(jobs=[f"{job_id}#{job['nodeProperties']['mainNode']}"])["jobs"]
        code = _exit_code(main[0]) if main else None
    return status, code, job.get("statusReason", "")


def record(folder: Path, job_id: str, state: str, code: int | None = None, arn: str = "") -> None:
    scheduler.write(folder, scheduler.SchedulerJob(NAME, job_id, state, code, arn))


def terminate(client, job_id: str, folder: Path, arn: str = "", timeout_s: float = TERMINATE_TIMEOUT_S,
              poll_s: float = DEFAULT_POLL_S) -> str:
    """TerminateJob, then wait until the job is SUCCEEDED or FAILED; its last status."""
    client.terminate_job(jobId=job_id, reason="accelctl: the run was stopped")
    deadline = time.monotonic() + timeout_s
    state = ""
    while time.monotonic() < deadline:
        state, code, reason = job_state(client, job_id)
        if not state or state in DONE:
            print(f"accelctl: aws_batch job {job_id} terminated ({state or 'gone'}{': ' + reason if reason else ''})",
                  flush=True)
            record(folder, job_id, state or "FAILED", code, arn)
            return state
        time.sleep(poll_s)
    print(f"accelctl: aws_batch job {job_id} still {state} {timeout_s:.0f} s after TerminateJob", flush=True)
    return state


def follow(client, job_id: str, folder: Path, arn: str = "", poll_s: float = DEFAULT_POLL_S,
           stop: Callable[[], int] = lambda: _stop["signal"]) -> int:
    """Poll the job until it ends (its exit code) or ``stop()`` names a signal (128 + it).  A
    failed DescribeJobs (throttling, a network blip) is printed and polled again."""
    import botocore.exceptions

    t0, last = time.time(), "SUBMITTED"
    while True:
        signum = stop()
        if signum:
            print(f"accelctl: signal {signum}: TerminateJob {job_id}", flush=True)
            terminate(client, job_id, folder, arn, poll_s=poll_s)
            return 128 + signum
        try:
            state, code, reason = job_state(client, job_id)
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
            print(f"accelctl: DescribeJobs {job_id}: {str(e).splitlines()[0][:200]}", flush=True)
            time.sleep(poll_s)
            continue
        if state != last:
            why = f": {reason}" if reason and state in DONE else ""
            print(f"accelctl: aws_batch job {job_id} {state or 'gone'}{why} ({time.time() - t0:.2f} s)", flush=True)
            if state:
                record(folder, job_id, state, code if state in DONE else None, arn)
        if not state:  # AWS forgot it before we saw it end
            return 1
        last = state
        if state in DONE:
            return 0 if state == "SUCCEEDED" else (code or 1)
        time.sleep(poll_s)


def main(argv: list[str] | None = None, client=None) -> int:
    """``client``: a botocore Batch client to use instead of one from the AWS configuration."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m accelctl.engines.batch_submit JOB_DEFINITION.json SUBMIT_JOB.json", file=sys.stderr)
        return 2
    definition, request = (json.loads(Path(a).read_text(encoding="utf-8")) for a in args)
    folder = Path(args[0]).resolve().parent
    try:
        import botocore.exceptions
        import botocore.session
    except ImportError:
        print("botocore is not installed: pip install 'accelctl[aws]'", file=sys.stderr)
        return 1
    if argv is None:
        signal.signal(signal.SIGINT, _on_signal)
        signal.signal(signal.SIGTERM, _on_signal)
    try:
        client = client or botocore.session.get_session().create_client("batch")
        job = submit(client, definition, request)
        job_id, arn = job["jobId"], job.get("jobArn", "")
        print(f"accelctl: submitted {job['jobName']}: jobId {job_id} ({arn})", flush=True)
        record(folder, job_id, "SUBMITTED", None, arn)
        return follow(client, job_id, folder, arn, poll_interval())
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as e:
        print(f"AWS Batch: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
