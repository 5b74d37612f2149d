"""Confidence intervals, repeats (MLPerf trimming) and the statistics added for reports,
against hand-computed values."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from scipy import stats

from accelctl.analysis.ci import TRIM_AT, mean_ci, ratio_ci, repeat_summary, t_quantile, welch
from accelctl.analysis.stats import measured_step_times, per_device, steady_state
from accelctl.contract.events import StepMetrics

approx = pytest.approx


def step(i, t, phase="measure", *, rank=0, repeat=0, **kw):
    return StepMetrics(step=i, phase=phase, step_time_s=t, rank=rank, repeat=repeat, **kw)


# --------------------------------------------------------------------------- Student t


@pytest.mark.parametrize("df, q975, q995", [
    (1, 12.706204736174698, 63.65674116287399),
    (2, 4.302652729749464, 9.924843200918276),
    (4, 2.7764451051977987, 4.604094871415897),
    (9, 2.2621571627982053, 3.2498355415921263),
    (30, 2.0422724563012373, 2.7499956535672259),
])
def test_t_quantile_matches_the_printed_tables(df, q975, q995):
    assert t_quantile(0.975, df) == approx(q975, rel=1e-9)
    assert t_quantile(0.995, df) == approx(q995, rel=1e-9)
    assert t_quantile(0.025, df) == approx(-q975, rel=1e-9)
    assert stats.t.cdf(t_quantile(0.9, df), df) == approx(0.9, abs=1e-12)


def test_t_distribution_limits():
    assert t_quantile(0.975, math.inf) == approx(1.959963984540054)
    assert t_quantile(0.975, 10**6) == approx(1.959963984540054, rel=1e-5)
    assert t_quantile(0.5, 3) == 0.0
    # df = 1 is the Cauchy distribution: quantile = tan(pi (q - 1/2))
    assert t_quantile(0.9, 1) == approx(math.tan(math.pi * 0.4), rel=1e-12)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def test_a_run_summary_interval_does_not_import_scipy_stats():
    """Every run's summary computes a t interval between the last step and the command's exit:
    the standard library's, not scipy's (0.4-0.6 s of imports at the end of every run)."""
    import subprocess
    import sys

    code = ("import sys; from accelctl.analysis.ci import mean_ci; mean_ci([1.0, 2.0, 4.0]); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scipy', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


@pytest.mark.parametrize("df", [0.5, 0.9, 1, 1.5, 2, 2.5, 3, 4, 5, 7, 10, 19, 30, 50, 100, 333, 1e3, 1e4, 5e4,
                                99_999, 1e5, 1e6, 1e8, math.inf])
def test_t_quantile_equals_scipy_over_degrees_of_freedom_and_tails(df):
    for p in (0.51, 0.6, 0.75, 0.9, 0.95, 0.975, 0.99, 0.995, 0.999, 0.9999, 1e-6, 0.025, 0.3):
        assert t_quantile(p, df) == approx(float(stats.t.ppf(p, df)), rel=1e-9), p


# --------------------------------------------------------------------------- one sample


def test_mean_ci_by_hand():
    ci = mean_ci([1.0, 2.0, 3.0, 4.0, 5.0])
    # mean 3, s = sqrt(2.5), se = s / sqrt(5) = 0.70711, t(0.975, 4) = 2.7764451
    half = 2.7764451051977987 * math.sqrt(2.5) / math.sqrt(5)
    assert (ci.mean, ci.low, ci.high, ci.n) == (3.0, approx(3 - half), approx(3 + half), 5)
    assert ci.half_width == approx(half)
    assert mean_ci([2.0]) is None
    assert mean_ci([2.0, 2.0]).half_width == 0.0


def test_repeats_below_five_are_all_kept():
    r = repeat_summary([0.30, 0.10, 0.20, 0.40])
    assert r.n == 4 and r.dropped == () and r.kept == (0.30, 0.10, 0.20, 0.40)
    assert r.mean == approx(0.25)
    # s = sqrt(((.05)^2 + (.15)^2 + (.05)^2 + (.15)^2) / 3) = 0.129099; t(0.975, 3) = 3.182446
    # on the log scale (a positive quantity): mean x exp(-+ t s / (sqrt(n) mean))
    k = 3.182446305284263 * 0.12909944487358055 / 2 / 0.25
    assert (r.ci.low, r.ci.high) == (approx(0.25 * math.exp(-k)), approx(0.25 * math.exp(k)))
    assert repeat_summary([0.5]).ci is None and repeat_summary([]) is None


def test_mlperf_trimming_drops_fastest_and_slowest_from_five():
    assert TRIM_AT == 5
    r = repeat_summary([0.12, 0.10, 0.50, 0.11, 0.13])
    assert r.dropped == (0.10, 0.50) and r.kept == (0.12, 0.11, 0.13)
    assert r.mean == approx(0.12)
    k = 4.302652729749464 * 0.01 / math.sqrt(3) / 0.12  # s = 0.01, df = 2; log scale
    assert (r.ci.low, r.ci.high, r.ci.n) == (approx(0.12 * math.exp(-k)), approx(0.12 * math.exp(k)), 3)
    assert "MLPerf" in r.method
    # ties: exactly one fastest and one slowest go
    r = repeat_summary([1.0, 1.0, 1.0, 1.0, 1.0, 2.0])
    assert r.dropped == (1.0, 2.0) and r.kept == (1.0, 1.0, 1.0, 1.0)


# --------------------------------------------------------------------------- two samples


def test_welch_by_hand():
    w = welch([1.0, 2.0, 3.0], [2.0, 4.0, 6.0])
    # var/n: 1/3 and 4/3; se = sqrt(5/3); df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = 2.941176
    assert w.diff == 2.0 and w.se == approx(math.sqrt(5 / 3))
    assert w.df == approx((5 / 3) ** 2 / ((1 / 9) / 2 + (16 / 9) / 2))
    assert w.t == approx(2.0 / math.sqrt(5 / 3))
    assert w.p_value == approx(2 * stats.t.sf(abs(w.t), w.df))
    half = t_quantile(0.975, w.df) * w.se
    assert (w.ci.low, w.ci.high) == (approx(2 - half), approx(2 + half))
    assert welch([1.0], [1.0, 2.0]) is None


def test_ratio_ci_delta_method_by_hand():
    a, b = [2.0, 2.2, 1.8, 2.0], [1.0, 1.1, 0.9, 1.0]
    ci = ratio_ci(a, b)
    va = statistics.variance(a) / (4 * 2.0**2)
    vb = statistics.variance(b) / (4 * 1.0**2)
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 3)
    q = t_quantile(0.975, df)
    assert ci.mean == 2.0
    assert ci.low == approx(2.0 * math.exp(-q * math.sqrt(va + vb)))
    assert ci.high == approx(2.0 * math.exp(q * math.sqrt(va + vb)))
    # constant samples: a zero-width interval
    assert (ratio_ci([2.0, 2.0], [1.0, 1.0]).low, ratio_ci([2.0, 2.0], [1.0, 1.0]).high) == (2.0, 2.0)


# --------------------------------------------------------------------------- stats additions


def test_repeats_in_steady_state_and_the_step_time_ci():
    # 5 repeats of 2 steps; repeat means 0.10, 0.12, 0.11, 0.30 (slow), 0.13
    means = [0.10, 0.12, 0.11, 0.30, 0.13]
    events = [step(0, 9.0, "warmup", samples=8)]
    n = 0
    for k, m in enumerate(means):
        for dt in (-0.01, 0.01):
            n += 1
            events.append(step(n, m + dt, repeat=k, samples=8))
    s = steady_state(events)
    assert s.repeat_means_s == approx(tuple(means))
    assert s.repeats.dropped == approx((0.10, 0.30)) and s.repeats.kept == approx((0.12, 0.11, 0.13))
    assert s.repeats.mean == approx(0.12)
    assert s.step_time_ci is s.repeats.ci  # two repeats or more: the CI is over repeats
    assert s.step_time.mean == approx(statistics.fmean(means))  # all steps, warm-up excluded
    # aggregate = 10 steps x 8 samples / summed time
    assert s.samples_per_s.aggregate == approx(80 / (2 * sum(means)))
    assert s.samples_per_s.steady == s.samples_per_s.aggregate
    assert [t for _, _, t in measured_step_times(events)] == approx([m + d for m in means for d in (-0.01, 0.01)])


def test_single_repeat_ci_is_over_steps_and_mfu_memory_are_reported():
    events = []
    for i, (t0, t1) in enumerate([(0.10, 0.11), (0.12, 0.10), (0.11, 0.13)]):
        events.append(step(i, t0, rank=0, samples=16, mfu=0.2, mem_bytes=100))
        events.append(step(i, t1, rank=1, samples=16, mfu=0.4, mem_bytes=300 + i))
    s = steady_state(events)
    straggler = [0.11, 0.12, 0.13]
    assert s.step_time_ci.mean == approx(0.12)
    k = 4.302652729749464 * 0.01 / math.sqrt(3) / 0.12  # log scale: never below zero
    assert (s.step_time_ci.low, s.step_time_ci.high) == (approx(0.12 * math.exp(-k)), approx(0.12 * math.exp(k)))
    assert s.mfu.mean == approx(0.3) and s.mfu.median == approx(0.3)  # mean over ranks per step
    assert s.peak_mem_bytes == 302
    assert s.samples_per_s.aggregate == approx(48 / sum(straggler))  # global count, never summed over ranks
    assert per_device(s.samples_per_s.aggregate, 2) == approx(24 / sum(straggler))
    assert per_device(None, 2) is None and per_device(1.0, 0) is None


def test_generation_latency_percentiles():
    lat = [0.5, 0.4, 0.6, 0.55, 0.45]
    events = [step(i, t, new_tokens=10, tokens=10, ttft_s=t / 5, per_token_s=t / 20) for i, t in enumerate(lat)]
    g = steady_state(events).generation
    assert g.latency_mean_s == approx(0.5) and g.latency_median_s == approx(0.5)
    assert g.latency_p99_s == approx(0.598)  # pos 3.96 of [.4 .45 .5 .55 .6]
    assert g.latency_stdev_s == approx(statistics.stdev(lat))
    assert g.ttft_mean_s == approx(0.1) and g.per_token_mean_s == approx(0.025)


def test_to_dict_is_what_json_gives_back():
    events = [step(i, 0.1 + 0.01 * i, repeat=i % 5, samples=4) for i in range(10)]
    d = steady_state(events).to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["repeats"]["n"] == 5 and len(d["repeats"]["dropped"]) == 2
    assert set(d["throughput"]["samples_per_s"]) == {"median", "mean", "aggregate"}
