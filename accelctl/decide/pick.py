"""``accelctl pick FILE --work N [--deadline T] [--budget USD]``: every target x instance x
layout that fits, ranked at equal work.

The candidates are the workload's accelerator targets as written, and a sweep (``sweep_over``)
of them over every catalogued instance with a datasheet, node counts and parallel layouts
(pick's own and the workload's): each one the target's own settings (precision, options) on
that machine, checked by the check pass.  Each gets its own micro-batch, the largest that fits
its memory by ``accelctl fit``'s model, so no target's written micro-batch and no order of the
targets in the file changes the answer; at it each candidate is checked again, planned as
``accelctl plan`` plans it (one plan refuses is left out and counted: every row shown is one
plan accepts) and estimated by the roofline.  Work is samples (or tokens, or steps at the
reference global batch as written: ``accelctl.estimate.work``), the same on every row: a
candidate with a 16x larger global batch does 16x fewer optimizer steps.  With a deadline: the
rows that meet it, cheapest first; with a budget: the rows within it, fastest first; both:
cheapest first of the rows meeting both.  Each row says what bounds it and why, and the
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


def candidates(spec, nodes=NODES, own_layouts=()) -> list[str]:
    """The ``--over`` arguments of the candidate sweep: the targets in name order (the answer is
    the same whatever order the file writes them in), every instance, node count and layout,
    the targets' own layouts (``own_layouts``) among them."""
    bases = sorted(t.name for t in spec.targets if not DEVICES[t.device].host)
    layouts = TRAINING_LAYOUTS if spec.task.training else ("data", "deepspeed_inference(tp = 8)")
    layouts = tuple(dict.fromkeys((*layouts, *own_layouts)))
    return [f"target={','.join(bases)}", f"instance={','.join(instances())}",
            f"nodes={','.join(str(n) for n in nodes)}", f"parallel={','.join(layouts)}"]


def own_layouts(path: str, workload: str) -> tuple[str, ...]:
    """The ``parallel = ...`` values the workload writes (its own and its targets'), as written."""
    from accelctl.api import parse, read_source
    from accelctl.dsl import ast

    out = []
    for w in parse(read_source(path), path).workloads:
        if w.name != workload:
            continue
        blocks = [w, *(it for it in w.items if type(it) is ast.Block and it.kind == "target")]
        out += [ast.value_text(e.value) for b in blocks for e in b.items
                if type(e) is ast.Entry and e.key == "parallel"]
    return tuple(dict.fromkeys(out))


def _key(r: SO.Row) -> tuple:
    t = r.spec.target(r.target)
    return (t.instance, t.nodes, t.devices, t.parallel, t.precision, t.batch.micro, t.batch.accumulation,
            t.options, t.gradient_checkpointing)


def _affinity(spec, r: SO.Row) -> tuple:
    """Which of the targets that make the same candidate it is shown from: the one written for
    its instance, else for its device, else the first by name (never the file's order)."""
    base, t = spec.target(r.target), r.spec.target(r.target) if r.spec is not None else None
    near = 2 if t is None else 0 if base.instance and base.instance == t.instance else 1 if base.device == t.device else 2
    return near, r.target


def fitted(rows: list[SO.Row], counts: dict[str, int]) -> list[tuple[dict[str, str], str, int]]:
    """Each checked candidate with its own micro-batch: the largest that fits its memory by
    ``accelctl fit``'s model (``fit.largest``); those where not even 1 fits are counted."""
    from accelctl.decide.fit import largest

    out = []
    for r in rows:
        if r.refused is not None:
            counts["refused by the language's rules"] += 1
            continue
        micro = largest(r.spec, r.spec.target(r.target))
        if micro:
            out.append((r.point, r.target, micro))
        else:
            counts["do not fit memory"] += 1
    return out


def _zipped(found: list[tuple[dict[str, str], str, int]]) -> list[str]:
    """The ``--over ... --zip`` arguments that make each found candidate a point, at its micro-batch."""
    keys = [k for k in found[0][0] if k != "target"]
    args = [f"target={','.join(t for _, t, _ in found)}"]
    args += [f"{k}={','.join(p[k] for p, _, _ in found)}" for k in keys]
    return args + [f"batch.micro={','.join(str(m) for _, _, m in found)}"]


def pick(path: str, work: str, deadline_h: float | None = None, budget_usd: float | None = None,
         workload: str | None = None, nodes=NODES, top: int = 10, calibrations=None, host=None) -> Pick:
    """The candidates (each target as written, and over every instance, node count and layout),
    each checked, fitted (``fitted``), checked again at its own micro-batch, planned and
    estimated (``sweep_over.evaluate``: a point plan refuses is counted, never shown), ranked."""
    from accelctl.api import load_selected
    from accelctl.estimate import work as W

    spec = load_selected(path, workload)[0] if workload else _only(path)
    wk = W.parse_work(work)
    basis = ""
    if wk.unit == "steps":  # at the workload's reference global batch, as written: the same on every row
        units, basis = W.samples_of(wk, spec)
        work = f"{units!r} samples" if units else work
    names = sorted(t.name for t in spec.targets if not DEVICES[t.device].host)
    counts = {"candidates": 0, "refused by the language's rules": 0, "do not fit memory": 0,
              "no estimate": 0, "miss the deadline": 0, "over the budget": 0, "refused by plan": 0,
              "duplicates": 0}
    rows: list[SO.Row] = []
    workw = ""
    grid = candidates(spec, nodes, own_layouts(path, spec.name))
    for args in ([f"target={','.join(names)}"], grid) if names else ():  # as written, then the grid
        checked = SO.evaluate(path, SO.parse_overs(args), workload=spec.name, estimate=False).rows
        counts["candidates"] += len(checked)
        found = fitted(checked, counts)
        if found:
            sweep = SO.evaluate(path, SO.parse_overs(_zipped(found)), zipped=True, workload=spec.name, work=work,
                                calibrations=calibrations, host=host)
            rows += sweep.rows
            workw = workw or sweep.work
    seen, ok = set(), []
    for r in sorted(rows, key=lambda r: _affinity(spec, r)):  # the same candidate twice: from its closest target
        if r.refused is not None:
            counts["refused by plan" if r.by_plan else "refused by the language's rules"] += 1
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
    ranked = priced[:top]
    rule = ("fastest first within the budget" if by_time else
            "cheapest first among those meeting the deadline" + (" and the budget" if budget_usd is not None else "")
            if deadline_h is not None else "cheapest first" + (" within the budget" if budget_usd is not None else ""))
    unpriced = sorted((r for r in kept if r.cost is None), key=lambda r: r.hours)[:top]
    return Pick(spec.name, basis or workw, ranked, unpriced, counts, rule, _assumptions(ranked or unpriced))


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
    name = f"zero-{p.zero_stage}" if p.strategy == "zero" else p.strategy
    return name + (f" tp{p.tp}" if p.tp > 1 else "") + (f" pp{p.pp}" if p.pp > 1 else "")


def settings(r: SO.Row) -> list[str]:
    """The ``--set`` arguments that make the row from its target (``accelctl plan FILE -t
    TARGET --set ...`` plans it as ranked)."""
    return [f"target.{r.target}.{k}={v}" for k, v in r.point.items() if k != "target"]


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
            "bound_by": e.bound_by, "why": e.why, "memory": e.memory_fit, "micro": t.batch.micro,
            "settings": settings(r)}


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
             "micro-batch: on each row the largest that fits its memory (accelctl fit's model); "
             "every row is planned as accelctl plan FILE -t TARGET --set ... plans it (--json: settings)",
             "left out: " + ", ".join(f"{n} {k}" for k, n in p.counts.items() if n and k != "candidates")
             + f" (of {p.counts['candidates']} candidates)"]
    notes += [f"#{i + 1} {r['instance']} {r['layout']}: {r['bound_by']}: {r['why']}" for i, r in enumerate(rows[:3])
              if r["rank"]]
    notes += ["assumed: " + a for a in p.assumptions]
    return Table("pick", f"pick {p.workload}", cols, rows, notes)
