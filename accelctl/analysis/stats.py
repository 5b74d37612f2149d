"""Steady-state statistics over a run's ``StepMetrics`` (pure python, no numpy).

Conventions everywhere here: only ``phase == "measure"`` steps enter the steady-state figures;
a step is keyed by ``(repeat, step)`` and its time is the maximum over ranks (the straggler);
percentiles interpolate linearly (numpy's default, Hyndman & Fan type 7); ``stdev`` is the
sample deviation; a step's samples/tokens are its global count, read from the lowest rank, never
summed; repeats give one value each, with a CI from ``accelctl.analysis.ci``; the loss is rank
0's.  The full list (aggregate throughput, MFU, memory, the loss test): docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from accelctl.analysis.ci import Interval, RepeatSummary, positive_mean_ci, repeat_summary
from accelctl.contract.events import StepMetrics

MEASURE = "measure"
WARMUP = "warmup"

#: ``(phase, repeat, step)``
StepKey = tuple[str, int, int]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by linear interpolation (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside 0..100")
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Distribution:
    """Summary of a sample of values (seconds, or a rate)."""

    count: int
    mean: float
    median: float
    p90: float
    p99: float
    stdev: float
    min: float
    max: float

    @classmethod
    def of(cls, values: Sequence[float]) -> "Distribution | None":
        xs = [float(v) for v in values]
        if not xs:
            return None
        return cls(
            count=len(xs),
            mean=statistics.fmean(xs),
            median=statistics.median(xs),
            p90=percentile(xs, 90),
            p99=percentile(xs, 99),
            stdev=statistics.stdev(xs) if len(xs) > 1 else 0.0,
            min=min(xs),
            max=max(xs),
        )


@dataclass(frozen=True)
class Rate:
    """A per-step rate (samples/s, tokens/s) over the measured steps."""

    median: float
    mean: float
    #: summed counts / summed step times (None when steps carried only reported rates)
    aggregate: float | None = None

    @classmethod
    def of(cls, values: Sequence[float], aggregate: float | None = None) -> "Rate | None":
        xs = [float(v) for v in values]
        return cls(median=statistics.median(xs), mean=statistics.fmean(xs), aggregate=aggregate) if xs else None

    @property
    def steady(self) -> float:
        """The headline: ``aggregate`` when known, else the mean of per-step rates."""
        return self.aggregate if self.aggregate is not None else self.mean


@dataclass(frozen=True)
class LossTrend:
    first: float
    last: float
    #: how many losses were compared at each end
    k: int
    first_k_mean: float | None
    last_k_mean: float | None
    #: mean of the last k < mean of the first k; None with fewer than two losses
    decreased: bool | None


@dataclass(frozen=True)
class GenerationStats:
    """Generation (``new_tokens`` reported): one measured step = one generate call."""

    latency_mean_s: float
    latency_median_s: float
    latency_p90_s: float
    ttft_mean_s: float | None
    ttft_median_s: float | None
    per_token_mean_s: float | None
    per_token_median_s: float | None
    tokens_per_s_median: float | None
    tokens_per_s_mean: float | None
    latency_p99_s: float | None = None
    latency_stdev_s: float | None = None


@dataclass(frozen=True)
class StepStats:
    #: ranks that reported measured steps
    ranks: int
    #: measured step time (straggler per step); None when no step was measured
    step_time: Distribution | None
    #: measured step time of each rank on its own
    per_rank: dict[int, Distribution]
    samples_per_s: Rate | None
    tokens_per_s: Rate | None
    #: mean step time of each repeat, by repeat index order
    repeat_means_s: tuple[float, ...]
    #: mean of ``repeat_means_s`` (equals step_time.mean when repeats have equal lengths)
    mean_of_repeats_s: float | None
    #: warm-up steps (straggler view) and their summed step time, excluded above
    warmup_steps: int
    warmup_time_s: float
    #: steps of phases other than warm-up and measure (also excluded)
    other_steps: int
    generation: GenerationStats | None
    loss: LossTrend | None
    percentile_method: str = "linear"
    #: per-step MFU (mean over ranks), None when no rank reported one
    mfu: Rate | None = None
    #: largest mem_bytes reported in a measured step, any rank
    peak_mem_bytes: int | None = None
    #: mean step time over repeats (one value per repeat), CI, MLPerf trimming
    repeats: RepeatSummary | None = None
    #: CI of the mean step time: over repeats (>= 2), else over the steps
    step_time_ci: Interval | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``per_rank`` keys become strings, and ``throughput`` groups
        the two rates (``{"samples_per_s": {...}, "tokens_per_s": {...}}``)."""
        d = _lists(dataclasses.asdict(self))
        d["per_rank"] = {str(k): v for k, v in d["per_rank"].items()}
        d["throughput"] = {"samples_per_s": d.pop("samples_per_s"), "tokens_per_s": d.pop("tokens_per_s")}
        return d


def _lists(obj: Any) -> Any:
    """Tuples become lists, recursively (what a JSON round trip gives back)."""
    if isinstance(obj, dict):
        return {k: _lists(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_lists(v) for v in obj]
    return obj


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _rate(step: StepMetrics, time_s: float, count: str, reported: str) -> float | None:
    """One step's rate: its global count / the straggler's time, else the reported rate."""
    n = getattr(step, count) or 0
    if n > 0 and time_s > 0:
        return n / time_s
    r = getattr(step, reported)
    return None if r is None else float(r)


def _loss_trend(steps: Sequence[StepMetrics]) -> LossTrend | None:
    losses = [float(s.loss) for s in steps if s.loss is not None]
    if not losses:
        return None
    k = min(5, len(losses) // 2)
    head = statistics.fmean(losses[:k]) if k else None
    tail = statistics.fmean(losses[-k:]) if k else None
    decreased = (tail < head) if k else None
    return LossTrend(first=losses[0], last=losses[-1], k=k, first_k_mean=head, last_k_mean=tail, decreased=decreased)


def _groups(steps: Sequence[StepMetrics]) -> dict[StepKey, list[StepMetrics]]:
    """Steps grouped by ``(phase, repeat, step)``: one group = one step of the whole job."""
    groups: dict[StepKey, list[StepMetrics]] = defaultdict(list)
    for s in steps:
        groups[step_key(s)].append(s)
    return groups


def step_key(step: StepMetrics) -> StepKey:
    """``(phase, repeat, step)``: what identifies one step of the whole job across ranks."""
    return (step.phase, step.repeat, step.step)


def fold_step_time(times: dict[StepKey, float], step: StepMetrics) -> None:
    """Fold one rank's report of a step into ``times``: a step's time is the slowest
    rank's (the straggler defines the step).  Incremental, for views that grow live."""
    key, t = step_key(step), float(step.step_time_s)
    times[key] = max(times[key], t) if key in times else t


def straggler_times(events: Iterable[Any]) -> dict[StepKey, float]:
    """The time of every step of the job (any phase), by ``(phase, repeat, step)`` in the
    order the steps first appear: the slowest rank's.  Non-step events are ignored."""
    times: dict[StepKey, float] = {}
    for e in events:
        if isinstance(e, StepMetrics):
            fold_step_time(times, e)
    return times


def measured_step_times(events: Iterable[Any]) -> list[tuple[int, int, float]]:
    """``(repeat, step, seconds)`` of every measured step, straggler time, in order."""
    times = straggler_times(events)
    return [(r, st, times[(ph, r, st)]) for ph, r, st in sorted(times) if ph == MEASURE]


def straggler(stats: StepStats) -> tuple[int, float] | None:
    """The straggling rank of a multi-rank run: ``(rank, how much slower its median
    measured step is than the fastest rank's, as a fraction)``; None with one rank."""
    medians = {r: d.median for r, d in stats.per_rank.items()}
    if len(medians) < 2:
        return None
    slow = max(medians, key=medians.get)
    fast = min(medians.values())
    return (slow, medians[slow] / fast - 1) if fast > 0 else None


def per_device(rate: float | None, devices: int | None) -> float | None:
    """A job's rate divided over its devices (accelerators); None when either is unknown."""
    return rate / devices if rate is not None and devices else None


def steady_state(events: Iterable[Any]) -> StepStats:
    """Steady-state statistics of a run; non-``StepMetrics`` events are ignored."""
    steps = [e for e in events if isinstance(e, StepMetrics)]
    measured = [s for s in steps if s.phase == MEASURE]
    is_generation = any(s.new_tokens is not None for s in measured)

    # 1. group steps by (phase, repeat, step): one group = one step of the whole job
    groups = _groups(steps)
    measure_keys = sorted(k for k in groups if k[0] == MEASURE)
    warmup_keys = [k for k in groups if k[0] == WARMUP]
    other = sum(1 for k in groups if k[0] not in (MEASURE, WARMUP))

    # 2. step time: the straggler defines each step
    step_times = straggler_times(steps)
    times = [step_times[k] for k in measure_keys]

    # 3. throughput per step: global counts from the lowest rank, straggler time;
    #    aggregate = summed counts / summed times over the steps that carry counts
    samples_rates: list[float] = []
    tokens_rates: list[float] = []
    gen_tokens_rates: list[float] = []
    totals = {"samples": [0.0, 0.0], "tokens": [0.0, 0.0]}
    for key, t in zip(measure_keys, times):
        head = min(groups[key], key=lambda s: s.rank)
        for out, count, reported in ((samples_rates, "samples", "samples_per_s"),
                                     (tokens_rates, "tokens", "tokens_per_s")):
            r = _rate(head, t, count, reported)
            if r is not None:
                out.append(r)
            if (getattr(head, count) or 0) > 0 and t > 0:
                totals[count][0] += getattr(head, count)
                totals[count][1] += t
        if is_generation:
            r = _rate(head, t, "tokens", "tokens_per_s")
            if r is None and head.new_tokens and t > 0:
                r = head.new_tokens / t
            if r is not None:
                gen_tokens_rates.append(r)

    def aggregate(count: str) -> float | None:
        n, secs = totals[count]
        return n / secs if n > 0 and secs > 0 else None

    # 4. per-repeat means, their mean with a CI (MLPerf trimming from 5 repeats)
    by_repeat: dict[int, list[float]] = defaultdict(list)
    for key, t in zip(measure_keys, times):
        by_repeat[key[1]].append(t)
    repeat_means = tuple(statistics.fmean(by_repeat[r]) for r in sorted(by_repeat))
    repeats = repeat_summary(repeat_means)
    step_ci = repeats.ci if repeats is not None and repeats.n >= 2 else positive_mean_ci(times)

    # 5. per-rank distributions
    rank_times: dict[int, list[float]] = defaultdict(list)
    for s in measured:
        rank_times[s.rank].append(float(s.step_time_s))
    per_rank = {r: Distribution.of(ts) for r, ts in sorted(rank_times.items())}

    # 6. MFU (mean over the ranks of a step) and peak memory
    mfus = []
    for key in measure_keys:
        vals = [float(s.mfu) for s in groups[key] if s.mfu is not None]
        if vals:
            mfus.append(statistics.fmean(vals))
    mems = [int(s.mem_bytes) for s in measured if s.mem_bytes is not None]

    # 7. generation latency (a generate call's wall time is the step time)
    generation = None
    if is_generation and times:
        rank0 = [s for s in measured if s.rank == 0]
        ttft = [float(s.ttft_s) for s in rank0 if s.ttft_s is not None]
        per_token = [float(s.per_token_s) for s in rank0 if s.per_token_s is not None]
        generation = GenerationStats(
            latency_mean_s=statistics.fmean(times),
            latency_median_s=statistics.median(times),
            latency_p90_s=percentile(times, 90),
            ttft_mean_s=_mean(ttft),
            ttft_median_s=_median(ttft),
            per_token_mean_s=_mean(per_token),
            per_token_median_s=_median(per_token),
            tokens_per_s_median=_median(gen_tokens_rates),
            tokens_per_s_mean=_mean(gen_tokens_rates),
            latency_p99_s=percentile(times, 99),
            latency_stdev_s=statistics.stdev(times) if len(times) > 1 else 0.0,
        )

    # 8. loss trend from rank 0, in step order
    rank0_measured = sorted((s for s in measured if s.rank == 0), key=lambda s: (s.repeat, s.step))

    return StepStats(
        ranks=len(rank_times),
        step_time=Distribution.of(times),
        per_rank={r: d for r, d in per_rank.items() if d is not None},
        samples_per_s=Rate.of(samples_rates, aggregate("samples")),
        tokens_per_s=Rate.of(tokens_rates, aggregate("tokens")),
        repeat_means_s=repeat_means,
        mean_of_repeats_s=_mean(repeat_means),
        warmup_steps=len(warmup_keys),
        warmup_time_s=sum(step_times[k] for k in warmup_keys),
        other_steps=other,
        generation=generation,
        loss=_loss_trend(rank0_measured),
        mfu=Rate.of(mfus),
        peak_mem_bytes=max(mems) if mems else None,
        repeats=repeats,
        step_time_ci=step_ci,
    )
