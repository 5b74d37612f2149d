"""Steady-state statistics over a run's ``StepMetrics`` (pure python, no numpy).

Conventions, applied everywhere in this module:

* **Only ``phase == "measure"`` steps enter the steady-state figures.**  Warm-up steps
  are counted and timed apart (``warmup_steps``, ``warmup_time_s``); steps of any other
  phase are only counted (``other_steps``).
* **A step is keyed by ``(repeat, step)``.**  In a multi-rank run the step's time is the
  *maximum* over the ranks that reported it: the straggler defines the step.
* **Percentiles use linear interpolation between closest ranks** (numpy's default,
  Hyndman & Fan type 7, ``statistics.quantiles(method="inclusive")``):
  ``pos = (n - 1) * q / 100``, interpolate between the values at ``floor(pos)`` and
  ``ceil(pos)``.  With one value every percentile is that value.
* **``stdev`` is the sample standard deviation** (n - 1); 0.0 when n < 2.
* **Throughput of a step** = total samples (tokens) of the step / the step's time.
  Training sums the ranks' ``samples``/``tokens`` (data parallel: each rank works on its
  own micro-batch).  Generation counts rank 0 only (under tensor parallelism every rank
  produces the same tokens).  When a step carries no counts, the reported
  ``samples_per_s``/``tokens_per_s`` are used instead (summed / rank 0 alike).
* **Loss** comes from rank 0, in ``(repeat, step)`` order.  It *decreased* when the mean
  of the last ``k`` losses is below the mean of the first ``k``, ``k = min(5, n // 2)``;
  ``None`` when fewer than two losses were reported.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from accelctl.run.events import StepMetrics

MEASURE = "measure"
WARMUP = "warmup"


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

    @classmethod
    def of(cls, values: Sequence[float]) -> "Rate | None":
        xs = [float(v) for v in values]
        return cls(median=statistics.median(xs), mean=statistics.fmean(xs)) if xs else None


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

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: ``per_rank`` keys become strings, and ``throughput`` groups
        the two rates (``{"samples_per_s": {...}, "tokens_per_s": {...}}``)."""
        d = dataclasses.asdict(self)
        d["per_rank"] = {str(k): v for k, v in d["per_rank"].items()}
        d["repeat_means_s"] = list(self.repeat_means_s)
        d["throughput"] = {"samples_per_s": d.pop("samples_per_s"), "tokens_per_s": d.pop("tokens_per_s")}
        return d


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _median(xs: Sequence[float]) -> float | None:
    return statistics.median(xs) if xs else None


def _rate(steps: Sequence[StepMetrics], time_s: float, count: str, reported: str) -> float | None:
    """One combined step's rate: summed counts / step time, else summed reported rates."""
    counts = [getattr(s, count) or 0 for s in steps]
    if time_s > 0 and all(c > 0 for c in counts):
        return sum(counts) / time_s
    rates = [getattr(s, reported) for s in steps]
    if all(r is not None for r in rates):
        return float(sum(rates))
    return None


def _loss_trend(steps: Sequence[StepMetrics]) -> LossTrend | None:
    losses = [float(s.loss) for s in steps if s.loss is not None]
    if not losses:
        return None
    k = min(5, len(losses) // 2)
    head = statistics.fmean(losses[:k]) if k else None
    tail = statistics.fmean(losses[-k:]) if k else None
    decreased = (tail < head) if k else None
    return LossTrend(first=losses[0], last=losses[-1], k=k, first_k_mean=head, last_k_mean=tail, decreased=decreased)


def steady_state(events: Iterable[Any]) -> StepStats:
    """Steady-state statistics of a run; non-``StepMetrics`` events are ignored."""
    steps = [e for e in events if isinstance(e, StepMetrics)]
    measured = [s for s in steps if s.phase == MEASURE]
    is_generation = any(s.new_tokens is not None for s in measured)

    # 1. group steps by (phase, repeat, step): one group = one step of the whole job
    groups: dict[tuple[str, int, int], list[StepMetrics]] = defaultdict(list)
    for s in steps:
        groups[(s.phase, s.repeat, s.step)].append(s)
    measure_keys = sorted(k for k in groups if k[0] == MEASURE)
    warmup_keys = [k for k in groups if k[0] == WARMUP]
    other = sum(1 for k in groups if k[0] not in (MEASURE, WARMUP))

    def straggler(key: tuple[str, int, int]) -> float:
        return max(float(s.step_time_s) for s in groups[key])

    # 2. step time: the straggler defines each step
    times = [straggler(k) for k in measure_keys]

    # 3. throughput per step (see module docstring for which ranks count)
    samples_rates: list[float] = []
    tokens_rates: list[float] = []
    gen_tokens_rates: list[float] = []
    for key, t in zip(measure_keys, times):
        group = groups[key]
        counted = [s for s in group if s.rank == 0] if is_generation else group
        if not counted:
            continue
        for out, count, reported in ((samples_rates, "samples", "samples_per_s"), (tokens_rates, "tokens", "tokens_per_s")):
            r = _rate(counted, t, count, reported)
            if r is not None:
                out.append(r)
        if is_generation:
            r = _rate(counted, t, "tokens", "tokens_per_s")
            if r is None and t > 0 and all(s.new_tokens for s in counted):
                r = sum(s.new_tokens or 0 for s in counted) / t
            if r is not None:
                gen_tokens_rates.append(r)

    # 4. per-repeat means
    by_repeat: dict[int, list[float]] = defaultdict(list)
    for key, t in zip(measure_keys, times):
        by_repeat[key[1]].append(t)
    repeat_means = tuple(statistics.fmean(by_repeat[r]) for r in sorted(by_repeat))

    # 5. per-rank distributions
    rank_times: dict[int, list[float]] = defaultdict(list)
    for s in measured:
        rank_times[s.rank].append(float(s.step_time_s))
    per_rank = {r: Distribution.of(ts) for r, ts in sorted(rank_times.items())}

    # 6. generation latency (a generate call's wall time is the step time)
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
        )

    # 7. loss trend from rank 0, in step order
    rank0_measured = sorted((s for s in measured if s.rank == 0), key=lambda s: (s.repeat, s.step))

    return StepStats(
        ranks=len(rank_times),
        step_time=Distribution.of(times),
        per_rank={r: d for r, d in per_rank.items() if d is not None},
        samples_per_s=Rate.of(samples_rates),
        tokens_per_s=Rate.of(tokens_rates),
        repeat_means_s=repeat_means,
        mean_of_repeats_s=_mean(repeat_means),
        warmup_steps=len(warmup_keys),
        warmup_time_s=sum(straggler(k) for k in warmup_keys),
        other_steps=other,
        generation=generation,
        loss=_loss_trend(rank0_measured),
    )
