"""Compare two entries: speed-up and price-performance with 95 % CIs, and a verdict.

A is the baseline, B the candidate.

* speed-up of B over A = throughput B / throughput A (same unit), else latency A /
  latency B, else step time A / step time B (``accelctl.analysis.cost``).
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

from dataclasses import dataclass
from typing import Any

from accelctl.analysis import cost
from accelctl.analysis.ci import Interval, WelchResult, ratio_ci, welch
from accelctl.report.entry import Entry
from accelctl.report.tables import Column, Table

REGRESSION, IMPROVEMENT, SAME, UNKNOWN = "regression", "improvement", "no significant difference", "unknown"


@dataclass(frozen=True)
class Comparison:
    a: Entry
    b: Entry
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


def _speedup(a: Entry, b: Entry) -> tuple[str, float | None]:
    if a.throughput and b.throughput and a.unit == b.unit:
        return "throughput", cost.speedup_from_rates(a.throughput, b.throughput)
    if a.latency_s and b.latency_s:
        return "latency", cost.speedup_from_times(a.latency_s, b.latency_s)
    if a.step_time_s and b.step_time_s:
        return "step time", cost.speedup_from_times(a.step_time_s, b.step_time_s)
    return "none", None


def compare(a: Entry, b: Entry, confidence: float = 0.95, tolerance: float = 0.0) -> Comparison:
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
    if ci is None:
        verdict = UNKNOWN
    elif ci.high < 1.0 - tolerance:
        verdict = REGRESSION
    elif ci.low > 1.0 + tolerance:
        verdict = IMPROVEMENT
    else:
        verdict = SAME
    return Comparison(a, b, basis, sp, ci, raw, pp, pp_ci, "repeat means" if use_repeats else "step times",
                      welch(xa, xb, confidence) if len(xa) >= 2 and len(xb) >= 2 else None, verdict, tolerance)


COLUMNS = [
    Column("metric", "metric"),
    Column("a", "A", "num"),
    Column("b", "B", "num"),
    Column("ratio", "B vs A (>1: B better)", "ratio"),
    Column("ci_low", "95% CI low", "ratio"),
    Column("ci_high", "95% CI high", "ratio"),
]


def _row(metric: str, a: Any, b: Any, kind: str, unit: str = "", ratio: float | None = None,
         ci: Interval | None = None) -> dict[str, Any]:
    return {"metric": metric, "a": a, "b": b, "a_kind": kind, "b_kind": kind, "a_unit": unit, "b_unit": unit,
            "ratio": ratio, "ci_low": ci.low if ci else None, "ci_high": ci.high if ci else None}


def compare_table(c: Comparison) -> Table:
    a, b = c.a, c.b
    rows = [_row("step time (mean)", a.step_time_s, b.step_time_s, "time",
                 ratio=(a.step_time_s / b.step_time_s) if a.step_time_s and b.step_time_s else None,
                 ci=c.time_ratio_ci)]
    if a.throughput is not None or b.throughput is not None:
        on = c.basis == "throughput"
        rows.append(_row("throughput", a.throughput, b.throughput, "rate", a.unit,
                         c.speedup if on else None, c.speedup_ci if on else None))
    if a.latency_s is not None or b.latency_s is not None:
        rows.append(_row("latency (mean)", a.latency_s, b.latency_s, "time",
                         c.speedup if c.basis == "latency" else None, c.speedup_ci if c.basis == "latency" else None))
    if a.price_per_hour or b.price_per_hour:
        rows.append(_row("price per hour", a.price_per_hour, b.price_per_hour, "usd"))
        rows.append(_row("per USD", a.per_dollar, b.per_dollar, "rate", a.unit.split("/")[0],
                         c.price_performance, c.price_performance_ci))
    sp = "-" if c.speedup is None else f"×{c.speedup:.3f}"
    ci = "" if c.speedup_ci is None else f" (95% CI ×{c.speedup_ci.low:.3f} – ×{c.speedup_ci.high:.3f})"
    notes = [
        f"A = {a.source} ({a.name}), B = {b.source} ({b.name})",
        f"speed-up of B over A by {c.basis}: {sp}{ci}; verdict: {c.verdict}"
        + (f" (tolerance ±{c.tolerance:.0%})" if c.tolerance else ""),
        f"CI: delta method on log(mean A / mean B) over the {c.values}, Welch-Satterthwaite df"
        + (f"; Welch t = {c.welch.t:.3g}, df = {c.welch.df:.3g}, p = {c.welch.p_value:.3g}" if c.welch else ""),
    ]
    if c.price_performance is not None:
        notes.append(f"price-performance of B over A: ×{c.price_performance:.3f} (speed-up x price A / price B)")
    return Table("compare", f"compare {a.name} ({a.source}) → {b.name} ({b.source})", list(COLUMNS), rows, notes)

