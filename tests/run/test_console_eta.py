"""Headless progress lines carry an ETA: the steps left times the median step time so far
(accelctl.run.viewers.eta), from a real run of the fake worker through the runner."""

from __future__ import annotations

import io
import re

from test_runner import ListSink, run

from accelctl.run.viewers.console import ConsoleSink
from accelctl.run.viewers.eta import duration, eta, median


def test_headless_progress_lines_show_the_eta(runs, make_plan):
    plan = make_plan("ok")
    buf = io.StringIO()
    seen = ListSink()
    _, result = run(plan, sinks=[ConsoleSink(plan.job, headless=True, file=buf, every=5), seen])
    assert result.status == "ok"
    recorder_steps = [ev.step_time_s for ev in seen.events if type(ev).__name__ == "StepMetrics" and ev.rank == 0]
    lines = {int(m.group(1)): line for line in buf.getvalue().splitlines()
             if (m := re.match(r"step (\d+)/10\b", line))}
    # every 5th step and the last; and the first measured one (after 2 warm-up steps) at once
    assert sorted(lines) == [3, 5, 10]
    assert "[measure]" in lines[3] and "[warmup]" not in buf.getvalue()
    expected = f"eta {duration(5 * median(recorder_steps[:5]))}"
    assert lines[5].endswith(expected), (lines[5], expected)
    assert "eta" not in lines[10]  # nothing left at the last step


def test_eta_is_steps_left_times_the_median():
    assert eta([0.1, 5.0, 0.1, 0.1], 100) == "eta 0:10"  # the slow compiling step does not count
    assert eta([2.0], 45) == "eta 1:30"
    assert eta([1.0, 3.0], 1800) == "eta 1:00:00"
    assert eta([0.015], 5) == "eta 0.1 s"
    assert eta([], 5) is None and eta([1.0], 0) is None
