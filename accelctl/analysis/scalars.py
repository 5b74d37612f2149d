"""The figures of each step as named scalars: one mapping for every place a run's steps are
logged -- the TensorBoard export (``accelctl.report.tensorboard``), the MLflow and W&B
exports (``accelctl.report.tracking``) and the runner's live logging
(``accelctl.run.tracking``) -- so a figure has the same name and value everywhere.

Per rank-0 step, under the run's prefix (``train``, ``eval``, ``gen``: one metric set, as HF
Trainer and Lightning name them): ``<prefix>/step_time_s`` (the straggler's time over all
ranks: the slowest rank defines the step), ``<prefix>/phase`` (``PHASE_CODES``: 0 warm-up, 1
measured -- the phase is a figure of its own, not a second metric set), then ``loss``,
``samples_per_s``, ``tokens_per_s``, ``mfu``, ``mem_bytes``, ``ttft_s``, ``per_token_s``
where the step reported them.  The run's summary figures are ``accelctl.run.tracking.fields``'.
"""

from __future__ import annotations

from typing import Any

from accelctl.analysis.stats import step_key, straggler_times
from accelctl.contract.events import StepMetrics

SCALAR_FIELDS = ("loss", "samples_per_s", "tokens_per_s", "mfu", "mem_bytes", "ttft_s", "per_token_s")


#: a step's phase as a number (trackers keep numbers): warm-up 0, measured 1, any other 2
PHASE_CODES = {"warmup": 0, "measure": 1}
OTHER_PHASE = 2


def step_scalars(step: StepMetrics, step_time_s: float, prefix: str = "train") -> list[tuple[str, float]]:
    """[(tag, value)] of one rank-0 step, ``step_time_s`` being the straggler's time."""
    values = [(f"{prefix}/step_time_s", float(step_time_s)),
              (f"{prefix}/phase", float(PHASE_CODES.get(step.phase, OTHER_PHASE)))]
    values += [(f"{prefix}/{f}", float(getattr(step, f))) for f in SCALAR_FIELDS if getattr(step, f) is not None]
    return values


class TrackerSteps:
    """The step number a tracker logs for each rank-0 step, in order: accelctl's own (the worker
    numbers warm-up and measured steps on from 1, across repeats), kept increasing where a
    worker numbers a later round from 0 again: such a step goes on counting from the last
    number logged (one metric set: the rounds would stack on the same step numbers)."""

    def __init__(self) -> None:
        self._base = 0
        self._last: int | None = None

    def __call__(self, step: StepMetrics) -> int:
        number = self._base + int(step.step)
        if self._last is not None and number <= self._last:
            self._base += self._last + 1 - number
            number = self._last + 1
        self._last = number
        return number


def run_scalars(events: list[Any], prefix: str = "train") -> list[tuple[float, int, list[tuple[str, float]]]]:
    """(wall time, step, [(tag, value)]) per rank-0 step."""
    steps = [e for e in events if isinstance(e, StepMetrics)]
    times = straggler_times(steps)
    number = TrackerSteps()
    return [(float(s.time_unix_s), number(s), step_scalars(s, times[step_key(s)], prefix)) for s in steps
            if s.rank == 0]
