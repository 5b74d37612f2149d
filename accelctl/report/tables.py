"""Report tables as data: columns with kinds, rows of raw values, notes.

Rendering (rich, Markdown, CSV, JSON) lives in ``accelctl.report.render``; plots in
``accelctl.report.plot``.  Builders here:

* ``report_table(entries)``: one table per workload (target, devices, batch, precision,
  step time with its CI, throughput, per device, latency, MFU, memory, price, throughput
  per dollar, cost per million units, projected job cost);
* ``scaling_tables(entries)``: per workload and device kind with two or more device
  counts, the scaling efficiency table (``accelctl.report.scaling``);
* ``scale_table(title, rows)``: the scaling table of given rows (runs or a seed's).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelctl.analysis import throughput
from accelctl.report.entry import Entry
from accelctl.report.scaling import ScalePoint, ScaleRow, scaling_table



@dataclass(frozen=True)
class Column:
    key: str
    header: str
    kind: str = "text"
    #: unit shown after a rate ("samples/s"); for rates the row may override via "<key>_unit"
    unit: str = ""


@dataclass
class Table:
    id: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def drop_empty_columns(self, keep: Iterable[str] = ()) -> "Table":
        """Drop the columns no row has a value for (keeping ``keep``)."""
        keep = set(keep)
        cols = [c for c in self.columns if c.key in keep or any(r.get(c.key) not in (None, "") for r in self.rows)]
        return Table(self.id, self.title, cols, self.rows, self.notes)


REPORT_COLUMNS = [
    Column("target", "target"),
    Column("source", "run"),
    Column("devices", "devices", "int"),
    Column("batch", "batch", "int"),
    Column("precision", "precision"),
    Column("step_time", "step time", "time_ci"),
    Column("throughput", "throughput", "rate"),
    Column("per_device", "per device", "rate"),
    Column("latency_s", "latency", "time"),
    Column("ttft_s", "first token", "time"),
    Column("per_token_s", "per token", "time"),
    Column("mfu", "MFU", "pct"),
    Column("mem_bytes", "memory", "bytes"),
    Column("price_per_hour", "USD/h", "usd"),
    Column("per_dollar", "per USD", "rate"),
    Column("cost_per_million", "USD per 1M", "usd"),
    Column("projected_hours", "job time", "hours"),
    Column("projected_cost", "job cost", "usd"),
]


def entry_row(e: Entry) -> dict[str, Any]:
    ci = e.step_time_ci
    return {
        "target": e.name, "source": e.source, "devices": e.devices, "batch": e.batch, "precision": e.precision,
        "step_time": None if e.step_time_s is None else (e.step_time_s, ci.low if ci else None,
                                                         ci.high if ci else None),
        "throughput": e.throughput, "throughput_unit": e.unit,
        "per_device": e.per_device, "per_device_unit": e.unit,
        "latency_s": e.latency_s, "ttft_s": e.ttft_s, "per_token_s": e.per_token_s,
        "mfu": e.mfu, "mem_bytes": e.mem_bytes, "price_per_hour": e.price_per_hour,
        "per_dollar": e.per_dollar, "per_dollar_unit": e.unit.split("/")[0],
        "cost_per_million": e.cost_per_million, "cost_per_million_unit": e.unit.split("/")[0],
        "projected_hours": e.projected_hours, "projected_cost": e.projected_cost,
        **({"publication": e.publication} if e.publication else {}),
    }


def _methods(entries: Sequence[Entry]) -> list[str]:
    notes = []
    warm = [e for e in entries if e.warmup_steps]
    if warm:
        parts = "; ".join(f"{e.name} ({e.source[-4:]}): {e.warmup_steps} step{'s' if e.warmup_steps != 1 else ''}, "
                          f"{e.warmup_time_s:.3g} s" for e in warm)
        notes.append(f"warm-up excluded from every figure ({parts})")
    methods = sorted({e.ci_method for e in entries if e.step_time_ci is not None and e.ci_method})
    if methods:
        notes.append("step time: steady-state mean, its 95% CI -below/+above it in % (on the log scale: never "
                     "below zero; " + "; ".join(methods) + ")")
    if any(e.throughput is not None and not e.publication for e in entries):
        notes.append(f"throughput: the {throughput.STATISTIC}' rates (per device: that / devices)")
    if any(e.per_dollar is not None for e in entries):
        notes.append("per USD = throughput x 3600 / price per hour; USD per 1M = price / 3600 / throughput x 1e6")
    elif entries and not any(e.publication for e in entries):
        notes.append("no price per hour for these targets: cost columns left out "
                     "(give the target 'price = ... usd/h' or a catalogued instance)")
    if any(e.projected_hours is not None and e.work_samples for e in entries):
        notes.append("job time = task train_steps x the reference global batch (the workload's first non-CPU target's, "
                     "else its first's) = samples, equal on every target / throughput; job cost = job time x price "
                     "per hour")
    elif any(e.projected_hours is not None for e in entries):
        notes.append("job time = task train_steps x mean step time; job cost = job time x price per hour")
    return notes


def report_table(workload: str, entries: Sequence[Entry], title: str | None = None, keep: Iterable[str] = ()) -> Table:
    """The per-workload table of entries (runs and/or published figures)."""
    rows = [entry_row(e) for e in entries]
    table = Table(id=f"report-{workload}", title=title or f"workload {workload}", columns=list(REPORT_COLUMNS),
                  rows=rows, notes=_methods(entries))
    return table.drop_empty_columns(keep={"target", "source", *keep})


def by_workload(entries: Iterable[Entry]) -> dict[str, list[Entry]]:
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.workload, []).append(e)
    return out


def report_tables(entries: Sequence[Entry]) -> list[Table]:
    return [report_table(w, es) for w, es in sorted(by_workload(entries).items())]


# --------------------------------------------------------------------------- scaling


SCALE_COLUMNS = [
    Column("label", "point"),
    Column("source", "run"),
    Column("nodes", "nodes", "int"),
    Column("accelerators", "devices", "int"),
    Column("throughput", "throughput", "rate"),
    Column("per_accelerator", "per device", "rate"),
    Column("speedup", "speed-up", "ratio"),
    Column("ideal_speedup", "ideal", "ratio"),
    Column("efficiency", "efficiency", "pct"),
    Column("published_per_device", "published per device", "num"),
    Column("published_efficiency", "published efficiency", "pct"),
]


def scale_table(id_: str, title: str, rows: Sequence[ScaleRow], unit: str,
                published: dict[str, dict[str, Any]] | None = None, notes: Sequence[str] = ()) -> Table:
    published = published or {}
    out = []
    for r in rows:
        pub = published.get(r.point.label, {})
        eff = pub.get("efficiency_pct")
        out.append({
            "label": r.point.label, "source": r.point.source, "nodes": r.point.nodes,
            "accelerators": r.point.accelerators, "throughput": r.point.throughput, "throughput_unit": unit,
            "per_accelerator": r.per_accelerator, "per_accelerator_unit": unit, "speedup": r.speedup,
            "ideal_speedup": r.ideal_speedup, "efficiency": r.efficiency,
            "published_per_device": pub.get("per_device"),
            "published_efficiency": None if eff is None else eff / 100.0,
            **({"publication": r.point.publication} if r.point.publication else {}),
        })
    base = rows[0].point if rows else None
    head = [f"efficiency = per-device throughput / per-device throughput at the baseline, {base.label}"] if base else []
    return Table(id_, title, list(SCALE_COLUMNS), out, [*head, *notes]).drop_empty_columns()


def scaling_groups(entries: Sequence[Entry]) -> list[tuple[str, str, str, list[ScaleRow]]]:
    """(workload, device, unit, rows) for each workload and device kind measured at two or
    more device counts.  Entries are newest first (as ``list_runs`` gives them); at each
    (nodes, devices) the newest ok run with a throughput is the point."""
    groups: dict[tuple[str, str], dict[tuple[int, int], Entry]] = {}
    for e in entries:
        if e.throughput is None or not e.devices or e.status != "ok":
            continue
        groups.setdefault((e.workload, e.device), {}).setdefault((e.nodes or 1, e.devices), e)
    out = []
    for (workload, device), points in sorted(groups.items()):
        if len({k[1] for k in points}) < 2:
            continue
        pts = [ScalePoint(label=f"{n} x {d // max(n, 1)}" if n > 1 else f"{d} device{'s' if d > 1 else ''}",
                          accelerators=d, nodes=n, throughput=e.throughput, source=e.source)
               for (n, d), e in points.items()]
        out.append((workload, device, next(iter(points.values())).unit, scaling_table(pts)))
    return out


def scaling_tables(entries: Sequence[Entry]) -> list[Table]:
    """One scaling table per (workload, device kind) measured at two or more device counts."""
    return [scale_table(f"scaling-{w}-{d}", f"scaling: workload {w} on {d}", rows, unit)
            for w, d, unit, rows in scaling_groups(entries)]
