"""The AWS Batch job's output: ``BatchScheduler.log_iter`` follows the job's CloudWatch Logs
streams, and the run's supervisor (``accelctl.run.supervision.scheduled``) copies them into ``worker.log``.

No AWS endpoint is reachable here: AWS's side is botocore's ``Stubber`` on clients of the real
``batch`` (2016-08-10) and ``logs`` (2014-03-28) service models of the installed botocore, so
every request is checked against the model and against the parameters AWS must get, and every
answer against the model's output shape.  The places read are AWS's documented ones: the log
group ``/aws/batch/job`` unless the job's ``logConfiguration`` names another (``awslogs-group``),
the container's ``logStreamName`` ("each container attempt receives a log stream name when
they reach the RUNNING status"), a multi-node job's nodes ``JOBID#N``; GetLogEvents from the
head, the ``nextForwardToken`` coming back unchanged at the end of what is there.
"""

from __future__ import annotations

import pytest

from accelctl.engines.batch_scheduler import DEFAULT_LOG_GROUP, BatchScheduler
from accelctl.engines.scheduler import AppHandle

botocore_session = pytest.importorskip("botocore.session")
from aws_answers import answer, client as new_client  # noqa: E402
from botocore.stub import Stubber  # noqa: E402
from test_batch_scheduler import JOB_ID, expect_describe, expect_submission, job, log_of, requests, run_dir, \
    the_plan  # noqa: E402,F401 - run_dir: the fixture

HANDLE = AppHandle("aws_batch", "q", JOB_ID)
STREAM = "tiny_batch-two/default/0b5e6c3a9f2d4c1e8a7b6c5d4e3f2a1b"


def test_the_installed_botocore_has_the_logs_model():
    op = botocore_session.get_session().get_service_model("logs").operation_model("GetLogEvents")
    assert {"logGroupName", "logStreamName", "startFromHead", "nextToken"} <= set(op.input_shape.members)
    assert "ResourceNotFoundException" in [e.name for e in op.error_shapes]


@pytest.fixture
def clients():
    """(log side's Batch client, CloudWatch Logs client), each behind a Stubber."""
    batch, logs = new_client("batch"), new_client("logs")
    with Stubber(batch) as b, Stubber(logs) as lg:
        batch.stub, logs.stub = b, lg
        yield batch, logs
        b.assert_no_pending_responses()
        lg.assert_no_pending_responses()


def single(status: str, stream: str = "", config: dict | None = None, **extra) -> dict:
    container = {"image": "python:3.12"}
    if stream:
        container["logStreamName"] = stream
    if config is not None:
        container["logConfiguration"] = config
    return {"jobName": "tiny", "jobId": JOB_ID, "jobQueue": "q", "status": status, "startedAt": 1763900000000,
            "jobDefinition": "arn:aws:batch:us-east-1:123456789012:job-definition/tiny:1", "container": container,
            **extra}


def events(*messages: str) -> list[dict]:
    return [{"timestamp": 1763900000000 + i, "message": m, "ingestionTime": 1763900000500} for i, m in
            enumerate(messages)]


def expect_page(logs, stream: str, token: str, messages: tuple[str, ...], next_token: str,
                group: str = DEFAULT_LOG_GROUP) -> None:
    ask = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
    if token:
        ask["nextToken"] = token
    logs.stub.add_response("get_log_events", {"events": events(*messages), "nextForwardToken": next_token,
                                              "nextBackwardToken": "b/0"}, ask)


def not_yet(logs, stream: str, group: str = DEFAULT_LOG_GROUP) -> None:
    logs.stub.add_client_error("get_log_events", "ResourceNotFoundException",
                               "The specified log stream does not exist.", 400,
                               expected_params={"logGroupName": group, "logStreamName": stream,
                                                "startFromHead": True})


def polls(*ended: bool):
    """``done()`` answering ``ended`` in turn: one answer per poll of the log loop."""
    answers = iter(ended)
    return lambda: next(answers)


def follow_logs(batch, logs, done) -> list[str]:
    sched = BatchScheduler(new_client("batch"), logs=logs, log_batch=batch)
    sched.poll_s = 0
    return list(sched.log_iter(HANDLE, None, done))


def test_a_stream_is_read_page_by_page_from_before_it_exists_to_the_jobs_end(clients):
    batch, logs = clients
    expect_describe(batch, single("RUNNABLE"))  # no container has run: no stream named
    expect_describe(batch, single("STARTING", STREAM))  # named, not created yet by the driver
    not_yet(logs, STREAM)
    expect_describe(batch, single("RUNNING", STREAM))
    expect_page(logs, STREAM, "", ("step 1", "step 2"), "f/1")
    expect_page(logs, STREAM, "f/1", ("step 3\n",), "f/2")
    expect_page(logs, STREAM, "f/2", (), "f/2")  # the token unchanged: all there is, for now
    expect_describe(batch, single("SUCCEEDED", STREAM))  # the job ended: one last read to the end
    expect_page(logs, STREAM, "f/2", ("line a\nline b",), "f/3")
    expect_page(logs, STREAM, "f/3", (), "f/3")
    lines = follow_logs(batch, logs, polls(False, False, False, True))
    assert lines == ["step 1", "step 2", "step 3", "line a", "line b"]


def test_the_log_group_the_job_names_is_read(clients):
    batch, logs = clients
    config = {"logDriver": "awslogs", "options": {"awslogs-group": "/accelctl/jobs", "awslogs-region": "us-east-1"}}
    expect_describe(batch, single("SUCCEEDED", STREAM, config))
    expect_page(logs, STREAM, "", ("done",), "f/1", group="/accelctl/jobs")
    expect_page(logs, STREAM, "f/1", (), "f/1", group="/accelctl/jobs")
    assert follow_logs(batch, logs, polls(True)) == ["done"]


def test_another_log_driver_is_one_line(clients):
    batch, logs = clients
    expect_describe(batch, single("RUNNING", "", {"logDriver": "splunk"}))
    (line,) = follow_logs(batch, logs, polls(False))
    assert "splunk driver, not CloudWatch Logs" in line and str(HANDLE) in line


def test_a_throttled_call_is_said_once_and_asked_again(clients):
    batch, logs = clients
    for _ in range(2):
        batch.stub.add_client_error("describe_jobs", "TooManyRequestsException", "Too Many Requests", 429)
    expect_describe(batch, single("SUCCEEDED", STREAM))
    expect_page(logs, STREAM, "", ("out",), "f/1")
    expect_page(logs, STREAM, "f/1", (), "f/1")
    lines = follow_logs(batch, logs, polls(False, False, True))
    assert lines[1:] == ["out"] and "Too Many Requests" in lines[0] and len(lines) == 2


def node(index: int, status: str, stream: str = "", in_attempt: bool = False) -> dict:
    detail = {**single(status), "jobId": f"{JOB_ID}#{index}", "nodeDetails": {"nodeIndex": index,
                                                                             "isMainNode": index == 0}}
    if in_attempt:  # an ended node: its stream on its attempt
        detail["attempts"] = [{"container": {"logStreamName": stream, "exitCode": 0}}]
    elif stream:
        detail["container"]["logStreamName"] = stream
    return detail


def test_a_multinode_job_follows_each_nodes_stream(run_dir, clients):
    batch, logs = clients
    definition, _ = requests(run_dir)
    parent = job("RUNNING", definition)
    assert parent["nodeProperties"]["numNodes"] == 2
    s0, s1 = STREAM + "-0", STREAM + "-1"
    expect_describe(batch, parent)
    batch.stub.add_response("describe_jobs", {"jobs": [node(0, "RUNNING", s0), node(1, "STARTING")]},
                            {"jobs": [f"{JOB_ID}#0", f"{JOB_ID}#1"]})
    expect_page(logs, s0, "", ("rank 0 up",), "f/1")
    expect_page(logs, s0, "f/1", (), "f/1")
    # the job ended: node 1's stream found on its attempt, both read to their end
    expect_describe(batch, job("SUCCEEDED", definition))
    batch.stub.add_response("describe_jobs", {"jobs": [node(1, "SUCCEEDED", s1, in_attempt=True)]},
                            {"jobs": [f"{JOB_ID}#1"]})
    expect_page(logs, s0, "f/1", ("rank 0 done",), "f/2")
    expect_page(logs, s0, "f/2", (), "f/2")
    expect_page(logs, s1, "", ("rank 1 up", "rank 1 done"), "g/1")
    expect_page(logs, s1, "g/1", (), "g/1")
    lines = follow_logs(batch, logs, polls(False, True))
    assert lines == ["[node 0] rank 0 up", "[node 0] rank 0 done", "[node 1] rank 1 up", "[node 1] rank 1 done"]


def test_the_supervisor_copies_the_jobs_output_into_worker_log(run_dir):
    """The whole follow (``ScheduledJob``): the job submitted and described through one client
    (a Stubber's queue, in AWS's order); the log side's calls, whose number depends on timing,
    answered by the job's state at the time (``aws_answers``), checked against the same models."""
    definition, _ = requests(run_dir)
    main = new_client("batch")
    log_batch, logs = new_client("batch"), new_client("logs")
    streams = {f"{STREAM}-{n}": events(*(f"rank {n} step {i}" for i in range(3))) for n in (0, 1)}

    def describe(request: dict) -> dict:
        jobs = request["jobs"]
        if jobs == [JOB_ID]:
            return {"jobs": [job("RUNNING", definition)]}
        return {"jobs": [node(int(j.rpartition("#")[2]), "RUNNING", f"{STREAM}-{j.rpartition('#')[2]}") for j in jobs]}

    def page(request: dict) -> dict:
        assert request["logGroupName"] == DEFAULT_LOG_GROUP and request["startFromHead"] is True
        at = int(request.get("nextToken", "f/0").split("/")[1])
        got = streams[request["logStreamName"]][at:at + 2]  # two events a page
        return {"events": got, "nextForwardToken": f"f/{at + len(got)}"}

    answer(log_batch, "DescribeJobs", describe)
    answer(logs, "GetLogEvents", page)
    with Stubber(main) as stub:
        main.stub = stub
        expect_submission(main, run_dir)
        expect_describe(main, job("RUNNING", definition))
        expect_describe(main, job("SUCCEEDED", definition, container={"exitCode": 0}))
        sched = BatchScheduler(main, logs=logs, log_batch=log_batch)
        sched.poll_s = 0.05
        from accelctl.run.supervision.scheduled import ScheduledJob

        assert ScheduledJob(sched, the_plan().request, run_dir, {}, run_dir / "worker.log").wait(timeout=60) == 0
        stub.assert_no_pending_responses()
    out = log_of(run_dir).splitlines()
    for n in (0, 1):
        assert [line for line in out if line.startswith(f"[node {n}] ")] == \
            [f"[node {n}] rank {n} step {i}" for i in range(3)], out


# -- a job retried by its retryStrategy: every attempt's stream, in order -----------------------

def attempt(stream: str, code: int | None = None) -> dict:
    """An ended attempt (DescribeJobs' ``attempts[]``): its container's stream and exit code."""
    container = {"logStreamName": stream}
    if code is not None:
        container["exitCode"] = code
    return {"container": container, "startedAt": 1763900000000, "stoppedAt": 1763900060000,
            "statusReason": "Essential container in task exited"}


def test_a_retried_job_follows_every_attempts_stream_in_order(clients):
    """Batch retries a job (``retryStrategy``) as a new attempt with a stream of its own; the
    ended ones stay in ``attempts[]``, the current one is the job's ``container``."""
    batch, logs = clients
    s1, s2 = STREAM + "-1", STREAM + "-2"
    retry = {"retryStrategy": {"attempts": 2}}
    expect_describe(batch, single("RUNNING", s1, **retry))  # attempt 1 runs
    expect_page(logs, s1, "", ("a1 step 1",), "f/1")
    expect_page(logs, s1, "f/1", (), "f/1")
    # attempt 1 failed: back to RUNNABLE, the container still naming its stream
    expect_describe(batch, single("RUNNABLE", s1, attempts=[attempt(s1, 1)], **retry))
    expect_page(logs, s1, "f/1", ("a1 crashed",), "f/2")
    expect_page(logs, s1, "f/2", (), "f/2")
    expect_describe(batch, single("RUNNING", s2, attempts=[attempt(s1, 1)], **retry))  # attempt 2, live
    expect_page(logs, s1, "f/2", (), "f/2")
    expect_page(logs, s2, "", ("a2 step 1",), "g/1")
    expect_page(logs, s2, "g/1", (), "g/1")
    expect_describe(batch, single("SUCCEEDED", s2, attempts=[attempt(s1, 1), attempt(s2, 0)], **retry))
    expect_page(logs, s1, "f/2", (), "f/2")
    expect_page(logs, s2, "g/1", ("a2 done",), "g/2")
    expect_page(logs, s2, "g/2", (), "g/2")
    lines = follow_logs(batch, logs, polls(False, False, False, True))
    assert lines == ["[attempt 1] a1 step 1", "[attempt 1] a1 crashed", "[attempt 2] a2 step 1",
                     "[attempt 2] a2 done"]


def test_an_attempt_that_never_ran_keeps_its_number(clients):
    """An attempt that ended before its container ran (no stream: an image that could not be
    pulled) is still attempt 1: the next one is attempt 2."""
    batch, logs = clients
    never = {"container": {"reason": "CannotPullContainerError"}, "statusReason": "Task failed to start"}
    expect_describe(batch, single("SUCCEEDED", STREAM, attempts=[never, attempt(STREAM, 0)],
                                  retryStrategy={"attempts": 3}))
    expect_page(logs, STREAM, "", ("only",), "f/1")
    expect_page(logs, STREAM, "f/1", (), "f/1")
    assert follow_logs(batch, logs, polls(True)) == ["[attempt 2] only"]


def test_a_retried_multinode_job_follows_each_nodes_attempts(run_dir, clients):
    batch, logs = clients
    definition, _ = requests(run_dir)
    retry = {"retryStrategy": {"attempts": 2}}
    a0, a1 = STREAM + "-0", STREAM + "-1"
    b0, b1 = STREAM + "-0b", STREAM + "-1b"
    expect_describe(batch, job("RUNNING", definition, **retry))
    batch.stub.add_response("describe_jobs", {"jobs": [node(0, "RUNNING", a0), node(1, "RUNNING", a1)]},
                            {"jobs": [f"{JOB_ID}#0", f"{JOB_ID}#1"]})
    expect_page(logs, a0, "", ("n0 a1",), "f/1")
    expect_page(logs, a0, "f/1", (), "f/1")
    expect_page(logs, a1, "", ("n1 a1",), "f/1")
    expect_page(logs, a1, "f/1", (), "f/1")
    # the job was retried and ended: each node asked again (it may have had another attempt)
    expect_describe(batch, job("SUCCEEDED", definition, **retry))
    ended = []
    for index, (first, second) in enumerate(((a0, b0), (a1, b1))):
        detail = node(index, "SUCCEEDED", second)
        detail["attempts"] = [attempt(first, 1), attempt(second, 0)]
        ended.append(detail)
    batch.stub.add_response("describe_jobs", {"jobs": ended}, {"jobs": [f"{JOB_ID}#0", f"{JOB_ID}#1"]})
    for stream, message in ((a0, None), (a1, None), (b0, "n0 a2"), (b1, "n1 a2")):
        if message:
            expect_page(logs, stream, "", (message,), "g/1")
            expect_page(logs, stream, "g/1", (), "g/1")
        else:
            expect_page(logs, stream, "f/1", (), "f/1")
    lines = follow_logs(batch, logs, polls(False, True))
    assert lines == ["[node 0] [attempt 1] n0 a1", "[node 1] [attempt 1] n1 a1", "[node 0] [attempt 2] n0 a2",
                     "[node 1] [attempt 2] n1 a2"]


# -- a job definition whose awslogs driver writes to another region -----------------------------

def test_the_logs_are_read_in_the_region_the_job_definition_names(clients):
    """``awslogs-region``: the driver writes there, whatever the job's own region: the log side
    asks a CloudWatch Logs client of that region (the default one, us-east-1, gets no call)."""
    batch, logs = clients
    eu = new_client("logs", "eu-west-1")
    config = {"logDriver": "awslogs", "options": {"awslogs-group": "/accelctl/eu", "awslogs-region": "eu-west-1"}}
    with Stubber(eu) as stub:
        eu.stub = stub
        expect_describe(batch, single("RUNNING", STREAM, config))
        not_yet(eu, STREAM, group="/accelctl/eu")
        expect_describe(batch, single("SUCCEEDED", STREAM, config))
        expect_page(eu, STREAM, "", ("from eu",), "f/1", group="/accelctl/eu")
        expect_page(eu, STREAM, "f/1", (), "f/1", group="/accelctl/eu")
        sched = BatchScheduler(new_client("batch"), logs=logs, log_batch=batch, logs_by_region={"eu-west-1": eu})
        sched.poll_s = 0
        assert list(sched.log_iter(HANDLE, None, polls(False, True))) == ["from eu"]
        stub.assert_no_pending_responses()


def test_a_logs_client_is_made_for_the_region_named():
    sched = BatchScheduler(new_client("batch"), logs=new_client("logs"), log_batch=new_client("batch"))
    eu = sched.logs_in("eu-west-1")
    assert eu.meta.region_name == "eu-west-1" and eu.meta.service_model.service_name == "logs"
    assert sched.logs_in("eu-west-1") is eu  # one client per region
    assert sched.logs_in("us-east-1") is sched.logs and sched.logs_in("") is sched.logs


def test_a_region_botocore_refuses_is_said_once(clients):
    batch, logs = clients
    config = {"logDriver": "awslogs", "options": {"awslogs-region": "eu_west;1"}}
    expect_describe(batch, single("RUNNING", STREAM, config))
    expect_describe(batch, single("SUCCEEDED", STREAM, config))
    (line,) = follow_logs(batch, logs, polls(False, True))
    assert line.startswith(f"accelctl: the log of {HANDLE}: ") and "eu_west;1" in line
