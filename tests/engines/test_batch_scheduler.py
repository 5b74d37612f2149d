"""The AWS Batch scheduler, followed by the run's supervisor (``accelctl.run.supervision.scheduled``), records
its job (``scheduler.json``) and is cancelled by the stored handle alone.

No AWS endpoint is reachable here, so AWS's side is botocore's ``Stubber`` loaded with the
real Batch service model (botocore 1.44.5, API 2016-08-10): every request the scheduler makes
is checked against the model's input shape and the expected parameters, and every answer
below is checked against the model's output shape before the scheduler sees it.  The
requests are the ones a real plan renders; the statuses and the exit-code places (the
parent job's ``container`` / ``attempts``, the main node ``JOBID#0``) are AWS's documented
ones (https://docs.aws.amazon.com/batch/latest/userguide/multi-node-parallel-jobs.html).
What this cannot show: AWS's timing, or anything AWS decides beyond its schema.  The node
side (the container entrypoint) runs for real in ``test_batch_loopback.py``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from accelctl.api import plan, validate_text
from accelctl.contract import scheduler
from accelctl.engines.batch_scheduler import STATES, BatchScheduler
from accelctl.engines.scheduler import AppState
from accelctl.run import store
from accelctl.run.store import scheduled_job
from accelctl.run.supervision.scheduled import ScheduledJob

botocore_session = pytest.importorskip("botocore.session")
import aws_answers  # noqa: E402
from botocore.stub import Stubber  # noqa: E402
from test_batch_loopback import TWO_NODES  # noqa: E402

#: the loopback test's two-node ZeRO-1 workload (its requests are what the scheduler submits)
WORKLOAD = TWO_NODES.replace("PORT", "29500")
JOB_ID = "4c9e5a1e-6f0b-4b8e-9a57-0d3c1f2b7e11"
JOB_ARN = f"arn:aws:batch:us-east-1:123456789012:job/{JOB_ID}"
DEF_ARN = "arn:aws:batch:us-east-1:123456789012:job-definition/tiny_batch-two:7"


@pytest.fixture
def run_dir(tmp_path):
    """A run folder holding the two request files of a real plan."""
    folder = tmp_path / "runs" / "r1"
    folder.mkdir(parents=True)
    for f in the_plan().files:
        if f.path.startswith("batch_"):
            (folder / f.path).write_text(f.content)
    return folder


def the_plan():
    specs, diags = validate_text(WORKLOAD)
    assert not diags, diags
    return plan(specs[0], "two")


@pytest.fixture
def client():
    c = botocore_session.get_session().create_client("batch", region_name="us-east-1", aws_access_key_id="x",
                                                      aws_secret_access_key="x")
    with Stubber(c) as stub:
        c.stub = stub
        yield c
        stub.assert_no_pending_responses()


def requests(folder: Path) -> tuple[dict, dict]:
    return (json.loads((folder / "batch_job_definition.json").read_text()),
            json.loads((folder / "batch_submit_job.json").read_text()))


def job(status: str, definition: dict, **extra) -> dict:
    """A DescribeJobs JobDetail of the parent multi-node job."""
    return {"jobName": "tiny_batch-two", "jobId": JOB_ID, "jobArn": JOB_ARN, "jobQueue": "q", "status": status,
            "startedAt": 1763900000000, "jobDefinition": DEF_ARN, "nodeProperties": definition["nodeProperties"],
            **extra}


def expect_submission(c, folder: Path) -> dict:
    definition, request = requests(folder)
    c.stub.add_response("register_job_definition", {"jobDefinitionName": "tiny_batch-two",
                                                    "jobDefinitionArn": DEF_ARN, "revision": 7}, definition)
    c.stub.add_response("submit_job", {"jobName": "tiny_batch-two", "jobId": JOB_ID, "jobArn": JOB_ARN},
                        dict(request, jobDefinition=DEF_ARN))
    return definition


def expect_describe(c, detail: dict | None, job_id: str = JOB_ID) -> None:
    c.stub.add_response("describe_jobs", {"jobs": [detail] if detail else []}, {"jobs": [job_id]})


def follow(client, run_dir: Path, poll_s: float = 0.0) -> ScheduledJob:
    """The plan's request submitted and followed as the run's supervisor does; the log side
    (``test_batch_logs.py``) asks clients of its own, here told of no job (no output to copy)."""
    log_batch = aws_answers.client("batch")
    aws_answers.answer(log_batch, "DescribeJobs", lambda request: {"jobs": []})
    sched = BatchScheduler(client, logs=aws_answers.client("logs"), log_batch=log_batch)
    sched.poll_s = poll_s
    return ScheduledJob(sched, the_plan().request, run_dir, {}, run_dir / "worker.log")


def log_of(run_dir: Path) -> str:
    return (run_dir / "worker.log").read_text()


def recorded(state: str, code: int | None, app_state: str) -> scheduler.SchedulerJob:
    return scheduler.SchedulerJob("aws_batch", JOB_ID, state, code, "", f"aws_batch://q/{JOB_ID}", app_state)


def test_the_plan_keeps_the_requests_it_renders(run_dir):
    definition, request = requests(run_dir)
    p = the_plan()
    assert p.request["definition"] == definition and p.request["submit"] == request


def test_every_status_of_the_service_model_is_mapped():
    model = botocore_session.get_session().get_service_model("batch")
    statuses = model.shape_for("JobStatus").enum
    assert statuses and sorted(set(statuses) - set(STATES)) == []
    assert [s for s in statuses if STATES[s].terminal] == ["SUCCEEDED", "FAILED"]
    assert STATES["SUCCEEDED"] is AppState.SUCCEEDED


def test_a_job_that_succeeds_is_followed_and_recorded_at_every_status(run_dir, client):
    definition = expect_submission(client, run_dir)
    for status in ("RUNNABLE", "RUNNABLE", "STARTING", "RUNNING"):
        expect_describe(client, job(status, definition))
    expect_describe(client, job("SUCCEEDED", definition, container={"exitCode": 0},
                                statusReason="Essential container in task exited"))
    assert follow(client, run_dir).wait(timeout=30) == 0, log_of(run_dir)
    out = log_of(run_dir)
    # each change written once, in AWS's order
    changes = [line.split(JOB_ID)[1].split()[0] for line in out.splitlines()
               if line.startswith(f"accelctl: aws_batch://q/{JOB_ID} ")]
    assert changes == ["RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED"], out
    assert f"accelctl: submitted aws_batch://q/{JOB_ID}" in out
    assert scheduler.read(run_dir) == recorded("SUCCEEDED", 0, "SUCCEEDED")


def test_a_failed_multinode_job_takes_the_main_nodes_exit_code(run_dir, client):
    """The parent job carries no exit code here: the scheduler asks for the main node (``JOBID#0``)."""
    definition = expect_submission(client, run_dir)
    expect_describe(client, job("RUNNING", definition))
    expect_describe(client, job("FAILED", definition, statusReason="Essential container in task exited"))
    expect_describe(client, {**job("FAILED", definition), "jobId": f"{JOB_ID}#0", "container": {"exitCode": 3}},
                    job_id=f"{JOB_ID}#0")
    assert follow(client, run_dir).wait(timeout=30) == 3
    assert scheduler.read(run_dir) == recorded("FAILED", 3, "FAILED")
    # the run store folds the record into summary.json; `accelctl runs` shows it
    (run_dir / store.PLAN_FILE).write_text(json.dumps({"workload": "tiny_batch", "target": "two",
                                                       "backend": "deepspeed", "engine": "aws_batch"}))
    store.write_summary(run_dir, {"run_id": run_dir.name, "status": "failed"})
    summary = json.loads((run_dir / store.SUMMARY_FILE).read_text())
    assert summary["scheduler"] == {"scheduler": "aws_batch", "job_id": JOB_ID, "state": "FAILED", "exit_code": 3,
                                    "handle": f"aws_batch://q/{JOB_ID}", "app_state": "FAILED"}
    assert store.read_run(run_dir).scheduler.short() == f"aws_batch {JOB_ID} FAILED exit 3"


def test_a_stop_terminates_the_job_and_waits_until_it_ended(run_dir, client):
    definition = expect_submission(client, run_dir)
    expect_describe(client, job("RUNNING", definition))
    running = follow(client, run_dir, poll_s=0.05)
    deadline = time.monotonic() + 30
    while (scheduler.read(run_dir) is None or scheduler.read(run_dir).state != "RUNNING") and \
            time.monotonic() < deadline:
        time.sleep(0.01)
    client.stub.add_response("terminate_job", {}, {"jobId": JOB_ID, "reason": "accelctl: the run was stopped"})
    expect_describe(client, job("RUNNING", definition))  # still stopping
    expect_describe(client, job("FAILED", definition, container={"exitCode": 143},
                                statusReason="accelctl: the run was stopped"))
    running.send_signal(15)
    assert running.wait(timeout=30) == 128 + 15
    assert f"aws_batch://q/{JOB_ID} cancelled (FAILED)" in log_of(run_dir)
    assert scheduler.read(run_dir) == recorded("FAILED", 143, "FAILED")


def test_a_job_aws_forgot_ends_the_follow_and_a_describe_error_is_retried(run_dir, client):
    expect_submission(client, run_dir)
    definition, _ = requests(run_dir)
    client.stub.add_client_error("describe_jobs", "TooManyRequestsException", "Too Many Requests", 429)
    expect_describe(client, job("RUNNING", definition))
    expect_describe(client, None)
    assert follow(client, run_dir).wait(timeout=30) == 1
    out = log_of(run_dir)
    assert "Too Many Requests" in out and f"aws_batch://q/{JOB_ID} is gone" in out
    assert scheduler.read(run_dir).state == "gone"


def test_an_aws_error_on_submission_is_one_line_and_exit_1(run_dir, client):
    definition, _ = requests(run_dir)
    client.stub.add_client_error("register_job_definition", "ClientException", "image is not valid", 400,
                                 expected_params=definition)
    assert follow(client, run_dir).wait(timeout=30) == 1
    out = log_of(run_dir)
    assert "image is not valid" in out and "Traceback" not in out and len(out.strip().splitlines()) == 1
    assert scheduler.read(run_dir) is None  # nothing was submitted


def test_the_stored_handle_alone_cancels_the_job(run_dir, client):
    """What ``accelctl cancel`` does once the supervisor is gone: a scheduler of its own (a new
    client), the handle read from the run store, TerminateJob, a wait until the job ended."""
    definition = expect_submission(client, run_dir)
    expect_describe(client, job("RUNNING", definition))
    running = follow(client, run_dir, poll_s=0.05)
    deadline = time.monotonic() + 30
    while scheduled_job.handle_of(run_dir) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    handle = scheduled_job.handle_of(run_dir)
    assert str(handle) == f"aws_batch://q/{JOB_ID}"
    fresh = botocore_session.get_session().create_client("batch", region_name="us-east-1", aws_access_key_id="x",
                                                          aws_secret_access_key="x")
    with Stubber(fresh) as stub:
        stub.add_response("terminate_job", {}, {"jobId": JOB_ID, "reason": "accelctl: the run was stopped"})
        stub.add_response("describe_jobs", {"jobs": [job("FAILED", definition, container={"exitCode": 143})]},
                          {"jobs": [JOB_ID]})
        sched = BatchScheduler(fresh)
        sched.poll_s = 0
        done = scheduled_job.cancel(run_dir, sched, handle)
        stub.assert_no_pending_responses()
    assert (done.state, done.exit_code) == (AppState.FAILED, 143)
    assert scheduler.read(run_dir) == recorded("FAILED", 143, "FAILED")
    # the first supervisor's follow (were it still there) sees the job end
    expect_describe(client, job("FAILED", definition, container={"exitCode": 143}))
    assert running.wait(timeout=30) == 143


def test_a_scheduler_that_cannot_be_asked_is_one_error_naming_the_job(run_dir, monkeypatch):
    """No AWS credentials here (a real client finds none): the cancel by handle fails in one
    line that names the job, as a RunError (exit 1), never a traceback."""
    from accelctl.errors import RunError

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(run_dir / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(run_dir / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    bare = botocore_session.get_session().create_client("batch", region_name="us-east-1")
    handle = scheduled_job.AppHandle("aws_batch", "q", JOB_ID)
    with pytest.raises(RunError) as exc:
        scheduled_job.cancel(run_dir, BatchScheduler(bare), handle)
    assert exc.value.exit_code == 1 and f"aws_batch://q/{JOB_ID} could not be cancelled" in str(exc.value)
    assert "NoCredentialsError" in str(exc.value) and len(str(exc.value).splitlines()) == 1
    assert scheduler.read(run_dir) is None  # nothing recorded as cancelled
