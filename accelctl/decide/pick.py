"""``accelctl pick FILE --work N [--deadline T] [--budget USD]``: every target x instance x
layout that fits, ranked at equal work.

The candidates are a sweep (``sweep_over``) of the workload's accelerator targets over every
catalogued instance with a datasheet, node counts and parallel layouts: each one the
target's own settings (precision, batch, options) on that machine, checked by the check
pass and estimated by the roofline.  Work is samples (or tokens, or steps at the reference
global batch: ``accelctl.estimate.work``), the same on every row: a candidate with a 16x
larger global batch does 16x fewer optimizer steps.  With a deadline: the rows that meet it,
cheapest first; with a budget: the rows within it, fastest first; both: cheapest first of
the rows meeting both.  The best rows are planned as ``accelctl plan`` would (a layout a
backend refuses is left out and counted).  Each row says what bounds it and why, and the
table's notes say what the estimate assumed (factors and their sources, prices).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from accelctl.decide import sweep_over as SO
from accelctl.catalog import DATASHEETS, DEVICES, INSTANCES

NODES = (1, 2, 4, 8, 16)
#: data-parallel layouts, then tensor and pipeline parallel and FSDP x TP (a node's 8 devices, or
#: half of them): the check pass and the plan refuse those a backend or the model cannot take
TRAINING_LAYOUTS = ("ddp", "zero(stage = 1)", "zero(stage = 2)", "zero(stage = 3)", "fsdp",
                    "tensor(tp = 4)", "tensor(tp = 8)", "pipeline(pp = 4)", "pipeline(pp = 8)",
                    "fsdp(tp = 4)", "fsdp(tp = 8)")


@dataclass
class Pick:
    workload: str
    work: str
    ranked: list[SO.Row]
    unpriced: list[SO.Row]
    counts: dict[str, int]
    rule: str
    assumptions: list[str] = field(default_factory=list)


def instances() -> list[str]:
    """Every catalogued instance whose device has a datasheet (the estimate needs one)."""
    return [i.name for i in INSTANCES.values() if i.device in DATASHEETS and not DEVICES[i.device].host]


def candidates(spec, nodes=NODES) -> list[str]:
    """The ``--over`` arguments of the candidate sweep."""
    bases = [t.name for t in spec.targets if not DEVICES[t.device].host]
    layouts = TRAINING_LAYOUTS if spec.task.training else ("data", "deepspeed_inference(tp = 8)")
    return [f"target={','.join(bases)}", f"instance={','.join(instances())}",
            f"nodes={','.join(str(n) for n in nodes)}", f"parallel={','.join(layouts)}"]


def _key(r: SO.Row) -> tuple:
    t = r.spec.target(r.target)
    return (t.instance, t.nodes, t.devices, t.parallel, t.precision, t.batch.micro, t.batch.accumulation,
            t.options, t.gradient_checkpointing)


def pick(path: str, work: str, deadline_h: float | None = None, budget_usd: float | None = None,
         workload: str | None = None, nodes=NODES, top: int = 10, calibrations=None, host=None) -> Pick:
    from accelctl.api import load_selected
    from accelctl.api import plan as compile_plan
    from accelctl.errors import PlanError

    spec = load_selected(path, workload)[0] if workload else _only(path)
    overs = SO.parse_overs(candidates(spec, nodes))
    sweep = SO.evaluate(path, overs, workload=spec.name, work=work, calibrations=calibrations)
    counts = {"candidates": len(sweep.rows), "refused by the language's rules": 0, "do not fit memory": 0,
              "no estimate": 0, "miss the deadline": 0, "over the budget": 0, "refused by plan": 0,
              "duplicates": 0}
    seen, ok = set(), []
    for r in sweep.rows:
        if r.refused is not None:
            counts["refused by the language's rules"] += 1
        elif r.est.status != "ok" or not r.est.throughput:
            counts["no estimate"] += 1
        elif not r.est.fits:
            counts["do not fit memory"] += 1
        elif _key(r) in seen:
            counts["duplicates"] += 1
        else:
            seen.add(_key(r))
            ok.append(r)
    kept = []
    for r in ok:
        if deadline_h is not None and r.hours > deadline_h:
            counts["miss the deadline"] += 1
        elif budget_usd is not None and (r.cost is None or r.cost > budget_usd):
            counts["over the budget"] += 1
        else:
            kept.append(r)
    priced = [r for r in kept if r.cost is not None]
    by_time = budget_usd is not None and deadline_h is None
    priced.sort(key=(lambda r: (r.hours, r.cost)) if by_time else (lambda r: (r.cost, r.hours)))
    ranked = []
    for r in priced:
        if len(ranked) >= top:
            break
        try:
            compile_plan(r.spec, r.spec.target(r.target), host=host)
        except PlanError:
            counts["refused by plan"] += 1
            continue
        ranked.append(r)
    rule = ("fastest first within the budget" if by_time else
            "cheapest first among those meeting the deadline" + (" and the budget" if budget_usd is not None else "")
            if deadline_h is not None else "cheapest first" + (" within the budget" if budget_usd is not None else ""))
    unpriced = sorted((r for r in kept if r.cost is None), key=lambda r: r.hours)[:top]
    return Pick(spec.name, sweep.work, ranked, unpriced, counts, rule, _assumptions(ranked or unpriced))


def _only(path: str):
    from accelctl.api import load_selected

    specs = load_selected(path)
    if len(specs) > 1:
        from accelctl.errors import AccelctlError

        raise AccelctlError(f"{path} has {len(specs)} workloads: name one with -w "
                            f"({', '.join(s.name for s in specs)})", exit_code=2)
    return specs[0]


def _assumptions(rows: list[SO.Row]) -> list[str]:
    out, seen = [], set()
    for r in rows:
        src = r.est.sources
        for k in ("peak", "memory_bandwidth", "mfu", "bandwidth_efficiency", "layer_overhead"):
            line = f"{r.est.device} {k}: {src.get(k, '-')}"
            if k in src and line not in seen:
                seen.add(line)
                out.append(line)
        inst = INSTANCES.get(r.spec.target(r.target).instance)
        if inst is not None and f"price {inst.name}" not in seen:
            seen.add(f"price {inst.name}")
            out.append(f"price {inst.name}: {inst.price_per_hour} usd/h per node ({inst.price_source})")
    return out


def layout(t) -> str:
    p = t.parallel
    if p.strategy == "zero":
        return f"zero-{p.zero_stage}"
    return p.strategy + (f" tp{p.tp}" if p.tp > 1 else "") + (f" pp{p.pp}" if p.pp > 1 else "")


def row_dict(rank: int | None, r: SO.Row) -> dict[str, Any]:
    from accelctl.estimate import work as W

    t, e = r.spec.target(r.target), r.est
    g = W.global_batch(t)
    samples = r.hours * 3600 * e.throughput if r.hours else None
    return {"rank": rank, "from_target": r.target, "instance": t.instance, "devices": f"{t.nodes} x {t.devices} {t.device}",
            "layout": layout(t), "precision": t.precision.dtype, "batch": f"{t.batch.micro} x {t.batch.accumulation} x "
            f"{t.data_parallel} = {g}", "steps": round(samples / g) if samples else None,
            "step_time_s": e.step_time_s, "throughput": e.throughput, "throughput_unit": e.unit,
            "job_hours": r.hours, "job_usd": r.cost, "price_per_hour": e.price_per_hour,
            "bound_by": e.bound_by, "why": e.why, "memory": e.memory_fit}


def table(p: Pick):
    from accelctl.report.tables import Column, Table

    cols = [Column("rank", "#", "int"), Column("instance", "instance"), Column("devices", "nodes x devices"),
            Column("layout", "layout"), Column("precision", "precision"), Column("batch", "global batch"),
            Column("steps", "steps", "int"), Column("step_time_s", "step", "time"),
            Column("throughput", "throughput", "rate"), Column("job_hours", "job time", "hours"),
            Column("job_usd", "job cost", "usd"), Column("price_per_hour", "USD/h", "usd"),
            Column("bound_by", "bound by"), Column("from_target", "from target")]
    rows = [row_dict(i + 1, r) for i, r in enumerate(p.ranked)]
    rows += [row_dict(None, r) for r in p.unpriced]
    notes = [f"equal work: {p.work} on every row (job time = samples / throughput; steps = samples / global batch)",
             f"ranked {p.rule}" + (f"; rows without a # have no price (not ranked): {len(p.unpriced)}"
                                   if p.unpriced else ""),
             "left out: " + ", ".join(f"{n} {k}" for k, n in p.counts.items() if n and k != "candidates")
             + f" (of {p.counts['candidates']} candidates)"]
    notes += [f"#{i + 1} {r['instance']} {r['layout']}: {r['bound_by']}: {r['why']}" for i, r in enumerate(rows[:3])
              if r["rank"]]
    notes += ["assumed: " + a for a in p.assumptions]
    return Table("pick", f"pick {p.workload}", cols, rows, notes)
