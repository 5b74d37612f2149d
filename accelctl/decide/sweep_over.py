"""``accelctl sweep FILE --over KEY=V1,V2 [--over ...] [--zip] --estimate | --run``.

Every point is the workload's AST with the ``--over`` settings applied (``accelctl.language.over``)
and checked by the check pass, exactly as if the file said so; a value the check refuses in
the argument itself (unknown key, wrong type, out of range) refuses the sweep, naming the
argument; a point the rules refuse (E402: devices that tp does not divide...) is a row that
says why.  Grid by default (every combination), ``--zip``: the i-th values together.

``--estimate``: each point x target planned as ``accelctl plan`` plans it -- one plan refuses is
a row with plan's code and words and no figure -- and the others through the roofline estimate
(no torch).  Job time and
cost are at equal work (``accelctl.estimate.work``): the workload's ``train_steps`` at its
reference global batch, ``--work``, or per million units.  The Pareto front of job time
against job cost (rows that fit, with a price) is marked: no other row is both faster and
cheaper.  ``--run`` runs the points through ``accelctl.api`` one after the other.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from accelctl.dsl import ast
from accelctl.errors import AccelctlError, Diagnostic, WorkloadError
from accelctl.language import over as O
from accelctl.catalog import DEVICES
from accelctl.frozen import replace

#: the work per row when neither --work nor the workload's train_steps say (units of the throughput)
DEFAULT_UNITS = 1e6


@dataclass
class Row:
    point: dict[str, str]
    target: str
    est: Any = None
    refused: Diagnostic | None = None
    hours: float | None = None
    cost: float | None = None
    pareto: bool = False
    spec: Any = None
    #: ``refused`` is plan's verdict (the point checked, and plan refuses it), not the check pass's
    by_plan: bool = False

    def record(self) -> dict[str, Any]:
        e = self.est
        out: dict[str, Any] = {**{f"over.{k}": v for k, v in self.point.items()}, "target": self.target}
        if self.refused is not None:
            out["refused"] = f"{self.refused.code}: {self.refused.message}"
            return out
        out.update(device=e.device, devices=e.devices, status=e.status, step_time_s=e.step_time_s,
                   throughput=e.throughput, unit=e.unit, bound_by=e.bound_by, fits=e.fits,
                   price_per_hour=e.price_per_hour, job_hours=self.hours, job_usd=self.cost, pareto=self.pareto)
        return out


@dataclass
class Sweep:
    workload: str
    overs: list[O.Over]
    rows: list[Row]
    work: str
    notes: list[str] = field(default_factory=list)
    #: W233: an argument whose values changed no row (``unchanged``)
    warnings: list[Diagnostic] = field(default_factory=list)


def parse_overs(args: list[str]) -> list[O.Over]:
    """Every ``--over`` argument; one ``WorkloadError`` with all their diagnostics."""
    overs, diags = [], []
    for i, a in enumerate(args):
        try:
            overs.append(O.parse_over(a, i))
        except WorkloadError as exc:
            diags += exc.diagnostics
    diags += O.repeated(overs)
    if diags:
        raise WorkloadError(diagnostics=diags)
    return overs


def points(overs: list[O.Over], zipped: bool) -> list[tuple[tuple[O.Over, ast.Value], ...]]:
    """The grid of the values (or their zip: every argument the same number of values)."""
    if zipped:
        n = {len(o.values) for o in overs}
        if len(n) > 1:
            raise AccelctlError("--zip pairs the i-th values: every --over needs as many values ("
                                + ", ".join(f"{o.key}: {len(o.values)}" for o in overs) + ")", exit_code=2)
        return [tuple((o, o.values[i]) for o in overs) for i in range(n.pop())]
    return list(itertools.product(*[[(o, v) for v in o.values] for o in overs]))


def _workload(file: ast.File, name: str | None) -> ast.Workload:
    from accelctl.plan.select import no_workload

    ws = [w for w in file.workloads if name in (None, w.name)]
    if not ws:
        raise no_workload(file.path, name, [w.name for w in file.workloads])
    if len(ws) != 1:
        names = ", ".join(w.name for w in file.workloads)
        raise AccelctlError(f"{file.path}: name one workload with -w ({names})", exit_code=2)
    return ws[0]


def point_workload(w: ast.Workload, point, targets: tuple[str, ...] | None,
                   _pruned: dict | None = None) -> tuple[ast.Workload, tuple[str, ...]]:
    """The AST of one point and the targets it evaluates (``target=`` in the point, else
    ``targets``, else every target), with the other target blocks left out (``_pruned``: that
    workload per chosen targets, kept between the points of a sweep)."""
    chosen = targets or _target_names(w)
    for o, v in point:
        if o.key == "target":
            chosen = (v.name if isinstance(v, ast.Word) else ast.value_text(v),)
    reshape = any(o.key in O.RESHAPES_BATCH for o, _ in point)
    cache = {} if _pruned is None else _pruned
    base = cache.get((chosen, reshape))
    if base is None:
        base = w._replace(items=tuple(it for it in w.items if not (type(it) is ast.Block and it.kind == "target")
                                      or (isinstance(it.header, ast.Word) and it.header.name in chosen)))
        base = cache[(chosen, reshape)] = O.drop_global(base) if reshape else base
    for o, v in sorted(point, key=lambda ov: ov[0].key != "instance"):  # the instance first: it resets devices
        if o.key != "target":
            base = O.apply(base, o, v, chosen)
    return base, chosen


def _target_names(w: ast.Workload) -> tuple[str, ...]:
    return tuple(it.header.name for it in w.items
                 if type(it) is ast.Block and it.kind == "target" and isinstance(it.header, ast.Word))


def evaluate(path: str, overs: list[O.Over], *, zipped: bool = False, workload: str | None = None,
             target: str | None = None, work: str | None = None, calibrations=None, estimate: bool = True,
             explain: bool = True, host=None) -> Sweep:
    """Check every point (and estimate it, unless ``estimate`` is False: --run plans them);
    ``explain`` False: estimates without their why text's extras (the sweep's table shows none).
    An estimated point is planned first (for ``host``, a ``HostFacts``; None: this machine): one
    ``plan`` refuses is a row with plan's diagnostic and no figure, as ``estimate`` shows it."""
    from accelctl.api import estimate_targets, parse, plan_refusal, read_source
    from accelctl.estimate import work as W
    from accelctl.language.check import check_all

    text = read_source(path)
    file = parse(text, path)
    base_w = _workload(file, workload)
    base_specs, base_diags = check_all(ast.File(path, text, (base_w,)))
    errors = [d for d in base_diags if d.severity == "error"]
    if errors:
        raise WorkloadError(diagnostics=errors)
    base = base_specs[0]
    names = [t.name for t in base.targets]
    if target and target not in names:
        from accelctl.api import named_target

        named_target(base, target)
    chooser = next((o for o in overs if o.key == "target"), None)  # it overrides -t at each point
    evaluated = tuple(dict.fromkeys(v.name if isinstance(v, ast.Word) else ast.value_text(v)
                                    for o in overs if o.key == "target" for v in o.values)) or (
        (target,) if target else None)
    unknown = O.check_names((base_w,), overs, evaluated, chooser.where if chooser else f"-t {target}",
                            file.workloads)
    if unknown:
        raise WorkloadError(diagnostics=unknown)
    wk = W.parse_work(work) if work else None
    rows: list[Row] = []
    bad_values: dict[tuple, Diagnostic] = {}
    groups: dict[tuple, list] = {}
    pruned: dict = {}
    for i, point in enumerate(points(overs, zipped)):
        label = {o.key: ast.value_text(v) for o, v in point}
        w, chosen = point_workload(base_w, point, (target,) if target else None, pruned)
        key = tuple(label[o.key] for o, _ in point if o.key != "target" and not O.is_target_key(o.path))
        groups.setdefault(key, []).append((i, label, w, chosen))
    if estimate and host is None:  # this machine's facts, read once for every point's plan
        from accelctl.contract import hostfacts

        host = hostfacts.current()
    checked: dict[int, tuple] = {}
    for members in groups.values():
        checked.update(_check_group(path, text, members, overs, bad_values))
    if bad_values:
        raise WorkloadError(diagnostics=list(bad_values.values()))
    for i, (label, spec, targets, refused) in sorted(checked.items()):
        if refused is not None:
            rows += [Row(label, t, refused=refused) for t in targets]
            continue
        for t in targets:
            row = Row(label, t.name, spec=spec)
            if estimate:
                row.refused = plan_refusal(spec, t, host, fixes=False)
                row.by_plan = row.refused is not None
                if row.refused is None:
                    row.est = estimate_targets(spec, [t], calibrations=calibrations, explain=explain)[0]
            rows.append(row)
    sweep = Sweep(base.name, overs, rows, "")
    if estimate:
        _jobs(sweep, base, wk)
        mark_pareto(sweep.rows)
    sweep.warnings = unchanged(sweep)
    return sweep


def unchanged(sweep: Sweep) -> list[Diagnostic]:
    """W233 for each argument (a real key: the check took it) whose values changed nothing for
    some target: every row of it that differs from another only in that key's value is the
    same row (estimated, or, unestimated, the same checked workload and target).  Rows that
    vary in another argument too (``--zip``) say nothing either way; the column stays."""
    out, outcomes = [], {}
    for o in sweep.overs:
        if o.key == "target" or len(set(o.texts)) < 2:
            continue
        if not outcomes:
            outcomes = {id(r): _outcome(r) for r in sweep.rows}
        named = o.path[1] if o.path[0] in ("target", "targets") else None  # the other targets never took it
        groups: dict[tuple, set] = {}
        for r in (r for r in sweep.rows if named in (None, r.target)):
            rest = tuple((k, v) for k, v in r.point.items() if k != o.key)
            groups.setdefault((r.target, rest), set()).add((r.point.get(o.key), outcomes[id(r)]))
        same: dict[str, bool] = {}  # target -> no row of it changed
        for (t, _), g in groups.items():
            if len({value for value, _ in g}) > 1:
                same[t] = same.get(t, True) and len({outcome for _, outcome in g}) == 1
        idle = [t for t, s in same.items() if s]
        if not idle:
            continue
        moved = [t for t, s in same.items() if not s]
        values = ", ".join(dict.fromkeys(o.texts))
        message = f"{o.key}: its values ({values}) changed nothing: every row is the same at each of them" \
            if not moved else f"{o.key}: its values ({values}) changed nothing for {', '.join(idle)}: their rows " \
                              f"are the same at each of them (those of {', '.join(moved)} differ)"
        what = "estimate" if any(r.est is not None for r in sweep.rows) else "checked workload"
        raw = o.arg.partition("=")[0]
        at = O.Span.point(1, 1 + len(raw) - len(raw.lstrip()), len(raw.strip()))
        out.append(Diagnostic("W233", message, at, o.where, f"the {what} of {', '.join(idle)} does not depend on "
                              f"{o.key} (a setting a run or another backend reads); the column is kept", "warning",
                              o.arg))
    return out


def _outcome(r: Row):
    """What a row says, but for its point: its refusal, its estimate's figures (those the
    table and the record show, and the memory fit), or its checked workload and target."""
    if r.refused is not None:
        return r.refused.code, r.refused.message
    e = r.est
    if e is not None:
        return (e.device, e.devices, e.status, e.unit, e.step_time_s, e.latency_s, e.throughput, e.bound_by,
                e.memory_fit, e.fits, e.price_per_hour, r.hours, r.cost)
    d = r.spec.to_dict()
    d["targets"] = [t for t in d.get("targets", []) if t.get("name") == r.target]
    return repr(d)


def _check_group(path, text, members, overs, bad_values) -> dict[int, tuple]:
    """Check the points of one group (the same workload-level settings) at once: their target
    blocks side by side in one workload, renamed ``NAME__k`` (the check pass then checks the
    workload's own settings once, each target on its own).  A group with any error is checked
    again point by point, so each point's diagnostics are its own."""
    from accelctl.language.check import check_all

    blocks, owner = [], {}
    for k, (_, _, w, _) in enumerate(members):
        for it in w.items:
            if type(it) is ast.Block and it.kind == "target":
                blocks.append(_renamed(it, k))
                owner[f"{it.header.name}__{k}"] = (k, it.header.name)
    first = members[0][2]
    shared = tuple(it for it in first.items if not (type(it) is ast.Block and it.kind == "target"))
    specs, diags = check_all(ast.File(path, text, (first._replace(items=shared + tuple(blocks)),)))
    out: dict[int, tuple] = {}
    if specs and not any(d.severity == "error" for d in diags):
        spec = specs[0]
        per: dict[int, list] = {}
        for t in spec.targets:
            k, name = owner[t.name]
            per.setdefault(k, []).append(replace(t, name=name))
        for k, (i, label, _, _) in enumerate(members):
            targets = tuple(per.get(k, ()))
            out[i] = (label, replace(spec, targets=targets), targets, None)
        return out
    for i, label, w, chosen in members:
        specs, diags = check_all(ast.File(path, text, (w,)))
        diags = O.relocate([d for d in diags if d.severity == "error"], overs)
        for d in diags:
            if O.in_over(d) and O.bad_value(d):
                bad_values.setdefault((d.path, d.span, d.code), d)
        if diags or not specs:
            first_d = diags[0] if diags else Diagnostic("E000", "the point did not check", path=path)
            out[i] = (label, None, chosen, first_d)
        else:
            out[i] = (label, specs[0], specs[0].targets, None)
    return out


def _renamed(block: ast.Block, k: int) -> ast.Block:
    """``target NAME`` as ``target NAME__k``; a target whose device came from its name says it."""
    name = block.header.name
    items = block.items
    if name in DEVICES and not any(i[0] in ("device", "instance") for i in items):
        items = items + (ast.Entry("device", ast.Word(name, block.header.span), block.header.span, block.header.span),)
    return block._replace(header=block.header._replace(name=f"{name}__{k}"), items=items)


def _jobs(sweep: Sweep, base, wk) -> None:
    """Job time and cost of every row at equal work."""
    from accelctl.estimate import work as W

    for r in sweep.rows:
        e = r.est
        if e is None or e.status != "ok" or not e.throughput:
            continue
        if wk is not None:
            units, basis = W.samples_of(wk, r.spec)
            if wk.unit == "tokens" and e.unit.startswith("tokens"):
                units, basis = wk.amount, wk.text
        elif e.work_samples:
            units, basis = e.work_samples, e.work_basis
        else:
            units, basis = DEFAULT_UNITS, f"{DEFAULT_UNITS:,.0f} {e.unit.split('/')[0]}"
        r.hours, r.cost = W.job(units, e.throughput, e.price_per_hour)
        sweep.work = sweep.work or basis


def mark_pareto(rows: list[Row]) -> None:
    """``pareto`` on the rows no other row beats in both job time and job cost (rows that fit,
    with a price)."""
    cands = sorted((r for r in rows if r.hours is not None and r.cost is not None and r.est.fits),
                   key=lambda r: (r.hours, r.cost))
    best = float("inf")
    for r in cands:
        if r.cost < best:
            r.pareto, best = True, r.cost


def table(sweep: Sweep):
    from accelctl.report.tables import Column, Table

    keys = [o.key for o in sweep.overs]
    cols = [Column(f"over.{k}", k) for k in keys] + [
        Column("target", "target"), Column("device", "device"), Column("step_time_s", "step", "time"),
        Column("throughput", "throughput", "rate"), Column("bound_by", "bound by"), Column("memory", "memory"),
        Column("price_per_hour", "USD/h", "usd"), Column("job_hours", "job time", "hours"),
        Column("job_usd", "job cost", "usd"), Column("pareto", "pareto")]
    rows = []
    for r in sweep.rows:
        row: dict[str, Any] = {f"over.{k}": r.point.get(k, "") for k in keys}
        row["target"] = r.target
        if r.refused is not None:
            row["bound_by"] = f"refused {r.refused.code}"
            row["memory"] = r.refused.message[:60]
        elif r.est.status != "ok":
            row["bound_by"] = "no estimate"
            row["memory"] = r.est.status[:60]
        else:
            e = r.est
            row.update(device=f"{e.device} x{e.devices}", step_time_s=e.step_time_s, throughput=e.throughput,
                       throughput_unit=e.unit, bound_by=e.bound_by, memory="fits" if e.fits else "DOES NOT FIT",
                       price_per_hour=e.price_per_hour, job_hours=r.hours, job_usd=r.cost,
                       pareto="*" if r.pareto else "")
        rows.append(row)
    notes = [f"job = {sweep.work} on every row (equal work): time = work / throughput, cost = time x USD/h"
             if sweep.work else "no throughput: no job time"]
    notes.append("pareto *: no other row that fits is both faster and cheaper for the same work "
                 "(rows without a price are not ranked)")
    notes += sweep.notes
    if any(o.key in O.RESHAPES_BATCH for o in sweep.overs):
        notes.append("batch { global } dropped at every point: the global batch follows micro x accumulation "
                     "x data-parallel ranks")
    return Table("sweep", f"sweep {sweep.workload} (estimated; no run)", cols, rows, notes)
