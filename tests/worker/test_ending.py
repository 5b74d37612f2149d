"""``accelctl.worker.ending``: how a job ends is recorded whatever line a stop lands on.

A signal's Python handler runs between two lines of Python (at CPython's next check); here a
trace function runs the worker's real handler (``StopSignals``) before the n-th line ``end_of``
and ``failure`` execute, for every n in turn -- each place a stop can land while the worker
decides how its job ended -- and each time ``end_of`` must return one ending: the job's own
failure once the job has failed, "stopped" for a stop that came first.  No process, no signal
sent (``test_stop_while_ending.py`` sends real ones to the real worker).
"""

from __future__ import annotations

import math
import signal
import sys

import pytest

from accelctl.contract.events import RunFailed, RunFinished
from accelctl.contract.ids import WORKER_EXCEPTION, WORKER_NAN, WORKER_OK, WORKER_STOPPED
from accelctl.worker import ending
from accelctl.worker.context import NonFiniteLoss
from accelctl.worker.ending import Ending, StopSignals, end_of


def stop_at_every_line(body):
    """[(whether the job had ended when the stop landed, the ending, the stop held)] for a stop
    before the 1st, 2nd, ... line of ``ending`` that ``end_of(body)`` executes."""
    out, n = [], 0
    while True:
        stops, seen, landed = StopSignals(), [0], []

        def line(frame, event, arg):
            if event == "line" and not landed:
                if seen[0] == n:
                    landed.append(body.ended)
                    stops(signal.SIGTERM, frame)  # what CPython does there with a SIGTERM pending
                seen[0] += 1
            return line

        body.ended = False
        sys.settrace(lambda frame, event, arg: line if frame.f_code.co_filename == ending.__file__ else None)
        try:
            got = end_of(body, stops, 0, lambda: False)
        except KeyboardInterrupt:
            # only on the ``try`` lines before the job is called (CPython 3.11 compiles them to
            # NOPs outside any handler's range; a real signal is handled there at the function's
            # start at most): a stop before the job began, met by the caller as any stop before
            # the job's first event
            assert n <= 1 and not body.ended
            got = None
        finally:
            sys.settrace(None)
        if not landed:
            return out
        if got is not None:
            out.append((landed[0], got, stops.held))
        n += 1


class Body:
    """A job: ends with ``result`` (an Ending, or an exception raised)."""

    def __init__(self, result) -> None:
        self.result, self.ended = result, False

    def __call__(self) -> Ending:
        self.ended = True
        if isinstance(self.result, BaseException):
            raise self.result
        return self.result


def assert_stopped(got: Ending, message: str = "stopped (signal 15)") -> None:
    assert got.code == WORKER_STOPPED and (got.event.reason, got.event.message) == ("stopped", message)


@pytest.mark.parametrize("exc, code, reason", [(NonFiniteLoss(2, math.nan), WORKER_NAN, "nan_loss"),
                                               (ValueError("dim should be divisible by num_heads"), WORKER_EXCEPTION,
                                                "exception")])
def test_a_stop_on_any_line_after_the_job_failed_keeps_its_failure(exc, code, reason):
    outcomes = stop_at_every_line(Body(exc))
    assert len(outcomes) >= 5  # the stop landed on each line, before and after the job failed
    for ended, got, held in outcomes:
        if not ended:
            assert_stopped(got)
            continue
        assert got.code == code and isinstance(got.event, RunFailed) and got.event.reason == reason, (ended, got)
        if reason == "exception":
            assert "divisible by num_heads" in got.event.message and "ValueError" in got.event.traceback
    assert [held for _, _, held in outcomes][-1] == signal.SIGTERM  # landed once recording: held, not raised


def test_a_second_stop_on_any_line_keeps_the_first():
    for ended, got, _ in stop_at_every_line(Body(KeyboardInterrupt())):  # SIGINT's, as Python raises it
        assert_stopped(got, "stopped (SIGINT)" if ended else "stopped (signal 15)")


def test_a_stop_on_any_line_after_the_job_finished_keeps_the_finish_once_recording():
    finished = Ending(WORKER_OK, RunFinished(rank=0, steps=4, wall_s=1.0))
    outcomes = stop_at_every_line(Body(finished))
    for ended, got, held in outcomes:
        if held:  # landed once the end was known
            assert got is finished
        else:  # landed before: a stop
            assert_stopped(got)
    assert outcomes[-1][1] is finished


def test_a_held_stop_is_raised_when_stops_resume():
    stops = StopSignals()
    stops.recording = True
    stops(signal.SIGINT, None)
    stops(signal.SIGTERM, None)
    assert stops.held == signal.SIGINT  # the first one
    with pytest.raises(KeyboardInterrupt) as raised:
        stops.resume()
    assert str(raised.value) == "" and not stops.recording and not stops.held
    stops.resume()  # nothing held: nothing raised
    with pytest.raises(KeyboardInterrupt, match="signal 15"):
        stops(signal.SIGTERM, None)
