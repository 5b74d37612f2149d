"""The AWS Batch submitter follows its job and records it (``scheduler.json``).

No AWS endpoint is reachable here, so AWS's side is botocore's ``Stubber`` loaded with the
real Batch service model (botocore 1.44.5, API 2016-08-10): every request the submitter makes
is checked against the model's input shape and the expected parameters, and every answer
below is checked against the model's output shape before the submitter sees it.  The
requests are the ones a real plan renders; the statuses and the exit-code places (the
parent job's ``container`` / ``attempts``, the main node ``JOBID#0``) are AWS's documented
ones (https://docs.aws.amazon.com/batch/latest/userguide/multi-node-parallel-jobs.html).
What this cannot show: AWS's timing, or anything AWS decides beyond its schema.  The node
side (the container entrypoint) runs for real in ``test_batch_loopback.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelctl.api import plan, validate_text
from accelctl.contract import scheduler
from accelctl.engines import batch_submit
from accelctl.run import store

botocore_session = pytest.importorskip("botocore.session")
from botocore.stub import Stubber  # noqa: E402

WORKLOAD = """
workload tiny_batch {
  task pretrain
  model gpt2(layers = 2, hidden = 64, heads = 4)
  dataset synthetic(seq_len = 32)
  batch { micro = 4  accumulation = 1 }
  optimizer adamw { lr = 0.001 }
  measure { warmup = 1  steps = 4 }
  engine aws_batch { job_queue = "q"  image = "img"  vcpus = 2  memory = 4 GB }
  target two { device = cpu  devices = 1  nodes = 2  threads = 1  precision = fp32
               parallel = zero(stage = 1)  engine = aws_batch }
}
"""
JOB_ID = "4c9e5a1e-6f0b-4b8e-9a57-0d3c1f2b7e11"
JOB_ARN = f"arn:aws:batch:us-east-1:123456789012:job/{JOB_ID}"
DEF_ARN = "arn:aws:batch:us-east-1:123456789012:job-definition/tiny_batch-two:7"


@pytest.fixture
def run_dir(tmp_path):
    """A run folder holding the two request files of a real plan."""
    specs, diags = validate_text(WORKLOAD)
    assert not diags, diags
    folder = tmp_path / "runs" / "r1"
    folder.mkdir(parents=True)
    for f in plan(specs[0], "two").files:
        if f.path.startswith("batch_"):
            (folder / f.path).write_text(f.content)
    return folder


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


def test_a_job_that_succeeds_is_followed_and_recorded_at_every_status(run_dir, client, capsys, monkeypatch):
    monkeypatch.setenv("ACCELCTL_BATCH_POLL_S", "0")
    definition = expect_submission(client, run_dir)
    for status in ("RUNNABLE", "RUNNABLE", "STARTING", "RUNNING"):
        expect_describe(client, job(status, definition))
    expect_describe(client, job("SUCCEEDED", definition, container={"exitCode": 0},
                                statusReason="Essential container in task exited"))
    rc = batch_submit.main([str(run_dir / "batch_job_definition.json"), str(run_dir / "batch_submit_job.json")],
                           client=client)
    out = capsys.readouterr().out
    assert rc == 0, out
    # each change printed once, in AWS's order
    changes = [line.split(JOB_ID)[1].split()[0].rstrip(":") for line in out.splitlines()
               if line.startswith(f"accelctl: aws_batch job {JOB_ID}")]
    assert changes == ["RUNNABLE", "STARTING", "RUNNING", "SUCCEEDED"], out
    assert scheduler.read(run_dir) == scheduler.SchedulerJob("aws_batch", JOB_ID, "SUCCEEDED", 0, JOB_ARN)


def test_a_failed_multinode_job_takes_the_main_nodes_exit_code(run_dir, client):
    """The parent job carries no exit code here: the submitter asks for the main node
    (``JOBID#0``); every record it wrote on the way is the status it had just seen."""
    definition, _ = requests(run_dir)
    seen: list[str] = []
    expect_describe(client, job("RUNNING", definition))
    expect_describe(client, job("FAILED", definition, statusReason="Essential container in task exited"))
    expect_describe(client, {**job("FAILED", definition), "jobId": f"{JOB_ID}#0", "container": {"exitCode": 3}},
                    job_id=f"{JOB_ID}#0")

    def stop() -> int:
        seen.append(scheduler.read(run_dir).state if scheduler.read(run_dir) else "")
        return 0

    batch_submit.record(run_dir, JOB_ID, "SUBMITTED", None, JOB_ARN)
    rc = batch_submit.follow(client, JOB_ID, run_dir, JOB_ARN, poll_s=0, stop=stop)
    assert rc == 3
    assert seen == ["SUBMITTED", "RUNNING"]
    assert scheduler.read(run_dir) == scheduler.SchedulerJob("aws_batch", JOB_ID, "FAILED", 3, JOB_ARN)
    # the run store folds the record into summary.json; `accelctl runs` shows it
    (run_dir / store.PLAN_FILE).write_text(json.dumps({"workload": "tiny_batch", "target": "two",
                                                       "backend": "deepspeed", "engine": "aws_batch"}))
    store.write_summary(run_dir, {"run_id": run_dir.name, "status": "failed"})
    summary = json.loads((run_dir / store.SUMMARY_FILE).read_text())
    assert summary["scheduler"] == {"scheduler": "aws_batch", "job_id": JOB_ID, "state": "FAILED", "exit_code": 3,
                                    "ref": JOB_ARN}
    assert store.read_run(run_dir).scheduler.short() == f"aws_batch {JOB_ID} FAILED exit 3"


def test_a_stop_terminates_the_job_and_waits_until_it_ended(run_dir, client, capsys):
    definition, _ = requests(run_dir)
    polls = []
    expect_describe(client, job("RUNNING", definition))
    client.stub.add_response("terminate_job", {}, {"jobId": JOB_ID, "reason": "accelctl: the run was stopped"})
    expect_describe(client, job("RUNNING", definition))  # still stopping
    expect_describe(client, job("FAILED", definition, container={"exitCode": 143},
                                statusReason="accelctl: the run was stopped"))

    def stop() -> int:
        polls.append(1)
        return 15 if len(polls) > 1 else 0

    rc = batch_submit.follow(client, JOB_ID, run_dir, JOB_ARN, poll_s=0, stop=stop)
    assert rc == 128 + 15
    assert "terminated (FAILED: accelctl: the run was stopped)" in capsys.readouterr().out
    assert scheduler.read(run_dir) == scheduler.SchedulerJob("aws_batch", JOB_ID, "FAILED", 143, JOB_ARN)


def test_a_job_aws_forgot_ends_the_submitter_and_a_describe_error_is_retried(run_dir, client, capsys):
    definition, _ = requests(run_dir)
    client.stub.add_client_error("describe_jobs", "TooManyRequestsException", "Too Many Requests", 429)
    expect_describe(client, job("RUNNING", definition))
    expect_describe(client, None)
    assert batch_submit.follow(client, JOB_ID, run_dir, JOB_ARN, poll_s=0, stop=lambda: 0) == 1
    out = capsys.readouterr().out
    assert "Too Many Requests" in out and f"aws_batch job {JOB_ID} gone" in out
    assert scheduler.read(run_dir).state == "RUNNING"  # the last status AWS gave


def test_an_aws_error_on_submission_is_one_line_and_exit_1(run_dir, client, capsys):
    definition, _ = requests(run_dir)
    client.stub.add_client_error("register_job_definition", "ClientException", "image is not valid", 400,
                                 expected_params=definition)
    rc = batch_submit.main([str(run_dir / "batch_job_definition.json"), str(run_dir / "batch_submit_job.json")],
                           client=client)
    err = capsys.readouterr().err
    assert rc == 1 and "image is not valid" in err and "Traceback" not in err
    assert scheduler.read(run_dir) is None  # nothing was submitted
