"""Confidence intervals in pure python: Student t, MLPerf-style repeats, Welch, ratios.

No scipy.  The t distribution's CDF is computed from the regularized incomplete beta
function (continued fraction, Lentz's method); its quantile by bisection on that CDF,
to ~1e-12.  ``df = inf`` uses the normal distribution.

* ``mean_ci(xs)``: ``mean ± t(1 - α/2, n - 1) · s / √n`` (s: sample stdev, n - 1).
* ``repeat_summary(xs)``: the mean of repeated measurements with its CI; when there are
  at least ``TRIM_AT`` = 5 repeats the fastest and the slowest are dropped first, as
  MLPerf's "olympic" scoring does, and the CI is over the kept ``n - 2`` values.
* ``welch(a, b)``: difference of means ``mean(b) - mean(a)`` with the Welch-Satterthwaite
  degrees of freedom, its CI and two-sided p-value.
* ``ratio_ci(a, b)``: CI of ``mean(a) / mean(b)`` by the delta method on the log scale:
  ``se² = s_a²/(n_a·m_a²) + s_b²/(n_b·m_b²)``, Welch-Satterthwaite df on those two terms,
  ``ratio · exp(± t · se)``.  Deterministic (no resampling), so reports are reproducible.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: repeats at which the fastest and the slowest are dropped (MLPerf olympic scoring)
TRIM_AT = 5


# --------------------------------------------------------------------------- Student t


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    ln_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    front = math.exp(ln_front)
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError("degrees of freedom must be > 0")
    if math.isinf(df):
        return statistics.NormalDist().cdf(t)
    tail = 0.5 * betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (e.g. ``t_quantile(0.975, 9) = 2.2622``)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile {p} outside (0, 1)")
    if math.isinf(df):
        return statistics.NormalDist().inv_cdf(p)
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


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

    @property
    def relative(self) -> float:
        """Half width over the mean (0.03 = ±3 %)."""
        return self.half_width / self.mean if self.mean else math.inf


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """Student-t interval of the mean; ``None`` with fewer than two values."""
    xs = [float(v) for v in values]
    if len(xs) < 2:
        return None
    m = statistics.fmean(xs)
    half = t_quantile(0.5 + confidence / 2.0, len(xs) - 1) * statistics.stdev(xs) / math.sqrt(len(xs))
    return Interval(m, m - half, m + half, len(xs), confidence)


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
    return RepeatSummary(n=len(xs), mean=statistics.fmean(kept), ci=mean_ci(kept, confidence),
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
    """Welch's t test and CI of ``mean(b) - mean(a)``; None when a sample has < 2 values."""
    if len(a) < 2 or len(b) < 2:
        return None
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    df = _welch_df(va, len(a), vb, len(b))
    diff = mb - ma
    if se == 0:
        p = 1.0 if diff == 0 else 0.0
        return WelchResult(diff, 0.0, df, math.copysign(math.inf, diff) if diff else 0.0, p,
                           Interval(diff, diff, diff, len(a) + len(b), confidence))
    t = diff / se
    p = 2.0 * (1.0 - t_cdf(abs(t), df))
    half = t_quantile(0.5 + confidence / 2.0, df) * se
    return WelchResult(diff, se, df, t, p, Interval(diff, diff - half, diff + half, len(a) + len(b), confidence))


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
