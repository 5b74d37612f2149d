"""What the run screen knows about one run, built from its events (plain python, no Textual).

``RunModel.add(event)`` folds each event in; the panels read the model.  Steady-state
figures (median, p90, throughput, per-rank distributions) always come from
``accelctl.analysis.stats.steady_state`` over the step events seen so far — the same
function that writes ``summary.json`` — so the live panel and the stored summary agree.
Warm-up steps are kept (they are plotted, marked) but never enter those figures.
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from accelctl.analysis.stats import fold_step_time, steady_state
from accelctl.contract.events import Event, LogMessage, PhaseChanged, RunFailed, RunFinished, RunStarted, StepMetrics

#: statuses a run can end with (``summary.json``); "running" and "waiting" are live


@dataclass(frozen=True)
class Progress:
    done: int
    total: int | None
    #: seconds left at the current pace (None before the first step or without a total)
    eta_s: float | None
    #: seconds covered by the events so far (first event -> last event)
    elapsed_s: float

    @property
    def fraction(self) -> float | None:
        return None if not self.total else min(1.0, self.done / self.total)


#: what each phase is doing, as the progress line says it
PHASE_LABELS = {"waiting": "starting: processes, imports", "setup": "setup: model build and load, process group",
                "warmup": "warm-up (excluded; compiles happen here)", "measure": "measure"}


class RunModel:
    """Accumulates a run's events.  ``version`` grows with every event (panels cache on it)."""

    def __init__(self, *, run_id: str = "", total_steps: int | None = None, task: str = "",
                 world_size: int | None = None, names: tuple[str, str, str] = ("", "", ""), max_logs: int = 200,
                 started_wall: float | None = None):
        self.run_id = run_id
        #: when a live run was launched (wall clock): its elapsed time ticks from there, through
        #: the imports and model build that send no event; None (a replay): the events' own span
        self.started_wall = started_wall
        self.ended_wall: float | None = None
        #: (workload, target, backend) as planned, until the worker's RunStarted says more
        self.names = names
        self.total_steps = total_steps
        self.task = task
        self.world_size = world_size or 1
        self.started: dict[int, RunStarted] = {}
        self.phase = "waiting"
        self.repeat = 0
        self.steps: list[StepMetrics] = []
        #: the straggler's time of each step, by (phase, repeat, step), in arrival order
        #: (``accelctl.analysis.stats.fold_step_time``)
        self.step_times: dict[tuple[str, int, int], float] = {}
        self.rank_steps: dict[int, list[StepMetrics]] = {}
        self.logs: deque[tuple[str, str]] = deque(maxlen=max_logs)
        #: messages ever added to ``logs`` (the deque drops old ones)
        self.log_total = 0
        self.failures: list[RunFailed] = []
        self.finished: dict[int, RunFinished] = {}
        self.status = "waiting"
        self.summary: dict[str, Any] | None = None
        self.version = 0
        self._first_t: float | None = None
        self._last_t: float | None = None
        self._stats: Any = None
        self._stats_version = -1

    # -- folding events in ---------------------------------------------------------------

    def extend(self, events) -> None:
        for ev in events:
            self.add(ev)

    def add(self, ev: Event) -> None:
        self.version += 1
        t = getattr(ev, "time_unix_s", None)
        if t is not None:
            self._first_t = t if self._first_t is None else min(self._first_t, t)
            self._last_t = t if self._last_t is None else max(self._last_t, t)
        if self.status == "waiting":
            self.status = "running"
        if isinstance(ev, StepMetrics):
            self.steps.append(ev)
            fold_step_time(self.step_times, ev)
            self.rank_steps.setdefault(ev.rank, []).append(ev)
        elif isinstance(ev, PhaseChanged):
            if ev.rank == 0:
                self.phase, self.repeat = ev.phase, ev.repeat
        elif isinstance(ev, RunStarted):
            self.started[ev.rank] = ev
            self.run_id = self.run_id or ev.run_id
            self.world_size = max(self.world_size, ev.world_size)
        elif isinstance(ev, LogMessage):
            if ev.level.lower() != "debug":
                tag = f"[rank {ev.rank}] " if ev.rank else ""
                self._log(ev.level.lower(), tag + ev.message)
        elif isinstance(ev, RunFailed):
            self.failures.append(ev)
            first = (ev.message or "").strip().splitlines()
            self._log("error", f"rank {ev.rank} {ev.reason}: {first[0] if first else ''}")
        elif isinstance(ev, RunFinished):
            self.finished[ev.rank] = ev

    def _log(self, level: str, message: str) -> None:
        self.logs.append((level, message))
        self.log_total += 1

    def end(self, status: str, summary: dict[str, Any] | None = None) -> None:
        """The run is over (or its recording ends): ``status`` from the runner / summary.json."""
        self.version += 1
        self.status = status
        self.summary = summary
        if self.started_wall is not None and self.ended_wall is None:
            self.ended_wall = time.time()
        if status in ("ok",):
            self.phase = "done"

    # -- derived views ------------------------------------------------------------------

    @property
    def live(self) -> bool:
        return self.status in ("waiting", "running")

    @property
    def head(self) -> RunStarted | None:
        return self.started.get(0) or next(iter(self.started.values()), None)

    @property
    def rank0(self) -> list[StepMetrics]:
        return self.rank_steps.get(0) or next(iter(self.rank_steps.values()), [])

    @property
    def last(self) -> StepMetrics | None:
        r0 = self.rank0
        return r0[-1] if r0 else None

    @property
    def is_generation(self) -> bool:
        if self.task:
            return self.task == "generate"
        return any(s.new_tokens is not None for s in self.rank0)

    @property
    def current_step_s(self) -> float | None:
        """The latest step's time (the straggler's, when several ranks reported it)."""
        return next(reversed(self.step_times.values()), None) if self.step_times else None

    def stats(self):
        """``steady_state`` over the steps so far (cached until the next event)."""
        if self._stats_version != self.version:
            self._stats = steady_state(self.steps)
            self._stats_version = self.version
        return self._stats

    def progress(self) -> Progress:
        r0 = self.rank0
        done = len(r0)
        if self.started_wall is not None:
            elapsed = (self.ended_wall or time.time()) - self.started_wall
        else:
            elapsed = (self._last_t - self._first_t) if self._first_t is not None and self._last_t is not None else 0.0
        eta = None
        if self.total_steps and done and self.live:
            # the steady-state median step; before any measured step, the mean of the
            # latest five steps (the straggler's time, as everywhere)
            st = self.stats().step_time
            pace = st.median if st is not None else statistics.fmean(list(self.step_times.values())[-5:])
            eta = max(0, self.total_steps - done) * pace
        elif self.total_steps and not self.live:
            eta = 0.0 if done >= self.total_steps else None
        return Progress(done=done, total=self.total_steps, eta_s=eta, elapsed_s=elapsed)

    def series(self, field: str, rank: int = 0) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """(warm-up points, measured points) of one field of a rank's steps, x = step index 1..n.

        Steps of phases other than warm-up and measure count as warm-up here (shown, excluded)."""
        warm: list[tuple[int, float]] = []
        meas: list[tuple[int, float]] = []
        for i, s in enumerate(self.rank_steps.get(rank, []), start=1):
            v = getattr(s, field)
            if v is None:
                continue
            (meas if s.phase == "measure" else warm).append((i, float(v)))
        return warm, meas

    @property
    def phase_label(self) -> str:
        """The phase in words: what a run is doing before its first step (a
        setup of many seconds must show something moving)."""
        return PHASE_LABELS.get(self.phase, self.phase)

    def log_lines(self) -> list[tuple[str, str]]:
        return list(self.logs)
