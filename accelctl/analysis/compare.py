"""Compare two measured configurations: speed-up and price-performance with 95 % CIs, and a
verdict that respects run-to-run noise.  The one comparison: ``accelctl compare`` and the TUI's
compare screen both call ``compare``.

A is the baseline, B the candidate (anything with ``Measured``'s fields).  The values compared
are one per independent run (each run's median step time per sample), never the steps of one
process, whose spread understates the noise.  Speed-up = ``mean(A) / mean(B)`` with
``ci.ratio_ci``; the verdict needs the whole CI beyond ``1 ± tolerance`` and at least
``MIN_RUNS`` runs a side, else "inconclusive" (never a pass).  Runs not ``ok`` or of changed
workloads are refused (``comparability``) unless ``force``.  Details: docs/internals/estimate-backends-worker.md.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from accelctl.analysis import cost
from accelctl.analysis.ci import Interval, WelchResult, ratio_ci, welch

REGRESSION, IMPROVEMENT, SAME, UNKNOWN = "regression", "improvement", "no significant difference", "unknown"
REFUSED = "not compared"
#: no verdict: too few independent runs a side, or no interval (not "no significant difference")
INCONCLUSIVE = "inconclusive"

#: diagnostic codes of the refusals: a side is not a complete measurement; the two
#: sides are not the same workload
NOT_COMPLETE, NOT_SAME_WORKLOAD = "E226", "E227"

#: independent runs per side below which no verdict is given (with 3 vs 3 the t quantile
#: has about 4 df; with 2 the spread of two values says next to nothing about the noise)
MIN_RUNS = 3

#: relative change below which even a significant difference is called "no significant
#: difference" (asv's ``factor``, 1.10 by default there): a 95% interval excludes 1 by
#: chance in 1 comparison of 20 of the same configuration, and on a shared machine
#: run-to-run drift of a few percent is real but not the change being asked about.  Two
#: series of one configuration are then called a change only if their interval clears
#: ±5% as a whole; ``--tolerance 0`` asks the strict question.
TOLERANCE = 0.05


class Measured(Protocol):
    """What a comparison reads of each side."""

    workload: str
    #: where the figures come from (a run id, a series)
    source: str
    #: ok, or why the side is not a complete measurement ("incomplete", "unreadable: ...")
    status: str
    #: what the workload computes (model, task, data, optimizer, seed) as one canonical text
    configuration: str
    #: steady-state throughput in ``unit``, mean latency of one call, mean step time (s)
    throughput: float | None
    unit: str
    latency_s: float | None
    step_time_s: float | None
    price_per_hour: float | None
    #: one value per independent run: its steady-state median step time per sample (s)
    run_values: Sequence[float]


@dataclass(frozen=True)
class Refusal:
    #: NOT_COMPLETE or NOT_SAME_WORKLOAD
    code: str
    message: str

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class Comparison:
    a: Any
    b: Any
    #: what the speed-up is the ratio of: the per-run medians (BASIS_RUNS), or without them
    #: throughput, latency or step time
    basis: str
    speedup: float | None
    speedup_ci: Interval | None
    #: mean(A) / mean(B) of the per-run values, with its CI (None with < 2 runs a side)
    time_ratio_ci: Interval | None
    price_performance: float | None
    price_performance_ci: Interval | None
    #: what the interval is over
    values: str
    welch: WelchResult | None
    verdict: str
    tolerance: float = TOLERANCE
    #: why the runs should not be compared (empty: comparable); with ``force`` they were
    refusals: tuple[Refusal, ...] = ()
    #: why there is no verdict although the runs are comparable ("" otherwise)
    reason: str = ""

    @property
    def runs(self) -> tuple[int, int]:
        return len(self.a.run_values), len(self.b.run_values)


#: the basis of a speed-up drawn from per-run values
BASIS_RUNS = "per-run median time per sample"


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


def verdict(ci: Interval | None, tolerance: float = TOLERANCE) -> str:
    """Where the speed-up's CI lies against 1 ± tolerance (see the module doc)."""
    if ci is None:
        return UNKNOWN
    if ci.high < 1.0 - tolerance:
        return REGRESSION
    if ci.low > 1.0 + tolerance:
        return IMPROVEMENT
    return SAME


def comparability(a: Measured, b: Measured) -> list[Refusal]:
    """Why A and B should not be compared (empty when they may be)."""
    out = [Refusal(NOT_COMPLETE, f"{name} ({side.source}) is {side.status}: only complete runs are compared")
           for name, side in (("A", a), ("B", b)) if side.status != "ok"]
    if a.workload != b.workload:
        out.append(Refusal(NOT_SAME_WORKLOAD, f"different workloads: A ran {a.workload or '?'}, "
                                              f"B ran {b.workload or '?'}"))
    elif a.configuration != b.configuration:
        out.append(Refusal(NOT_SAME_WORKLOAD, f"workload {a.workload} is not the same in both runs (its model, "
                                              "task, data, optimizer or seed changed)"))
    return out


def too_few(na: int, nb: int, min_runs: int = MIN_RUNS) -> str:
    return (f"too few independent runs for a verdict: A has {na}, B has {nb}; {min_runs} of each are needed "
            f"(measure {{ repeat = {min_runs} }} runs {min_runs} processes)")


def compare(a: Measured, b: Measured, confidence: float = 0.95, tolerance: float = TOLERANCE, *,
            force: bool = False, min_runs: int = MIN_RUNS) -> Comparison:
    xa, xb = list(a.run_values), list(b.run_values)
    ci = ratio_ci(xa, xb, confidence) if len(xa) >= 2 and len(xb) >= 2 else None
    if xa and xb and min(xa + xb) > 0:
        basis, sp = BASIS_RUNS, statistics.fmean(xa) / statistics.fmean(xb)
    else:
        basis, sp = _speedup(a, b)
    raw = ci
    pp = pp_ci = None
    if sp is not None and a.price_per_hour and b.price_per_hour:
        pp = cost.price_performance_ratio(sp, a.price_per_hour, b.price_per_hour)
        pp_ci = _scaled(ci, a.price_per_hour / b.price_per_hour)
    refusals = tuple(comparability(a, b))
    reason = ""
    if refusals and not force:
        result = REFUSED
    elif min(len(xa), len(xb)) < min_runs:
        result, reason = INCONCLUSIVE, too_few(len(xa), len(xb), min_runs)
    else:
        result = verdict(ci, tolerance)
        if result == UNKNOWN:
            result, reason = INCONCLUSIVE, "no interval: a side has no measured step times"
    return Comparison(a, b, basis, sp, ci, raw, pp, pp_ci, "per-run medians of independent runs",
                      welch(xa, xb, confidence) if len(xa) >= 2 and len(xb) >= 2 else None,
                      result, tolerance, refusals, reason)
