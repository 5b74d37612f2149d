"""The figures of each step as named scalars: one mapping for every place a run's steps are
logged -- the TensorBoard export (``accelctl.report.tensorboard``), the MLflow and W&B
exports (``accelctl.report.tracking``) and the runner's live logging
(``accelctl.run.tracking``) -- so a figure has the same name and value everywhere.

Per rank-0 step: ``<phase>/step_time_s`` (the straggler's time over all ranks: the slowest
rank defines the step), then ``<phase>/loss``, ``samples_per_s``, ``tokens_per_s``, ``mfu``,
``mem_bytes``, ``ttft_s``, ``per_token_s`` where the step reported them.  ``run_scalars`` adds
``summary/*`` at the last step: steady-state step time (mean, median, p90, CI) and throughput.
"""

from __future__ import annotations

from typing import Any

from accelctl.analysis.stats import steady_state, step_key, straggler_times
from accelctl.contract.events import StepMetrics

SCALAR_FIELDS = ("loss", "samples_per_s", "tokens_per_s", "mfu", "mem_bytes", "ttft_s", "per_token_s")


def step_scalars(step: StepMetrics, step_time_s: float) -> list[tuple[str, float]]:
    """[(tag, value)] of one rank-0 step, ``step_time_s`` being the straggler's time."""
    values = [(f"{step.phase}/step_time_s", float(step_time_s))]
    values += [(f"{step.phase}/{f}", float(getattr(step, f))) for f in SCALAR_FIELDS if getattr(step, f) is not None]
    return values


class TrackerSteps:
    """The step number a tracker logs for each rank-0 step, in order: accelctl's own in a run of
    one measured round; in a ``measure { repeat = N }`` run, each later round goes on counting
    from where the previous one ended (its steps are numbered from 0 again, and MLflow would
    stack the rounds on the same step numbers)."""

    def __init__(self) -> None:
        self._phase: dict[str, tuple[int, int, int]] = {}  # phase -> (round, base, top step seen)

    def __call__(self, step: StepMetrics) -> int:
        rnd, base, top = self._phase.get(step.phase, (step.repeat, 0, -1))
        if step.repeat != rnd:
            rnd, base, top = step.repeat, base + top + 1, -1
        self._phase[step.phase] = (rnd, base, max(top, int(step.step)))
        return base + int(step.step)


def run_scalars(events: list[Any]) -> list[tuple[float, int, list[tuple[str, float]]]]:
    """(wall time, step, [(tag, value)]) per rank-0 step, then the summary scalars."""
    steps = [e for e in events if isinstance(e, StepMetrics)]
    times = straggler_times(steps)
    number = TrackerSteps()
    out = [(float(s.time_unix_s), number(s), step_scalars(s, times[step_key(s)])) for s in steps if s.rank == 0]
    stats = steady_state(events)
    if out and stats.step_time is not None:
        st = stats.step_time
        summary = [("summary/step_time_mean_s", st.mean), ("summary/step_time_median_s", st.median),
                   ("summary/step_time_p90_s", st.p90)]
        if stats.step_time_ci is not None:
            summary += [("summary/step_time_ci_low_s", stats.step_time_ci.low),
                        ("summary/step_time_ci_high_s", stats.step_time_ci.high)]
        for name, rate in (("samples_per_s", stats.samples_per_s), ("tokens_per_s", stats.tokens_per_s)):
            if rate is not None:
                summary.append((f"summary/{name}", rate.steady))
        out.append((out[-1][0], out[-1][1], summary))
    return out
