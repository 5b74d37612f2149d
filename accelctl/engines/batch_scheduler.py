"""AWS Batch as a scheduler: RegisterJobDefinition + SubmitJob, DescribeJobs, TerminateJob, with
botocore and the caller's usual AWS configuration (profile, region, credentials).

``submit`` registers the job definition and submits against the exact revision AWS returned (not
"the latest of that name", which another registration could change); the handle is
``aws_batch://<queue>/<job id>``.  ``describe`` maps DescribeJobs' ``status``, the exit code being
the container's, the last attempt's or the main node's (None once AWS forgets the job);
``cancel`` is TerminateJob (Batch has no cancelled status: the job ends FAILED with our reason).
``log_iter`` follows the job's CloudWatch Logs streams, one per node and attempt, each line
prefixed ``[node N]`` / ``[attempt K]`` so that a followed job and one read later print the same
lines.  ``ACCELCTL_BATCH_POLL_S`` spaces the calls of a follow loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from accelctl.engines.scheduler import AppHandle, AppState, Described, Scheduler
from accelctl.errors import first_line

#: DescribeJobs' ``status`` (the service model's ``JobStatus``) -> the one state
STATES: Mapping[str, AppState] = {
    "SUBMITTED": AppState.SUBMITTED, "PENDING": AppState.PENDING, "RUNNABLE": AppState.PENDING,
    "STARTING": AppState.PENDING, "RUNNING": AppState.RUNNING, "SUCCEEDED": AppState.SUCCEEDED,
    "FAILED": AppState.FAILED,
}
DEFAULT_POLL_S = 5.0
#: where the awslogs driver writes when the job definition names no group
DEFAULT_LOG_GROUP = "/aws/batch/job"
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


def _attempt_streams(detail: dict) -> list[tuple[int, str]]:
    """(attempt number, log stream) of each attempt that has a stream, in order: the ended
    attempts' (``attempts[]``), then the current container's when it is none of those (a job
    back in RUNNABLE still names its last attempt's stream)."""
    attempts = detail.get("attempts") or []
    found = [(n, (a.get("container") or {}).get("logStreamName") or "") for n, a in enumerate(attempts, 1)]
    found = [(n, name) for n, name in found if name]
    current = (detail.get("container") or {}).get("logStreamName") or ""
    if current and current not in {name for _, name in found}:
        found.append((len(attempts) + 1, current))
    return found


def _may_retry(detail: dict, parent: dict) -> bool:
    """Batch may run the job more than once (``retryStrategy.attempts`` > 1, the node's else its
    parent's)."""
    strategy = detail.get("retryStrategy") or parent.get("retryStrategy") or {}
    return int(strategy.get("attempts") or 1) > 1


def _node_range_config(parent: dict, node: int) -> dict:
    """The ``logConfiguration`` of the node range (``targetNodes`` ``"a:b"``, ``"a:"``, ``"a"``)
    holding ``node``."""
    for rng in (parent.get("nodeProperties") or {}).get("nodeRangeProperties") or []:
        first, colon, last = str(rng.get("targetNodes", "")).partition(":")
        lo = int(first) if first.isdigit() else 0
        hi = (int(last) if last.isdigit() else node) if colon else lo
        if lo <= node <= hi:
            return (rng.get("container") or {}).get("logConfiguration") or {}
    return {}


def _node_index(node: dict) -> int:
    """A node job's index: its ``nodeDetails``, else the ``#N`` of its id."""
    index = (node.get("nodeDetails") or {}).get("nodeIndex")
    tail = str(node.get("jobId", "")).rpartition("#")[2]
    return index if isinstance(index, int) else int(tail) if tail.isdigit() else 0


@dataclass
class _Stream:
    group: str
    name: str
    prefix: str
    #: the region the awslogs driver writes to ("": the log side's own)
    region: str = ""
    token: str = ""


class BatchScheduler(Scheduler):
    name = "aws_batch"
    STATES = STATES
    cancel_timeout_s = 600.0

    def __init__(self, client=None, logs=None, log_batch=None, logs_by_region: Mapping | None = None) -> None:
        #: a botocore Batch client; None: one from the AWS configuration when first needed
        self._client = client
        #: the log side's CloudWatch Logs and Batch clients (None: see ``logs``, ``log_batch``)
        self._logs, self._log_batch = logs, log_batch
        #: CloudWatch Logs clients of other regions (``logs_in``), made when first needed
        self._regional_logs = dict(logs_by_region or {})
        self.poll_s = poll_interval()

    @property
    def client(self):
        if self._client is None:
            self._client = _session().create_client("batch")
        return self._client

    @property
    def logs(self):
        if self._logs is None:
            self._logs = _session().create_client("logs", region_name=self.client.meta.region_name)
        return self._logs

    @property
    def log_batch(self):
        return self._log_batch or self.client

    def logs_in(self, region: str):
        """The CloudWatch Logs client of ``region`` (``logs`` for "" or its own region)."""
        if not region or region == self.logs.meta.region_name:
            return self.logs
        if region not in self._regional_logs:
            self._regional_logs[region] = _session().create_client("logs", region_name=region)
        return self._regional_logs[region]

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

    # -- the job's output -------------------------------------------------------------------

    def log_iter(self, handle: AppHandle, run_dir: Path, done: Callable[[], bool]) -> Iterator[str]:
        """The job's CloudWatch Logs lines, followed until ``done()`` and read to their end."""
        import botocore.exceptions

        streams: dict[tuple[int, str], _Stream] = {}
        settled: set[int] = set()
        said: set[str] = set()
        while True:
            ended = done()
            try:
                refusal = self._find_streams(handle, streams, settled)
                if refusal:
                    yield refusal
                    return
                for stream in list(streams.values()):
                    yield from self._read(stream)
            except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
                # throttled, a blip, a region botocore refuses: said once, asked again at the next poll
                why = f"accelctl: the log of {handle}: {first_line(exc, 200, None)}"
                if why not in said:
                    said.add(why)
                    yield why
            if ended:
                return
            time.sleep(self.poll_s)

    def _find_streams(self, handle: AppHandle, streams: dict[tuple[int, str], _Stream], settled: set[int]) -> str:
        """Add the job's streams that exist by now to ``streams`` ((node index, stream name) ->
        stream, in the order found; node -1 for a single-node job); a node that can have no
        stream more goes into ``settled``, not asked about again.  A line saying why the job's
        output cannot be followed, or ""."""
        (parent,) = self.log_batch.describe_jobs(jobs=[handle.job_id])["jobs"] or [{}]
        nodes = int((parent.get("nodeProperties") or {}).get("numNodes") or 0)
        if not nodes:
            found = [(-1, parent, (parent.get("container") or {}).get("logConfiguration") or {})]
        else:
            wanted = [f"{handle.job_id}#{n}" for n in range(nodes) if n not in settled]
            found = []
            for i in range(0, len(wanted), 100):  # DescribeJobs takes 100 jobs at most
                for node in self.log_batch.describe_jobs(jobs=wanted[i:i + 100])["jobs"]:
                    index = _node_index(node)
                    config = (node.get("container") or {}).get("logConfiguration") or _node_range_config(parent, index)
                    found.append((index, node, config))
        for index, detail, config in found:
            driver = config.get("logDriver", "awslogs")
            if driver != "awslogs":
                return f"accelctl: {handle} logs through the {driver} driver, not CloudWatch Logs: no output here"
            options = config.get("options") or {}
            retried = _may_retry(detail, parent)
            attempts = _attempt_streams(detail)
            for number, name in attempts:
                prefix = (f"[node {index}] " if index >= 0 else "") + (f"[attempt {number}] " if retried else "")
                streams.setdefault((index, name), _Stream(options.get("awslogs-group") or DEFAULT_LOG_GROUP, name,
                                                          prefix, options.get("awslogs-region") or ""))
            if index >= 0 and attempts and (not retried or STATES.get(detail.get("status", "")) in
                                            (AppState.SUCCEEDED, AppState.FAILED)):
                settled.add(index)
        return ""

    def _read(self, stream: _Stream) -> Iterator[str]:
        """The stream's lines from where the last read ended, page by page, until the token
        comes back unchanged; nothing while the stream does not exist yet."""
        while True:
            ask = {"logGroupName": stream.group, "logStreamName": stream.name, "startFromHead": True}
            if stream.token:
                ask["nextToken"] = stream.token
            logs = self.logs_in(stream.region)
            try:
                page = logs.get_log_events(**ask)
            except logs.exceptions.ResourceNotFoundException:
                return  # the driver has not created it yet
            for event in page.get("events") or ():
                for line in str(event.get("message", "")).rstrip("\n").split("\n"):
                    yield stream.prefix + line
            token = page.get("nextForwardToken") or ""
            if not token or token == stream.token:
                return
            stream.token = token


def _session():
    try:
        import botocore.session
    except ImportError:
        raise RuntimeError("botocore is not installed: pip install 'accelctl[aws]'") from None
    return botocore.session.get_session()
