"""How a run ends, decided without a process (``accelctl.run.store.outcome``): the
failure a launch's non-zero exit adds, from recorded events, exit codes and log text; and the
run's status as the command's exit code (``accelctl.run.supervision.orchestrate.exit_code``)."""

from __future__ import annotations

import pytest

from accelctl import exitcodes
from accelctl.contract.events import RunFailed, RunFinished, StepMetrics
from accelctl.run.supervision.orchestrate import exit_code
from accelctl.run.store.outcome import (first_start, job_exit_code, launch_exit, launch_failed, only_teardown_left,
                                  record_launch_end, run_failure, run_status)

#: torchrun's report when rank 1 died of SIGSEGV and rank 0 was ended by it (torch 2.x)
TORCHRUN_REPORT = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Root Cause (first observed failure):
[0]:
  rank      : 1 (local_rank: 1)
  exitcode  : -11 (pid: 8212)  (SIGSEGV)
"""


def step(rank: int) -> StepMetrics:
    return StepMetrics(step=0, phase="measure", step_time_s=0.1, rank=rank)


def never(*_):
    raise AssertionError("the engine is asked to explain only a crash")


def test_a_users_stop_is_recorded_stopped_once_and_reads_no_log():
    ended = launch_failed("node0", -2, [step(0)], None, "", "", explain=never, stopped_by_user=True)
    assert ended.event == RunFailed(reason="stopped", message="'node0' ended by stop (signal 2)",
                                    time_unix_s=ended.event.time_unix_s)
    assert not ended.cause
    already = RunFailed(reason="stopped", message="stopped", rank=0)
    assert launch_failed("node0", 130, [step(0)], already, "", "", explain=never, stopped_by_user=True).event is None


def test_a_rank_killed_without_a_word_is_the_crash_named_by_rank_and_signal():
    events = [step(0), step(1), RunFinished(rank=0)]
    ended = launch_failed("worker", -9, events, None, "", "last line", first_gone={1: -9},
                          explain=lambda: "the engine's reading")
    assert ended.event.reason == "crashed" and ended.event.rank == 1 and ended.cause
    assert ended.event.message.splitlines()[:3] == [
        "rank 1 killed by SIGKILL", "the engine's reading",
        "'worker' exited with signal 9 without reporting a failure; last lines of worker.log:"]
    assert ended.event.message.endswith("last line")


def test_a_reported_failure_stands_unless_a_killed_rank_caused_it():
    reported = RunFailed(reason="exception", message="ValueError", rank=0)
    # rank 0 said why; the launch's exit 1 adds nothing
    assert launch_failed("worker", 1, [step(0), reported], reported, "", "", explain=never).event is None
    # "stopped" by ranks nobody asked to stop: torchrun ended rank 0 after rank 1 died of SIGSEGV
    stopped = RunFailed(reason="stopped", message="stopped", rank=0)
    ended = launch_failed("worker", 1, [step(0), step(1), stopped], stopped, TORCHRUN_REPORT, "tail")
    assert ended.event.rank == 1 and ended.event.message.startswith("rank 1 killed by SIGSEGV") and ended.cause


def test_two_silent_ranks_and_no_report_is_a_crash_of_unknown_rank():
    ended = launch_failed("worker", 3, [step(0), step(1)], None, "", "tail")
    assert ended.event.reason == "crashed" and ended.event.rank == 0 and not ended.cause
    assert ended.event.message.startswith("'worker' exited with exit code 3 without reporting a failure")


@pytest.mark.parametrize("stop_kind,failure,codes,status,code", [
    (None, None, (0, 0), "ok", exitcodes.OK),
    (None, None, (0, None), "ok", exitcodes.OK),  # a launch started elsewhere (--launch) is no failure
    (None, None, (0, 1), "failed", exitcodes.FAILED),
    (None, RunFailed(reason="nan_loss", message="nan"), (1,), "failed", exitcodes.FAILED),
    ("user", None, (-2,), "stopped", exitcodes.STOPPED),
    ("failure", RunFailed(reason="stopped", message="stopped"), (130,), "stopped", exitcodes.STOPPED),
])
def test_the_status_and_its_exit_code(stop_kind, failure, codes, status, code):
    assert run_status(stop_kind, failure, codes) == status
    assert exit_code(status) == code


def test_the_runs_failure_is_the_cause_not_its_consequences():
    def failed(reason, rank=0):
        return RunFailed(reason=reason, message=reason, rank=rank)

    stopped, crash, exc = failed("stopped"), failed("crashed", 1), failed("exception")
    store, disk = failed("store_error"), failed("disk_full", 1)
    assert run_failure(None, exc) is exc
    assert run_failure(exc, crash) is exc  # the first failure stands
    assert run_failure(stopped, crash) is crash  # a stop nobody asked for gives way to its cause
    assert run_failure(crash, stopped) is crash
    assert run_failure(exc, disk) is disk  # a save on a full disk: its peers' errors follow from it
    assert run_failure(store, disk) is store and run_failure(disk, store) is store


#: torchrun's report when rank 1 was SIGKILLed and rank 0 then failed on gloo's "Read error" within
#: one of torchrun's monitor passes: their failure times tie (whole seconds) and torchrun names the
#: lowest rank the "Root Cause" -- rank 0, the consequence, whatever the order they ended in
TORCHRUN_TIE_REPORT = """\
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
Failures:
[1]:
  time      : 2026-11-26_10:00:01
  host      : localhost
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 8213)
  error_file: <N/A>
  traceback : Signal 9 (SIGKILL) received by PID 8213
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-11-26_10:00:01
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 8212)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
"""

READ_ERROR = RunFailed(reason="exception", message="RuntimeError: [gloo] Read error [127.0.0.1]:29500", rank=0)


@pytest.mark.parametrize("read_before, first_gone", [
    (True, {0: None, 1: None}),  # both seen gone in one poll; rank 0's report read before torchrun's exit
    (False, {0: None, 1: None}),  # ... read only after it: both looked silent when the crash was decided
    (False, {0: 1, 1: -9}),  # ... both seen as zombies, their codes read
    (True, {}),  # the rank watch saw neither go (both reaped between two polls of a starved supervisor)
    (False, {}),
], ids=["read-one-poll", "unread-one-poll", "unread-zombies", "read-unseen", "unread-unseen"])
def test_a_killed_rank_is_named_whatever_the_order_its_peers_report_in(read_before, first_gone):
    """tests/run/test_supervision.py::test_a_rank_killed_by_a_signal_is_a_failure_not_a_user_stop[ddp_cpu-1-9]
    failed once in ~20 runs naming rank 0's gloo "Read error": the rank that was SIGKILLed is the
    run's failure whether rank 0's report was read before the launch's exit was decided or after,
    and whatever the rank watch saw."""
    events = [step(0), step(1), *([READ_ERROR] if read_before else [])]
    failure = run_failure(None, READ_ERROR) if read_before else None
    ended = launch_failed("worker", 1, events, failure, TORCHRUN_TIE_REPORT, "tail", first_gone)
    failure = record_launch_end(failure, ended)
    if not read_before:  # rank 0's report, read after the crash was recorded
        failure = run_failure(failure, READ_ERROR)
    assert failure.reason == "crashed" and failure.rank == 1, failure
    assert failure.message.startswith("rank 1 killed by SIGKILL"), failure.message


def test_a_shared_workers_job_ends_its_run_with_the_code_a_worker_of_its_own_would_give():
    """A run that shares its worker process ends when rank 0 reports its job's end, not when the
    process (which goes on to the next job) ends; during a stop, once the process has ended."""
    assert job_exit_code(RunFinished(rank=0)) == 0
    assert job_exit_code(RunFailed(reason="nan_loss", message="nan", rank=0)) == 3
    assert job_exit_code(RunFailed(reason="stopped", message="stopped", rank=0)) == 130
    assert job_exit_code(RunFinished(rank=1)) is None and job_exit_code(step(0)) is None
    assert job_exit_code(None) is None
    assert launch_exit(None, None, stopping=False) is None  # still running, job not over
    assert launch_exit(None, 0, stopping=False) == 0  # job over: the run ends, the process goes on
    assert launch_exit(None, 0, stopping=True) is None  # a stop: the run waits for the process
    assert launch_exit(-2, 130, stopping=True) == 130
    assert launch_exit(-9, None, stopping=False) == -9


def test_a_launcher_is_not_waited_for_once_its_ranks_finished_and_went():
    gone = {0, 1}

    def ranks_gone(ranks):
        return ranks <= gone

    assert only_teardown_left(2, {0, 1}, ranks_gone, sole_survivor=True, plain=True)
    assert not only_teardown_left(2, {0}, ranks_gone, sole_survivor=True, plain=True)  # rank 1 said nothing yet
    assert not only_teardown_left(3, {0, 1, 2}, ranks_gone, sole_survivor=True, plain=True)  # rank 2 still there
    assert not only_teardown_left(2, {0, 1}, ranks_gone, sole_survivor=False, plain=True)  # another launch runs
    assert not only_teardown_left(2, {0, 1}, ranks_gone, sole_survivor=True, plain=False)  # a stop, a failure...
    assert not only_teardown_left(1, {0}, ranks_gone, sole_survivor=True, plain=True)  # the worker itself


def test_a_shared_workers_run_began_with_its_first_event():
    early = StepMetrics(step=0, phase="measure", step_time_s=0.1, rank=0, time_unix_s=90.0)
    late = StepMetrics(step=1, phase="measure", step_time_s=0.1, rank=0, time_unix_s=110.0)
    assert first_start(100.0, [early, late], shared=True) == 90.0
    assert first_start(100.0, [late], shared=True) == 100.0
    assert first_start(100.0, [early], shared=False) == 100.0
