"""``accelctl compare``'s table: the comparison of two entries (``accelctl.analysis.compare``:
speed-up and price-performance with 95 % CIs, and a verdict), as rows and notes."""

from __future__ import annotations

from typing import Any

from accelctl.analysis.ci import Interval
import statistics

from accelctl.analysis.compare import (
    BASIS_RUNS,
    IMPROVEMENT,
    INCONCLUSIVE,
    REFUSED,
    REGRESSION,
    SAME,
    UNKNOWN,
    Comparison,
    compare,
)
from accelctl.report.tables import Column, Table

__all__ = ["IMPROVEMENT", "INCONCLUSIVE", "REFUSED", "REGRESSION", "SAME", "UNKNOWN", "Comparison", "compare", "compare_table"]


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


def _ratio(x: float | None, y: float | None) -> float | None:
    return x / y if x and y else None


def compare_table(c: Comparison) -> Table:
    """Rows: the per-run medians the verdict is drawn from (with the CI), then the runs'
    mean figures (ratios only: their spread is within runs), then the prices."""
    a, b = c.a, c.b
    rows = []
    if c.basis == BASIS_RUNS:
        ma, mb = (statistics.fmean(e.run_values) for e in (a, b))
        rows.append(_row("time per sample (run medians)", ma, mb, "time", ratio=c.speedup, ci=c.speedup_ci))
    rows.append(_row("runs", len(a.run_values), len(b.run_values), "int"))
    rows.append(_row("step time (mean)", a.step_time_s, b.step_time_s, "time",
                     ratio=_ratio(a.step_time_s, b.step_time_s), ci=c.speedup_ci if c.basis == "step time" else None))
    if a.throughput is not None or b.throughput is not None:
        rows.append(_row("throughput", a.throughput, b.throughput, "rate", a.unit, _ratio(b.throughput, a.throughput)
                         if a.unit == b.unit else None))
    if a.latency_s is not None or b.latency_s is not None:
        rows.append(_row("latency (mean)", a.latency_s, b.latency_s, "time", ratio=_ratio(a.latency_s, b.latency_s)))
    if a.price_per_hour or b.price_per_hour:
        rows.append(_row("price per hour", a.price_per_hour, b.price_per_hour, "usd"))
        rows.append(_row("per USD", a.per_dollar, b.per_dollar, "rate", a.unit.split("/")[0],
                         c.price_performance, c.price_performance_ci))
    sp = "-" if c.speedup is None else f"×{c.speedup:.3f}"
    ci = "" if c.speedup_ci is None else f" (95% CI ×{c.speedup_ci.low:.3f} – ×{c.speedup_ci.high:.3f})"
    na, nb = c.runs
    notes = [
        f"A = {a.source} ({a.name}), B = {b.source} ({b.name})",
        f"speed-up of B over A by {c.basis}: {sp}{ci}; "
        + ("inconclusive" if c.verdict == INCONCLUSIVE else f"verdict: {c.verdict}"
           + (f" (tolerance ±{c.tolerance:.0%})" if c.tolerance else "")),
        f"CI: over the {c.values} (A: {na}, B: {nb}), delta method on log(mean A / mean B), Student t with "
        "Welch-Satterthwaite df"
        + (f"; Welch t = {c.welch.t:.3g}, df = {c.welch.df:.3g}, p = {c.welch.p_value:.3g}" if c.welch else ""),
    ]
    if c.reason:
        notes.append(f"no verdict: {c.reason}")
    notes += [f"FORCED past [{r.code}]: {r.message}" for r in c.refusals]
    if c.price_performance is not None:
        notes.append(f"price-performance of B over A: ×{c.price_performance:.3f} (speed-up x price A / price B)")
    if a.ran != b.ran:
        notes.append(f"NOT THE SAME MODEL: A ran {a.ran or 'the real model'}, B ran {b.ran or 'the real model'}; "
                     "the ratio compares different models")
    return Table("compare", f"compare {a.name} ({a.source}) → {b.name} ({b.source})", list(COLUMNS), rows, notes)

