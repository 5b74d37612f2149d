"""Steady-state statistics against hand-computed values."""

from __future__ import annotations

import json
import math
import random
import statistics

import pytest

from accelctl.analysis.stats import Distribution, percentile, steady_state, straggler, straggler_times
from accelctl.contract.events import LogMessage, PhaseChanged, StepMetrics

approx = pytest.approx


def step(i, t, phase="measure", *, rank=0, repeat=0, loss=None, samples=0, tokens=0, **kw):
    return StepMetrics(step=i, phase=phase, step_time_s=t, rank=rank, repeat=repeat, loss=loss, samples=samples, tokens=tokens, **kw)


# --------------------------------------------------------------------------- percentile


def test_percentile_linear_interpolation_by_hand():
    xs = [4.0, 1.0, 3.0, 2.0]  # unsorted on purpose
    assert percentile(xs, 0) == 1.0
    assert percentile(xs, 100) == 4.0
    assert percentile(xs, 50) == 2.5  # pos 1.5
    assert percentile(xs, 90) == approx(3.7)  # pos 2.7: 3 + 0.7 * (4 - 3)
    assert percentile(xs, 25) == approx(1.75)  # pos 0.75
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1.0], 101)


def test_percentile_matches_statistics_inclusive_quantiles():
    rng = random.Random(0)
    xs = [rng.expovariate(1.0) for _ in range(37)]
    cuts = statistics.quantiles(xs, n=100, method="inclusive")
    for q in (1, 10, 50, 90, 99):
        assert percentile(xs, q) == approx(cuts[q - 1])
    assert percentile(xs, 50) == approx(statistics.median(xs))


def test_distribution_by_hand():
    d = Distribution.of([0.1, 0.2, 0.3, 0.4, 0.5])
    assert (d.count, d.min, d.max) == (5, 0.1, 0.5)
    assert d.mean == approx(0.3) and d.median == approx(0.3)
    assert d.p90 == approx(0.46)  # pos 3.6: 0.4 + 0.6 * 0.1
    assert d.p99 == approx(0.496)  # pos 3.96
    assert d.stdev == approx(math.sqrt(0.1 / 4))  # sample stdev: squares 0.04+0.01+0+0.01+0.04
    one = Distribution.of([2.0])
    assert (one.stdev, one.p90, one.median) == (0.0, 2.0, 2.0)
    assert Distribution.of([]) is None


# --------------------------------------------------------------------------- one rank


def test_single_rank_training():
    events = [
        PhaseChanged(phase="compile"),
        step(0, 9.0, "compile"),
        step(0, 1.0, "warmup", loss=6.0, samples=4),
        step(1, 2.0, "warmup", loss=6.0, samples=4),
        LogMessage(level="info", message="not a step"),
    ]
    events += [step(i, t, loss=l, samples=4) for i, (t, l) in enumerate(zip([0.1, 0.2, 0.3, 0.4, 0.5], [5, 4, 3, 2, 1]))]
    s = steady_state(events)
    assert s.ranks == 1
    assert s.step_time.count == 5 and s.step_time.median == approx(0.3) and s.step_time.p90 == approx(0.46)
    assert s.step_time.mean == approx(0.3)  # warm-up (1 s, 2 s) and compile (9 s) excluded
    assert (s.warmup_steps, s.warmup_time_s, s.other_steps) == (2, approx(3.0), 1)
    # 4 samples per step: 40, 20, 13.33, 10, 8 samples/s
    assert s.samples_per_s.median == approx(40 / 3)
    assert s.samples_per_s.mean == approx((40 + 20 + 40 / 3 + 10 + 8) / 5)
    assert s.tokens_per_s is None  # no tokens counted, none reported
    # losses 5 4 3 2 1: k = min(5, 5 // 2) = 2; first-2 mean 4.5 > last-2 mean 1.5
    assert (s.loss.first, s.loss.last, s.loss.k) == (5, 1, 2)
    assert (s.loss.first_k_mean, s.loss.last_k_mean, s.loss.decreased) == (4.5, 1.5, True)
    assert s.generation is None
    assert s.repeat_means_s == (approx(0.3),) and s.mean_of_repeats_s == approx(0.3)
    assert s.per_rank[0] == s.step_time


def test_counts_come_from_the_lowest_rank_present():
    # rank 0 missed the step (killed run): rank 1's global count is used
    s = steady_state([step(0, 0.5, rank=1, samples=8), step(0, 0.25, rank=2, samples=8)])
    assert s.samples_per_s.median == approx(16.0)


def test_reported_rates_are_used_when_counts_are_missing():
    s = steady_state([step(0, 0.1, samples_per_s=10.0, tokens_per_s=100.0), step(1, 0.1, samples_per_s=30.0, tokens_per_s=300.0)])
    assert (s.samples_per_s.median, s.samples_per_s.mean) == (20.0, 20.0)
    assert s.tokens_per_s.median == 200.0


def test_repeats_mean_of_repeats_differs_from_overall_mean():
    events = [step(0, 0.1), step(1, 0.3), step(0, 0.2, repeat=1), step(1, 0.2, repeat=1), step(2, 0.5, repeat=1)]
    s = steady_state(events)
    assert s.repeat_means_s == (approx(0.2), approx(0.3))
    assert s.mean_of_repeats_s == approx(0.25)
    assert s.step_time.mean == approx(0.26)
    assert s.step_time.count == 5  # step 0 of repeat 0 and of repeat 1 are different steps


@pytest.mark.parametrize(
    "losses, k, decreased",
    [
        ([1, 2, 3, 4], 2, False),
        ([5.0], 0, None),
        ([4.0, math.nan, 3.0, 2.0], 2, False),  # a NaN never counts as progress
        ([3, 2], 1, True),
        (list(range(30, 0, -1)), 5, True),  # k is capped at 5: 28 vs 3
    ],
)
def test_loss_trend(losses, k, decreased):
    s = steady_state([step(i, 0.1, loss=l) for i, l in enumerate(losses)])
    assert s.loss.k == k and s.loss.decreased is decreased
    assert s.loss.first == losses[0] and (s.loss.last == losses[-1] or math.isnan(losses[-1]))


def test_nothing_measured():
    s = steady_state([step(0, 1.0, "warmup"), PhaseChanged(phase="setup")])
    assert s.step_time is None and s.samples_per_s is None and s.loss is None and s.generation is None
    assert (s.ranks, s.repeat_means_s, s.mean_of_repeats_s, s.warmup_steps) == (0, (), None, 1)
    json.dumps(s.to_dict())
    assert steady_state([]).step_time is None


# --------------------------------------------------------------------------- several ranks


def test_multi_rank_straggler_defines_the_step():
    # each rank reports the step's global count: micro-batch 2 x 2 ranks = 4 samples
    r0 = [step(i, t, rank=0, loss=l, samples=4, tokens=40) for i, (t, l) in enumerate(zip([0.1, 0.2, 0.3], [3, 2, 1]))]
    r1 = [step(i, t, rank=1, loss=9.0, samples=4, tokens=40) for i, t in enumerate([0.15, 0.1, 0.5])]
    s = steady_state(r1 + r0)  # arrival order must not matter
    assert s.ranks == 2
    # per step max over ranks: 0.15, 0.2, 0.5
    assert s.step_time.count == 3
    assert (s.step_time.median, s.step_time.mean, s.step_time.max) == (approx(0.2), approx(0.85 / 3), 0.5)
    assert s.per_rank[0].median == approx(0.2) and s.per_rank[1].median == approx(0.15)
    # global 4 samples per step (not summed over ranks) / straggler time → 26.67, 20, 8 samples/s
    assert s.samples_per_s.median == approx(20.0)
    assert s.samples_per_s.mean == approx((4 / 0.15 + 20 + 8) / 3)
    assert s.tokens_per_s.median == approx(200.0)
    # loss from rank 0 only
    assert (s.loss.first, s.loss.last, s.loss.decreased) == (3, 1, True)


def test_straggler_times_and_the_straggling_rank():
    # the one rule every view uses (summary, TUI, TensorBoard): a step takes the slowest rank's time
    events = [step(0, 9.0, "warmup", rank=1), step(0, 8.0, "warmup", rank=0), LogMessage(level="info", message="x"),
              step(0, 0.1, rank=0), step(0, 0.3, rank=1), step(1, 0.2, rank=1), step(1, 0.25, rank=0)]
    times = straggler_times(events)
    assert list(times) == [("warmup", 0, 0), ("measure", 0, 0), ("measure", 0, 1)]  # first-seen order
    assert list(times.values()) == [9.0, 0.3, 0.25]
    # rank 1's median measured step 0.25 vs rank 0's 0.175: rank 1 straggles by 0.25 / 0.175 - 1
    assert straggler(steady_state(events)) == (1, approx(0.25 / 0.175 - 1))
    assert straggler(steady_state([step(0, 0.1)])) is None


def test_multi_rank_generation_counts_rank0_tokens_and_straggler_latency():
    events = []
    for i, (t0, t1, ttft, per_tok) in enumerate(zip([1.0, 1.2, 1.1], [1.1, 1.0, 1.3], [0.05, 0.07, 0.06], [0.010, 0.012, 0.011])):
        events.append(step(i, 2.0, "warmup", rank=0, new_tokens=10, tokens=10, samples=1))
        events.append(step(i, t0, rank=0, new_tokens=10, tokens=10, samples=1, ttft_s=ttft, per_token_s=per_tok))
        events.append(step(i, t1, rank=1, new_tokens=10, tokens=10, samples=1, ttft_s=1.0, per_token_s=1.0))
    s = steady_state(events)
    g = s.generation
    # latency per call = straggler: 1.1, 1.2, 1.3
    assert (g.latency_mean_s, g.latency_median_s, g.latency_p90_s) == (approx(1.2), approx(1.2), approx(1.28))
    assert (g.ttft_mean_s, g.ttft_median_s) == (approx(0.06), approx(0.06))  # rank 0's
    assert (g.per_token_mean_s, g.per_token_median_s) == (approx(0.011), approx(0.011))
    # tensor parallel: the 10 tokens every rank holds, counted once: 10 / 1.1, 10 / 1.2, 10 / 1.3
    assert g.tokens_per_s_median == approx(10 / 1.2)
    assert g.tokens_per_s_mean == approx((10 / 1.1 + 10 / 1.2 + 10 / 1.3) / 3)
    assert s.tokens_per_s.median == approx(10 / 1.2)
    assert s.samples_per_s.median == approx(1 / 1.2)
    assert s.loss is None and s.warmup_steps == 3 and s.warmup_time_s == approx(6.0)


def test_generation_tokens_from_new_tokens_when_not_counted():
    s = steady_state([step(0, 2.0, new_tokens=100), step(1, 4.0, new_tokens=100)])
    assert (s.generation.tokens_per_s_median, s.generation.tokens_per_s_mean) == (approx(37.5), approx(37.5))
    assert s.generation.ttft_mean_s is None and s.tokens_per_s is None


def test_to_dict_is_json_ready():
    s = steady_state([step(0, 0.1, rank=1, samples=2), step(0, 0.2, rank=0, samples=2, loss=1.0)])
    d = json.loads(json.dumps(s.to_dict()))
    assert set(d["per_rank"]) == {"0", "1"}
    assert d["throughput"]["samples_per_s"]["median"] == approx(10.0)  # 2 samples / 0.2 s
    assert d["throughput"]["tokens_per_s"] is None
    assert d["step_time"]["median"] == approx(0.2)
    assert d["percentile_method"] == "linear"
