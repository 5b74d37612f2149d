"""Student's t quantile in the standard library, for the interval of every run's summary.

``scipy.stats.t.ppf`` gives the same numbers, but importing scipy sits between a run's last
step and the command's exit (``bench``: "last step -> exit"); the tests check this module
against ``scipy.stats.t``.  Method: the upper tail ``I_x(df/2, 1/2) / 2`` by the incomplete
beta's continued fraction (modified Lentz; Numerical Recipes 3rd ed., 6.4), inverted by a
bracketed Newton; ``df = inf`` is ``statistics.NormalDist``, and above ``NORMAL_FROM`` the
Cornish-Fisher expansion is exact to double precision.
"""

from __future__ import annotations

import math
from statistics import NormalDist

#: degrees of freedom from which the Cornish-Fisher expansion replaces the continued fraction
NORMAL_FROM = 1e5
_TINY = 1e-300
_EPS = 1e-16


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of ``I_x(a, b)`` (converges for ``x < (a + 1) / (a + b + 2)``)."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > _TINY else _TINY)
    h = d
    for m in range(1, 100_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > _TINY else _TINY)
            c = 1.0 + aa / c
            c = c if abs(c) > _TINY else _TINY
            h *= d * c
        if abs(d * c - 1.0) < _EPS:
            break
    return h


def _regularized_beta(a: float, b: float, x: float) -> float:
    """``I_x(a, b)``, the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _beta_fraction(a, b, x) / a
    return 1.0 - front * _beta_fraction(b, a, 1.0 - x) / b


def upper_tail(t: float, df: float) -> float:
    """``P(T > t)`` for ``t >= 0``: near 0 as ``1/2 - I_y(1/2, df/2) / 2`` with
    ``y = t^2 / (df + t^2)`` (there ``x = 1 - y`` rounds to 1)."""
    y = t * t / (df + t * t)
    if y < 0.5:
        return 0.5 - 0.5 * _regularized_beta(0.5, df / 2.0, y)
    return 0.5 * _regularized_beta(df / 2.0, 0.5, df / (df + t * t))


def _density(t: float, df: float) -> float:
    log_c = math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
    return math.exp(log_c - (df + 1.0) / 2.0 * math.log1p(t * t / df))


def _cornish_fisher(z: float, df: float) -> float:
    z2 = z * z
    return (z + z * (z2 + 1.0) / (4.0 * df) + z * ((5.0 * z2 + 16.0) * z2 + 3.0) / (96.0 * df * df)
            + z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / (384.0 * df ** 3))


def quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom (``0 < p < 1``, ``df > 0``)."""
    if not 0.0 < p < 1.0:
        raise ValueError(f"quantile {p} outside (0, 1)")
    if not df > 0:
        raise ValueError("degrees of freedom must be > 0")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -quantile(1.0 - p, df)
    z = NormalDist().inv_cdf(p)
    if df == math.inf:
        return z
    if df >= NORMAL_FROM:
        return _cornish_fisher(z, df)
    if df == 1.0:  # Cauchy
        return math.tan(math.pi * (p - 0.5))
    tail = 1.0 - p
    lo, hi = 0.0, max(z, 1.0)
    while upper_tail(hi, df) > tail:
        lo, hi = hi, hi * 2.0
    t = min(max(_cornish_fisher(z, df), lo), hi) if df > 4 else (lo + hi) / 2.0
    for _ in range(200):
        excess = upper_tail(t, df) - tail
        if excess > 0:
            lo = t
        else:
            hi = t
        step = excess / _density(t, df)
        nxt = t + step
        if not lo < nxt < hi:
            nxt = (lo + hi) / 2.0
        if abs(nxt - t) <= 1e-15 * max(1.0, abs(t)) or hi - lo <= 1e-15 * hi:
            return nxt
        t = nxt
    return t
