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
            text += f" ± {(high - low) / 2 / mean * 100:.1f}%"
        return text
    if kind == "rate":
        unit = row.get(f"{col.key}_unit") or col.unit
        return fmt_num(float(v)) + (f" {unit}" if unit else "")
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


def print_rich(tables: Sequence[Table], console: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text

    console = console or Console()
    for t in tables:
        rt = RichTable(title=t.title, title_style="bold", title_justify="left")
        for c in t.columns:
            rt.add_column(c.header, justify="right" if c.kind in _NUMERIC else "left", overflow="fold")
        for r in t.rows:
            rt.add_row(*(Text(cell(c, r)) for c in t.columns))
        console.print(rt)
        for n in t.notes:
            console.print(Text(f"  {n}", style="dim"))
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
