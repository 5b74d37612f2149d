"""Compare two measured configurations: speed-up and price-performance with 95 % CIs, and
a verdict.  The one comparison: ``accelctl compare``, the report's seed tables and the
TUI's compare screen all call ``compare``.

A is the baseline, B the candidate; each is anything with the fields of ``Measured``
(``accelctl.report.entry.Entry``: a stored run or a seed's published figure).

* speed-up of B over A = throughput B / throughput A (same unit), else latency A /
  latency B, else step time A / step time B (``accelctl.analysis.cost``).  Throughput is
  the steady state's summed units over summed step times, so every measured step counts
  (a median would hide the slow ones that the job still pays for).
* Its CI: the values compared are the repeat means when both runs have two repeats or
  more (MLPerf-trimmed from 5), else the steady-state step times.  The CI of
  ``mean(A) / mean(B)`` is the delta method on the log scale with Welch-Satterthwaite
  degrees of freedom (``accelctl.analysis.ci.ratio_ci``); the speed-up's CI is that
  interval times ``speed-up / (mean(A) / mean(B))`` (the fixed work per step of each
  run).  Step times are autocorrelated, so over steps the CI is optimistic: repeats
  (``measure { repeat = 5 }``) give the honest one.
* Price-performance ratio = speed-up x price A / price B, its CI scaled alike.
* Verdict: "regression" when the whole CI of the speed-up lies below ``1 - tolerance``,
  "improvement" when it lies above ``1 + tolerance``, else "no significant difference"
  (the difference is inside the noise); "unknown" when a run has fewer than two values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from accelctl.analysis import cost
from accelctl.analysis.ci import Interval, WelchResult, ratio_ci, welch

REGRESSION, IMPROVEMENT, SAME, UNKNOWN = "regression", "improvement", "no significant difference", "unknown"


class Measured(Protocol):
    """What a comparison reads of each side."""

    #: steady-state throughput in ``unit``, mean latency of one call, mean step time (s)
    throughput: float | None
    unit: str
    latency_s: float | None
    step_time_s: float | None
    price_per_hour: float | None
    #: measured step times, and one mean per repeat (MLPerf-trimmed when >= 5)
    step_times: Sequence[float]
    repeat_values: Sequence[float]


@dataclass(frozen=True)
class Comparison:
    a: Any
    b: Any
    #: what the speed-up is the ratio of: throughput, latency or step time
    basis: str
    speedup: float | None
    speedup_ci: Interval | None
    #: mean(A) / mean(B) of the compared values (step times or repeat means), with its CI
    time_ratio_ci: Interval | None
    price_performance: float | None
    price_performance_ci: Interval | None
    #: "repeat means" or "step times"
    values: str
    welch: WelchResult | None
    verdict: str
    tolerance: float = 0.0


def _scaled(ci: Interval | None, factor: float) -> Interval | None:
    if ci is None:
        return None
    return Interval(ci.mean * factor, ci.low * factor, ci.high * factor, ci.n, ci.confidence)


def _speedup(a: Measured, b: Measured) -> tuple[str, float | None]:
    if a.throughput and b.throughput and a.unit == b.unit:
        return "throughput", cost.speedup_from_rates(a.throughput, b.throughput)
    if a.latency_s and b.latency_s:
        return "latency", cost.speedup_from_times(a.latency_s, b.latency_s)
    if a.step_time_s and b.step_time_s:
        return "step time", cost.speedup_from_times(a.step_time_s, b.step_time_s)
    return "none", None


def verdict(ci: Interval | None, tolerance: float = 0.0) -> str:
    """Where the speed-up's CI lies against 1 ± tolerance (see the module doc)."""
    if ci is None:
        return UNKNOWN
    if ci.high < 1.0 - tolerance:
        return REGRESSION
    if ci.low > 1.0 + tolerance:
        return IMPROVEMENT
    return SAME


def compare(a: Measured, b: Measured, confidence: float = 0.95, tolerance: float = 0.0) -> Comparison:
    basis, sp = _speedup(a, b)
    use_repeats = len(a.repeat_values) >= 2 and len(b.repeat_values) >= 2
    xa, xb = (a.repeat_values, b.repeat_values) if use_repeats else (a.step_times, b.step_times)
    ci = raw = None
    if len(xa) >= 2 and len(xb) >= 2:
        raw = ratio_ci(xa, xb, confidence)
    if sp is not None and raw is not None and raw.mean > 0:
        ci = _scaled(raw, sp / raw.mean)
    pp = pp_ci = None
    if sp is not None and a.price_per_hour and b.price_per_hour:
        pp = cost.price_performance_ratio(sp, a.price_per_hour, b.price_per_hour)
        pp_ci = _scaled(ci, a.price_per_hour / b.price_per_hour)
    return Comparison(a, b, basis, sp, ci, raw, pp, pp_ci, "repeat means" if use_repeats else "step times",
                      welch(xa, xb, confidence) if len(xa) >= 2 and len(xb) >= 2 else None,
                      verdict(ci, tolerance), tolerance)
