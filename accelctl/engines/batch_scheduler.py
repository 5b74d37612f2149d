"""AWS Batch as a scheduler: RegisterJobDefinition + SubmitJob, DescribeJobs, TerminateJob, with
botocore and the caller's usual AWS configuration (profile, region, credentials).

``submit`` registers the job definition, then submits the job against the exact revision AWS
returned (not "the latest of that name", which another registration could change in between);
the handle is ``aws_batch://<queue>/<job id>``.  ``describe`` maps DescribeJobs' ``status``;
its exit code is the job's container's, else the last attempt's, else, for a multi-node
parallel job whose parent carries none, the main node's (``JOBID#N``): "The final job status
(SUCCEEDED or FAILED) is determined by the final job status of the main node"
(https://docs.aws.amazon.com/batch/latest/userguide/multi-node-parallel-jobs.html).  A job AWS
no longer answers for (about a week after it ended) is None.  ``cancel`` is TerminateJob,
which cancels a job that has not started and stops one that runs; Batch has no cancelled
status, so a terminated job ends FAILED with our reason.  ``ACCELCTL_BATCH_POLL_S`` (default 5)
spaces the calls of a follow loop.  The ranks' events stay on the nodes (``ACCELCTL_RUN_DIR``
in the containers); what comes back here is the job's status.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from accelctl.engines.scheduler import AppHandle, AppState, Described, Scheduler

#: DescribeJobs' ``status`` (the service model's ``JobStatus``) -> the one state
STATES: Mapping[str, AppState] = {
    "SUBMITTED": AppState.SUBMITTED, "PENDING": AppState.PENDING, "RUNNABLE": AppState.PENDING,
    "STARTING": AppState.PENDING, "RUNNING": AppState.RUNNING, "SUCCEEDED": AppState.SUCCEEDED,
    "FAILED": AppState.FAILED,
}
DEFAULT_POLL_S = 5.0
STOP_REASON = "accelctl: the run was stopped"


def poll_interval() -> float:
    try:
        return max(0.0, float(os.environ.get("ACCELCTL_BATCH_POLL_S", DEFAULT_POLL_S)))
    except ValueError:
        return DEFAULT_POLL_S


def _exit_code(job: dict) -> int | None:
    container = job.get("container") or {}
    if isinstance(container.get("exitCode"), int):
        return container["exitCode"]
    for attempt in reversed(job.get("attempts") or []):
        code = (attempt.get("container") or {}).get("exitCode")
        if isinstance(code, int):
            return code
    return None


class BatchScheduler(Scheduler):
    name = "aws_batch"
    STATES = STATES
    cancel_timeout_s = 600.0

    def __init__(self, client=None) -> None:
        #: a botocore Batch client; None: one from the AWS configuration when first needed
        self._client = client
        self.poll_s = poll_interval()

    @property
    def client(self):
        if self._client is None:
            try:
                import botocore.session
            except ImportError:
                raise RuntimeError("botocore is not installed: pip install 'accelctl[aws]'") from None
            self._client = botocore.session.get_session().create_client("batch")
        return self._client

    def submit(self, request: dict, run_dir: Path, env: Mapping[str, str]) -> AppHandle:
        import botocore.exceptions

        try:
            registered = self.client.register_job_definition(**request["definition"])
            job = self.client.submit_job(**dict(request["submit"], jobDefinition=registered["jobDefinitionArn"]))
        except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as exc:
            raise RuntimeError(f"AWS Batch: {exc}") from None
        return AppHandle(self.name, request["submit"]["jobQueue"], job["jobId"])

    def describe(self, handle: AppHandle) -> Described | None:
        jobs = self.client.describe_jobs(jobs=[handle.job_id])["jobs"]
        if not jobs:
            return None
        job = jobs[0]
        raw, code = job["status"], _exit_code(job)
        state = self.state_of(raw)
        if state.terminal and code is None and job.get("nodeProperties"):
            main = self.client.describe_jobs(jobs=[f"{handle.job_id}#{job['nodeProperties']['mainNode']}"])["jobs"]
            code = _exit_code(main[0]) if main else None
        return Described(state, raw, code if state.terminal else None, job.get("statusReason", ""))

    def cancel(self, handle: AppHandle) -> None:
        self.client.terminate_job(jobId=handle.job_id, reason=STOP_REASON)  # an ended job: nothing happens
