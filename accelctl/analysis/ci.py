"""Confidence intervals: Student t, MLPerf-style repeats, Welch, ratios.

The t quantile is ``analysis.student_t`` (standard library: scipy.stats is slow to import and
every run's summary needs one); Welch's test is ``scipy.stats.ttest_ind(equal_var=False)``,
imported on first use.  ``df = inf`` is the normal distribution.  ``mean_ci``;
``positive_mean_ci`` (on the log scale, so a positive quantity's interval never reaches zero);
``repeat_summary`` (MLPerf's "olympic" trim from ``TRIM_AT`` repeats); ``welch``; ``ratio_ci``
(delta method on the log scale, Welch-Satterthwaite df; deterministic, so reports reproduce).
Formulas: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from accelctl.analysis import student_t

#: repeats at which the fastest and the slowest are dropped (MLPerf olympic scoring)
TRIM_AT = 5


# --------------------------------------------------------------------------- Student t


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (e.g. ``t_quantile(0.975, 9) = 2.2622``)."""
    return student_t.quantile(p, df)


# --------------------------------------------------------------------------- intervals


@dataclass(frozen=True)
class Interval:
    """A mean with its two-sided confidence interval."""

    mean: float
    low: float
    high: float
    #: values the interval is computed over (after trimming)
    n: int
    confidence: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """Student-t interval of the mean; ``None`` with fewer than two values."""
    xs = [float(v) for v in values]
    if len(xs) < 2:
        return None
    m = statistics.fmean(xs)
    half = t_quantile(0.5 + confidence / 2.0, len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return Interval(m, m - half, m + half, len(xs), confidence)


def positive_mean_ci(values: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """The mean of a positive quantity with a log-scale interval (see the module doc): its
    low end stays above zero.  ``None`` with fewer than two values or a value <= 0 (not a
    positive quantity: ``mean_ci`` is its interval)."""
    xs = [float(v) for v in values]
    if len(xs) < 2 or min(xs) <= 0:
        return None
    m = statistics.fmean(xs)
    k = t_quantile(0.5 + confidence / 2.0, len(xs) - 1) * statistics.stdev(xs) / (math.sqrt(len(xs)) * m)
    return Interval(m, m * math.exp(-k), m * math.exp(k), len(xs), confidence)


@dataclass(frozen=True)
class RepeatSummary:
    """The mean of repeated measurements (one value per repeat)."""

    #: repeats measured
    n: int
    mean: float
    #: CI over the kept values; None with fewer than two kept
    ci: Interval | None
    #: the values averaged, in repeat order
    kept: tuple[float, ...]
    #: the fastest and the slowest, dropped when n >= TRIM_AT
    dropped: tuple[float, ...]
    method: str


def repeat_summary(values: Sequence[float], confidence: float = 0.95) -> RepeatSummary | None:
    """Mean of repeats with a Student-t CI; MLPerf-style trimming from ``TRIM_AT`` repeats."""
    xs = [float(v) for v in values]
    if not xs:
        return None
    dropped: tuple[float, ...] = ()
    kept = list(xs)
    method = "mean of repeats, Student t"
    if len(xs) >= TRIM_AT:
        lo = min(range(len(xs)), key=lambda i: (xs[i], i))
        hi = max(range(len(xs)), key=lambda i: (xs[i], -i))
        dropped = (xs[lo], xs[hi])
        kept = [x for i, x in enumerate(xs) if i not in (lo, hi)]
        method = "MLPerf: fastest and slowest dropped, mean of the rest, Student t"
    return RepeatSummary(n=len(xs), mean=statistics.fmean(kept), ci=positive_mean_ci(kept, confidence),
                         kept=tuple(kept), dropped=dropped, method=method)


# --------------------------------------------------------------------------- two samples


@dataclass(frozen=True)
class WelchResult:
    #: mean(b) - mean(a)
    diff: float
    se: float
    df: float
    t: float
    #: two-sided
    p_value: float
    ci: Interval


def _welch_df(va: float, na: int, vb: float, nb: int) -> float:
    """Welch-Satterthwaite df for two variance-of-mean terms ``va``, ``vb``."""
    den = (va * va / (na - 1) if va else 0.0) + (vb * vb / (nb - 1) if vb else 0.0)
    return (va + vb) ** 2 / den if den > 0 else math.inf


def welch(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> WelchResult | None:
    """Welch's t test and CI of ``mean(b) - mean(a)`` (``scipy.stats.ttest_ind`` with
    ``equal_var=False``); None when a sample has < 2 values."""
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    diff = mb - ma
    n = len(a) + len(b)
    if se == 0:  # both samples constant: scipy's statistic would be nan (0/0) or inf
        p = 1.0 if diff == 0 else 0.0
        return WelchResult(diff, 0.0, _welch_df(va, len(a), vb, len(b)),
                           math.copysign(math.inf, diff) if diff else 0.0, p, Interval(diff, diff, diff, n, confidence))
    from scipy import stats

    res = stats.ttest_ind(list(b), list(a), equal_var=False)
    ci = res.confidence_interval(confidence_level=confidence)
    return WelchResult(diff, se, float(res.df), float(res.statistic), float(res.pvalue),
                       Interval(diff, float(ci.low), float(ci.high), n, confidence))


def ratio_ci(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """``mean(a) / mean(b)`` with a delta-method CI on the log scale (see module doc)."""
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    if ma <= 0 or mb <= 0:
        return None
    va = statistics.variance(a) / (len(a) * ma * ma)
    vb = statistics.variance(b) / (len(b) * mb * mb)
    r = ma / mb
    se = math.sqrt(va + vb)
    if se == 0:
        return Interval(r, r, r, len(a) + len(b), confidence)
    q = t_quantile(0.5 + confidence / 2.0, _welch_df(va, len(a), vb, len(b)))
    return Interval(r, r * math.exp(-q * se), r * math.exp(q * se), len(a) + len(b), confidence)
