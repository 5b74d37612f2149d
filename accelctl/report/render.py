"""Tables to text: rich (terminal), Markdown, CSV, JSON.  Deterministic output.

Human formats (rich, Markdown) format each cell by its column kind; CSV and JSON keep
raw numbers (seconds, bytes, fractions, USD) so that scripts never parse "86.6 ms".
CSV of several tables is still one table: one header, the union of the tables' columns in
the order they first appear, the first column (``table``) naming the table each row
belongs to, a cell empty where its table has no such column (``csv.DictReader`` reads it
whole; group by ``table``).  A row may override a column's kind for one cell with
a ``<key>_kind`` entry (the compare table mixes times and rates).  A ``time_ci`` cell becomes three CSV columns
(``<key>_s``, ``<key>_ci_low_s``, ``<key>_ci_high_s``); a rate with a unit gets a
``<key>_unit`` column.  Floats in CSV and JSON carry 12 significant digits.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from typing import Any

from accelctl.analysis import throughput
from accelctl.report.tables import Column, Table

DASH = "-"
_NUMERIC = {"int", "time", "time_ci", "rate", "pct", "ratio", "bytes", "usd", "hours", "num"}


def fmt_time(v: float) -> str:
    if v >= 1:
        return f"{v:.4g} s"
    if v >= 1e-3:
        return f"{v * 1e3:.4g} ms"
    return f"{v * 1e6:.4g} µs"


def fmt_hours(h: float) -> str:
    minutes = round(h * 60)
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{h * 60:.3g} min"


def fmt_num(v: float) -> str:
    return f"{v:,.2f}" if abs(v) >= 100 else f"{v:.4g}"


def fmt_usd(v: float) -> str:
    return f"${v:,.2f}" if abs(v) >= 0.01 else f"${v:.3g}"


def fmt_bytes(v: float) -> str:
    return f"{v / 2**30:.2f} GiB" if v >= 2**30 else f"{v / 2**20:.1f} MiB"


def cell(col: Column, row: dict[str, Any]) -> str:
    v = row.get(col.key)
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return DASH
    kind = row.get(f"{col.key}_kind") or col.kind  # a row may override its column's kind
    if kind == "text":
        return str(v)
    if kind == "int":
        return f"{int(v):,}"
    if kind == "time":
        return fmt_time(float(v))
    if kind == "time_ci":
        mean, low, high = v
        text = fmt_time(mean)
        if low is not None and high is not None and mean:
            below, above = f"{(mean - low) / mean * 100:.1f}", f"{(high - mean) / mean * 100:.1f}"
            # a log-scale interval reaches further above the mean than below it
            text += f" ± {below}%" if below == above else f" -{below}/+{above}%"
        return text
    if kind == "rate":
        return throughput.text(float(v), row.get(f"{col.key}_unit") or col.unit)
    if kind == "pct":
        return f"{float(v) * 100:.2f}%"
    if kind == "ratio":
        return f"×{float(v):.2f}"
    if kind == "bytes":
        return fmt_bytes(float(v))
    if kind == "usd":
        return fmt_usd(float(v))
    if kind == "hours":
        return fmt_hours(float(v))
    return fmt_num(float(v)) if isinstance(v, (int, float)) else str(v)


# --------------------------------------------------------------------------- markdown


def _md_escape(text: str) -> str:
    return text.replace("|", "\\|")


def to_markdown(tables: Sequence[Table]) -> str:
    out: list[str] = []
    for t in tables:
        out += [f"### {t.title}", ""]
        out.append("| " + " | ".join(_md_escape(c.header) for c in t.columns) + " |")
        out.append("|" + "|".join("---:" if c.kind in _NUMERIC else "---" for c in t.columns) + "|")
        for r in t.rows:
            out.append("| " + " | ".join(_md_escape(cell(c, r)) for c in t.columns) + " |")
        if t.notes:
            out.append("")
            out += [f"- {n}" for n in t.notes]
        out.append("")
    return "\n".join(out)


# --------------------------------------------------------------------------- csv


def _csv_fields(t: Table) -> list[tuple[str, Column, str]]:
    """(csv header, column, part) for each CSV column of a table."""
    fields: list[tuple[str, Column, str]] = []
    for c in t.columns:
        if c.kind == "time_ci":
            fields += [(f"{c.key}_s", c, "mean"), (f"{c.key}_ci_low_s", c, "low"), (f"{c.key}_ci_high_s", c, "high")]
            continue
        fields.append((c.key, c, "value"))
        if c.kind == "rate" and any(r.get(f"{c.key}_unit") for r in t.rows):
            fields.append((f"{c.key}_unit", c, "unit"))
    return fields


def _csv_value(row: dict[str, Any], col: Column, part: str) -> Any:
    v = row.get(col.key)
    if part == "unit":
        return row.get(f"{col.key}_unit") or ""
    if col.kind == "time_ci":
        if v is None:
            return ""
        x = v[("mean", "low", "high").index(part)]
        return "" if x is None else _g(x)
    if v is None:
        return ""
    return _g(v) if isinstance(v, float) else v


def _g(x: float) -> str:
    """A float for CSV/JSON: 12 significant digits (stable across platforms' last bits)."""
    return format(float(x), ".12g")


def to_csv(tables: Sequence[Table]) -> str:
    """One CSV table of ``tables``: ``table``, then the union of their columns."""
    per_table = [(t, {name: (c, part) for name, c, part in _csv_fields(t)}) for t in tables]
    header = list(dict.fromkeys(name for _, fields in per_table for name in fields))
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["table", *header])
    for t, fields in per_table:
        for r in t.rows:
            w.writerow([t.id, *(_csv_value(r, *fields[name]) if name in fields else "" for name in header)])
    return buf.getvalue()


# --------------------------------------------------------------------------- json


def _plain(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, float):
        return float(_g(v)) if math.isfinite(v) else None
    return v


def table_dict(t: Table) -> dict[str, Any]:
    return {"id": t.id, "title": t.title,
            "columns": [{"key": c.key, "header": c.header, "kind": c.kind} for c in t.columns],
            "rows": [_plain(r) for r in t.rows], "notes": list(t.notes)}


def json_data(tables: Sequence[Table], **extra: Any) -> dict[str, Any]:
    """``tables`` (and ``extra`` facts, e.g. compare's verdict) as JSON data."""
    return {"tables": [table_dict(t) for t in tables], **_plain(extra)}


def to_json(tables: Sequence[Table], **extra: Any) -> str:
    return json.dumps(json_data(tables, **extra), indent=2, sort_keys=False)


# --------------------------------------------------------------------------- rich


#: which columns stay longest when a table is narrower than its content (0 first; see
#: ``accelctl.report.width``): who and what ran, its step time and throughput, then the rest
PRIORITY = {
    "target": 0, "label": 0, "metric": 0, "publication": 0, "claim": 1,
    "step_time": 1, "throughput": 2, "a": 1, "b": 1, "ratio": 2, "efficiency": 1, "published": 2,
    "recomputed": 2, "status": 2, "source": 3, "devices": 3, "accelerators": 3, "per_device": 6,
    "per_accelerator": 4, "speedup": 5, "precision": 5, "batch": 6, "mfu": 7, "mem_bytes": 7, "latency_s": 3,
    "ttft_s": 4, "per_token_s": 4, "ci_low": 3, "ci_high": 3, "price_per_hour": 8, "per_dollar": 8,
    "cost_per_million": 9, "projected_hours": 9, "projected_cost": 9, "nodes": 6, "ideal_speedup": 7,
    "published_per_device": 8, "published_efficiency": 8, "estimated": 4, "estimate_error": 4,
    "estimate_bound": 6, "note": 9,
}


def print_rich(tables: Sequence[Table], console: Any = None, width: int | None = None,
               ids: dict[str, str] | None = None) -> None:
    """``tables`` as rich tables fitted to ``width`` (None: every column, unbounded, as
    ``--wide``); run ids in ``ids`` ({full: short}) are shown short (see ``accelctl.report.width``)."""
    from rich.text import Text

    from accelctl.report.width import FitColumn, console_for, fit_table, left_out_note, shorten, wrap_note

    console = console or console_for(width)
    ids = ids or {}
    for t in tables:
        columns = [FitColumn(c.header, PRIORITY.get(c.key, 5), "right" if c.kind in _NUMERIC else "left",
                             no_wrap=c.key == "source" and bool(ids)) for c in t.columns]
        rows = [[shorten(cell(c, r), ids) if c.key == "source" else cell(c, r) for c in t.columns] for r in t.rows]
        rt, dropped = fit_table(shorten(t.title, ids), columns, rows, width)
        console.print(rt)
        for n in [*(shorten(n, ids) for n in t.notes), *([left_out_note(dropped)] if dropped else [])]:
            console.print(Text(wrap_note(n, width), style="dim"), soft_wrap=width is None)
        console.print()


def render(tables: Sequence[Table], fmt: str, **extra: Any) -> str | None:
    """Text of ``tables`` in ``fmt`` (md, csv, json); ``rich`` prints and returns None."""
    if fmt == "md":
        return to_markdown(tables)
    if fmt == "csv":
        return to_csv(tables)
    if fmt == "json":
        return to_json(tables, **extra)
    if fmt == "rich":
        print_rich(tables)
        return None
    raise ValueError(f"unknown format {fmt!r} (rich, md, csv, json)")


# --------------------------------------------------------------------------- accelctl runs


def _started(iso: str) -> str:
    """``2026-01-01T00:04:00+00:00`` -> ``2026-01-01 00:04`` (UTC, as stored)."""
    return iso[:16].replace("T", " ") if iso else DASH


def print_runs(runs: Sequence[Any], width: int | None, universe: Sequence[str] = ()) -> None:
    """``accelctl runs``: one row per stored run, fitted to ``width`` with short ids (None:
    ``--wide``, every column and full ids).  Priorities: id, workload, target, status, then
    step time and throughput, then backend and start time.  A scheduler's job (scheduler,
    id, state, exit code) is a second line under the status."""
    from accelctl.report.width import FitColumn, console_for, fit_table, left_out_note, short_ids, wrap_note

    ids = short_ids([r.id for r in runs], universe) if width is not None else {}
    columns = [FitColumn("id", 0, no_wrap=True), FitColumn("workload", 0), FitColumn("target", 0),
               FitColumn("status", 1), FitColumn("median step", 1, "right"), FitColumn("throughput", 2, "right"),
               FitColumn("backend", 4), FitColumn("started (UTC)", 5)]
    rows = []
    for r in runs:
        med = f"{r.median_step_s * 1e3:.1f} ms" if getattr(r, "median_step_s", None) else DASH
        thr = throughput.text(r.throughput, r.throughput_unit, DASH)
        status = f"{r.status}\n{r.scheduler.short()}" if r.scheduler is not None else r.status
        rows.append([ids.get(r.id, r.id), r.workload, r.target, status, med, thr, r.backend, _started(r.started)])
    table, dropped = fit_table(f"runs ({len(runs)})", columns, rows, width)
    console = console_for(width)
    console.print(table)
    if dropped:
        console.print(wrap_note(left_out_note(dropped), width), style="dim")
