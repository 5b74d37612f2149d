"""The seeds' published figures (``reference.json``), recomputed by the report's own code.

Raw figures become ``Entry`` objects (``entries`` tables) or ``ScalePoint`` objects
(``scaling`` tables); every derived figure a seed printed is a *claim* recomputed with
``accelctl.analysis.cost``, ``accelctl.report.scaling`` and ``accelctl.analysis.compare``,
exactly as for a user's runs, then matched against the printed value:

* ``round``: the recomputed value printed with the seed's decimals equals the seed's;
* ``approx``: within ``tolerance`` (the seed wrote "~");
* ``at_least``: the seed wrote "more than".

A row of an ``entries`` table fills in what it lacks: step time = units per step /
throughput, or job time / train_steps; throughput = units per step / step time
(units per step = ``units_per_step``, else ``batch``).  ``derive`` makes an implied
row: ``{"from": row, "speedup": [g...], "slowdown": [f...]}`` divides (multiplies) the
row's step time by each factor; ``{"price_performance_vs": row, "ratio": r}`` sets the
throughput that gives ``r`` times that row's price-performance at this row's price.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from accelctl.analysis import cost
from accelctl.analysis.compare import compare
from accelctl.report.entry import PUBLISHED, Entry
from accelctl.report.scaling import ScalePoint, ScaleRow, scaling_table
from accelctl.report.tables import Column, Table, report_table, scale_table

_ENTRY_KEYS = ("device", "instance", "devices", "nodes", "batch", "precision", "unit", "price_per_hour",
               "train_steps", "units_per_step", "task")


@functools.lru_cache(maxsize=1)
def load_reference() -> dict[str, Any]:
    """The parsed ``reference.json`` shipped in this package."""
    text = resources.files("accelctl.report").joinpath("reference.json").read_text(encoding="utf-8")
    return json.loads(text)


def _complete(row: dict[str, Any], done: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Fill a row's step time and throughput from what it states or derives."""
    r = dict(row)
    d = r.pop("derive", None) or {}
    if "from" in d:
        base = done[d["from"]]
        r = {**{k: base[k] for k in _ENTRY_KEYS if k in base}, **r}
        step = base["step_time_s"]
        for g in d.get("speedup", []):
            step /= g
        for f in d.get("slowdown", []):
            step *= f
        r["step_time_s"] = step
    elif "price_performance_vs" in d:
        base = done[d["price_performance_vs"]]
        per_usd_hour = cost.price_performance(base["throughput"], base["price_per_hour"])
        r["throughput"] = d["ratio"] * per_usd_hour * r["price_per_hour"]
    units = r.get("units_per_step", r.get("batch"))
    step = r.get("step_time_s", r.get("latency_s"))
    if step is None and r.get("throughput") and units:
        step = units / r["throughput"]
    if step is None and r.get("job_time_s") and r.get("train_steps"):
        step = r["job_time_s"] / r["train_steps"]
    r["step_time_s"] = step
    if r.get("throughput") is None and step and units:
        r["throughput"] = units / step
    return r


def publication(seed: str) -> str:
    """The short name a report shows for a seed's publication ("HF Gaudi2 blog"): never "seed
    000", which reads as the workload's random ``seed``."""
    return load_reference()["seeds"][seed]["name"]


def table_title(table: dict[str, Any]) -> str:
    """A seed table's title as printed: its publication's name, then what the table holds."""
    return f"{publication(table['seed'])}: {table['title']}"


def _entry(table: dict[str, Any], r: dict[str, Any]) -> Entry:
    workloads = table.get("workloads") or [table["id"]]
    return Entry(
        workload=workloads[0], target=r.get("target", r["id"]), source=PUBLISHED,
        publication=publication(table["seed"]), label=r.get("label", ""),
        device=r.get("device", ""), instance=r.get("instance", ""), devices=r.get("devices"), nodes=r.get("nodes"),
        batch=r.get("batch"), precision=r.get("precision", ""), unit=r.get("unit", "samples/s"),
        step_time_s=r.get("step_time_s"), throughput=r.get("throughput"), latency_s=r.get("latency_s"),
        price_per_hour=r.get("price_per_hour"), train_steps=r.get("train_steps"), published=r.get("published", {}),
    )


def table_entries(table: dict[str, Any]) -> dict[str, Entry]:
    """Row id -> Entry of an ``entries`` table, implied rows included."""
    done: dict[str, dict[str, Any]] = {}
    for row in table["rows"]:
        done[row["id"]] = _complete(row, done)
    return {rid: _entry(table, r) for rid, r in done.items()}


def table_scaling(table: dict[str, Any]) -> dict[str, ScaleRow]:
    """Row id -> ScaleRow of a ``scaling`` table (baseline: fewest accelerators)."""
    points = {r["id"]: ScalePoint(label=r["label"], accelerators=r["devices"], nodes=r.get("nodes", 1),
                                  throughput=r["throughput"], source=PUBLISHED,
                                  publication=publication(table["seed"])) for r in table["rows"]}
    rows = scaling_table(list(points.values()))
    by_point = {id(r.point): r for r in rows}
    return {rid: by_point[id(p)] for rid, p in points.items()}


# --------------------------------------------------------------------------- claims


@dataclass(frozen=True)
class Claim:
    id: str
    seed: str
    section: str
    text: str
    published: float | None
    recomputed: float | None
    #: reproduced, not reproduced, published only (no raw figures), derived (no printed value)
    status: str
    expect: str
    note: str = ""


def _lookup(ref: dict[str, Any]) -> dict[str, Any]:
    """'table/row' -> Entry or ScaleRow, for every table."""
    out: dict[str, Any] = {}
    for t in ref["tables"]:
        rows = table_scaling(t) if t["kind"] == "scaling" else table_entries(t)
        out.update({f"{t['id']}/{rid}": v for rid, v in rows.items()})
    return out


def recompute(claim: dict[str, Any], rows: dict[str, Any]) -> float | None:
    formula = claim.get("formula")
    if formula is None:
        return None
    if formula in ("efficiency", "per_device"):
        row: ScaleRow = rows[claim["row"]]
        return row.efficiency if formula == "efficiency" else row.per_accelerator
    if formula == "step_time":
        return rows[claim["row"]].step_time_s
    a, b = rows[claim["a"]], rows[claim["b"]]
    if formula == "price_performance_ratio":
        return compare(a, b).price_performance
    if formula == "speedup":
        by = claim["by"]
        if by == "throughput":
            return cost.speedup_from_rates(a.throughput, b.throughput)
        if by == "job_time":
            return cost.speedup_from_times(a.projected_hours, b.projected_hours)
        attr = {"latency": "latency_s", "step_time": "step_time_s"}[by]
        return cost.speedup_from_times(getattr(a, attr), getattr(b, attr))
    raise ValueError(f"claim {claim['id']}: unknown formula {formula!r}")


def match(claim: dict[str, Any], value: float | None) -> str:
    pub = claim.get("published")
    if value is None:
        return "published only"
    if pub is None:
        return "derived"
    v = value * claim.get("scale", 1)
    kind = claim["match"]
    if kind == "round":
        d = claim["decimals"]
        ok = f"{v:.{d}f}" == f"{pub:.{d}f}"
    elif kind == "approx":
        ok = abs(v - pub) <= claim["tolerance"]
    elif kind == "at_least":
        ok = v >= pub
    else:
        raise ValueError(f"claim {claim['id']}: unknown match {kind!r}")
    return "reproduced" if ok else "not reproduced"


def claims() -> list[Claim]:
    ref = load_reference()
    rows = _lookup(ref)
    out = []
    for c in ref["claims"]:
        value = recompute(c, rows)
        scaled = None if value is None else value * c.get("scale", 1)
        out.append(Claim(c["id"], c["seed"], c["section"], c["text"], c.get("published"), scaled,
                         match(c, value), c["expect"], c.get("note", "")))
    return out


# --------------------------------------------------------------------------- tables


CLAIM_COLUMNS = [
    Column("publication", "publication"),
    Column("claim", "claim"),
    Column("published", "published", "num"),
    Column("recomputed", "recomputed", "num"),
    Column("status", "status"),
    Column("note", "note"),
]


def claims_table() -> Table:
    from accelctl.report.estimated import claim_estimate

    rows = [{"publication": publication(c.seed), "claim": c.text, "published": c.published,
             "recomputed": c.recomputed, "status": c.status,
             "note": "; ".join(x for x in (c.note, claim_estimate(c.id)) if x), "id": c.id}
            for c in claims()]
    return Table("reference-claims", "the publications' derived figures, recomputed from their raw numbers",
                 list(CLAIM_COLUMNS), rows,
                 ["recomputed with accelctl's own formulas (analysis/cost.py, report/scaling.py, analysis/compare.py)"])


def _add_estimates(table: Table, t: dict[str, Any], rows: list, kind: str, unit: str = "") -> None:
    """Fill the "estimated" and "error" columns of a seed table (``accelctl.report.estimated``);
    ``rows`` holds, per table row, (raw seed row, metric, published value) or None (a run)."""
    from accelctl.report.estimated import estimate_row

    if not any(rows):
        return
    for out, spec in zip(table.rows, rows):
        if spec is None:
            continue
        raw, metric, published = spec
        est = estimate_row(t["id"], raw["id"], raw, metric, published)
        out.update({"estimated": est.value, "estimated_unit": unit, "estimate_error": est.error,
                    "estimate_bound": est.bound_by or est.note, "estimate_why": est.why,
                    "reproduced_by": est.workload})
    table.columns += [Column("reproduced_by", "workload (estimated)"),
                      Column("estimated", "estimated", kind, unit), Column("estimate_error", "error", "pct"),
                      Column("estimate_bound", "bound by (estimate)"), Column("estimate_why", "why (estimate)")]
    table.notes.append("estimated: accelctl estimate of the shipped workload target that reproduces the row, unchanged; "
                       "factors from "
                       "datasheets and papers only, none fitted to a published figure (accelctl/estimate/factors.py); "
                       "error = (estimated - published) / published")


def reference_tables(user: list[Entry] | None = None) -> list[Table]:
    """The seeds' tables, then the claims table; ``user`` entries whose workload a seed
    table names are placed in that table after the seed's rows."""
    ref = load_reference()
    user = user or []
    tables: list[Table] = []
    for t in ref["tables"]:
        # the publication's title, not the name of the file it was filed under
        source = f"{ref['seeds'][t['seed']]['title']}, {t['section']}"
        notes = [f"source: {source}", *t.get("notes", [])]
        mine = [e for e in user if e.workload in (t.get("workloads") or [])]
        if t["kind"] == "scaling":
            rows = list(table_scaling(t).values())
            published = {r["label"]: r.get("published", {}) for r in t["rows"]}
            table = scale_table(f"reference-{t['id']}", table_title(t), rows, t["unit"], published, notes)
            by_label = {r["label"]: r for r in t["rows"]}
            _add_estimates(table, t, [(by_label[r["label"]], "throughput", r["throughput"]) if r["label"] in by_label
                                      else None for r in table.rows], "rate", t["unit"])
            tables.append(table)
            continue
        seed_entries = table_entries(t)
        entries = list(seed_entries.values()) + mine
        table = report_table(t["workloads"][0], entries, title=table_title(t))
        table.id, table.notes = f"reference-{t['id']}", notes + table.notes
        raw = {r["id"]: r for r in t["rows"]}
        targets = []
        for rid, e in seed_entries.items():
            metric = "latency_s" if e.latency_s is not None else "step_time_s"
            targets.append(({**raw[rid], "batch": e.batch, "devices": e.devices}, metric, getattr(e, metric)))
        _add_estimates(table, t, targets + [None] * len(mine), "time")
        tables.append(table)
    tables.append(claims_table())
    return tables
