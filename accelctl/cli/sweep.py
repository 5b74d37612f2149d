"""``accelctl sweep``: one target at several device and node counts (``accelctl.decide.sweep``:
the scaling efficiency table), or any setting over values (``accelctl.decide.sweep_over``).

    accelctl sweep FILE --target T [--devices 1,2] [--nodes 1,2] [--backend torchrun]
    accelctl sweep FILE --over KEY=V1,V2 ... --estimate | --run

``--estimate``: a table of every point x target (step time, throughput, bound, memory fit,
job time and cost at equal work, the Pareto front of time vs cost), as rich, md, csv
(``--csv``) or JSON (``--json``), and ``--plot FILE.png`` (job time against job cost, the
front drawn).  ``--run``: each point's target for real where it runs here -- a cpu target,
or any target with ``--rehearse`` (its CPU rehearsal) -- one run after the other, ``measure
{ repeat = N }`` as N independent runs as ``accelctl run`` does; a point that cannot run here
is listed as not run, never as a pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

from accelctl import exitcodes
from accelctl.cli.tables import emit, guarded, plot, short_ids_of, table_options
from accelctl.errors import AccelctlError


def add_over_arguments(s) -> None:
    s.add_argument("--over", action="append", metavar="KEY=V1,V2",
                   help="a setting of the language over values (repeatable: a grid), e.g. batch.micro=8,16 "
                        "parallel=ddp,zero(stage=1) precision=bf16,fp8 target=a,b")
    s.add_argument("--zip", action="store_true", help="--over values in pairs (the i-th of each) instead of a grid")
    mode = s.add_mutually_exclusive_group()
    mode.add_argument("--estimate", action="store_true", help="--over: estimate every point (no run, no torch)")
    mode.add_argument("--run", action="store_true", help="--over: run every point that can run here for real")
    s.add_argument("--rehearse", action="store_true", help="--run: run accelerator targets as CPU rehearsals")
    s.add_argument("--work", metavar="'N samples|tokens|steps'",
                   help="--estimate: the job every row does (default: the task's train_steps at the reference "
                        "global batch, else 1M units)")
    s.add_argument("--csv", action="store_const", dest="format", const="csv", default="rich", help="the table as CSV")


def cmd_sweep_over(args) -> int:
    from accelctl.decide import sweep_over as SO

    if not (args.estimate or args.run):
        raise AccelctlError("sweep --over needs --estimate or --run", exit_code=exitcodes.USAGE)
    overs = SO.parse_overs(args.over)
    if args.run:
        return _run(args, overs)
    from accelctl.api import estimate_calibrations
    from accelctl.contract.hostfacts import HostFacts

    sweep = SO.evaluate(args.file, overs, zipped=args.zip, workload=args.workload, target=args.target,
                        work=args.work, calibrations=estimate_calibrations(args.runs_dir), explain=False,
                        host=HostFacts.here())  # every point is planned for this machine: read once
    reply = getattr(args, "reply", None)
    emit([SO.table(sweep)], args.format, args.output, reply, wide=args.wide,
         points=[r.record() for r in sweep.rows])
    warn(sweep.warnings, reply, args.wide)
    if args.plot is not None:
        plot_front(sweep, args.plot)
    return exitcodes.OK if any(r.est is not None for r in sweep.rows) else exitcodes.FAILED


def warn(warnings, reply, wide: bool) -> None:
    """The sweep's warnings into the JSON document (``--json``), else on stderr."""
    if reply is not None:
        reply.add(warnings)
    else:
        from accelctl.cli.common import print_diags

        print_diags(warnings, wide=wide)


def _run(args, overs) -> int:
    """Each point x target that runs here, for real, one after the other."""
    from accelctl.api import one_process, plan, read_source
    from accelctl.contract.hostfacts import HostFacts
    from accelctl.decide import sweep_over as SO
    from accelctl.report.entry import entry_from_run
    from accelctl.decide.sweep import run_point
    from accelctl.report.tables import report_tables
    from accelctl.run.supervision.orchestrate import Chosen, Request, refusal_text
    from accelctl.catalog import DEVICES

    sweep = SO.evaluate(args.file, overs, zipped=args.zip, workload=args.workload, target=args.target, estimate=False)
    warn(sweep.warnings, getattr(args, "reply", None), args.wide)
    source = read_source(args.file)
    req = Request(engine=args.engine, runs_dir=args.runs_dir)
    facts = HostFacts.here()  # every point is planned for this machine: read once
    records, not_run, status = [], [], exitcodes.OK
    for r in sweep.rows:
        label = ", ".join(f"{k}={v}" for k, v in r.point.items())
        if r.refused is not None:
            not_run.append(f"{label} / {r.target}: refused {r.refused.code}: {r.refused.message}")
            continue
        t = r.spec.target(r.target)
        host = t.device in DEVICES and DEVICES[t.device].host
        if not host and not args.rehearse:
            not_run.append(f"{label} / {r.target}: NOT RUN: needs {t.device} devices (--rehearse runs its CPU "
                           "rehearsal)")
            continue
        one, t1, n = one_process(r.spec, t)
        p = plan(one, t1, args.engine, rehearse=not host, device_path=not host, host=facts)
        print(f"sweep: {label} / {r.target} ({p.backend}){f' ({n} repeats)' if n > 1 else ''} ...",
              file=sys.stderr, flush=True)
        try:
            done = run_point(Chosen(r.spec, p, f"{label} / {r.target}", n), source, req,
                             lambda text: print(text, file=sys.stderr, flush=True))
        except AccelctlError as exc:  # what `accelctl run` refuses before starting: this point is not run
            not_run.append(f"{label} / {r.target}: NOT RUN: {refusal_text(exc)}")
            continue
        records += done
        if any(rec.status != "ok" for rec in done):
            status = exitcodes.FAILED
        if any(rec.status == "stopped" for rec in done):
            break
    entries = [entry_from_run(rec) for rec in records]
    tables = report_tables(entries) if entries else []
    for line in not_run:
        print(f"sweep: {line}", file=sys.stderr)
    emit(tables, args.format, args.output, getattr(args, "reply", None), wide=args.wide,
         runs=[{"run_id": rec.id, "status": rec.status, "path": str(rec.path)} for rec in records], not_run=not_run)
    if not records:
        raise AccelctlError("sweep --run: no point runs here (" + "; ".join(not_run[:3]) + ")",
                            exit_code=exitcodes.FAILED)
    return status


def plot_front(sweep, path: str) -> None:
    """Job time against job cost, the Pareto front joined (``accelctl.report.plot``)."""
    from accelctl.report.plot import plot_front as draw

    pts = [(r.hours, r.cost, r.pareto, f"{r.target} " + " ".join(f"{k}={v}" for k, v in r.point.items()))
           for r in sweep.rows if r.hours is not None and r.cost is not None]
    try:
        out = draw(pts, path, f"accelctl sweep {sweep.workload}: {sweep.work}")
    except ModuleNotFoundError as exc:
        raise AccelctlError(f"--plot needs matplotlib ({exc}); pip install 'accelctl[report]'") from None
    print(f"wrote {out}", file=sys.stderr)


def cmd_sweep(args) -> int:
    if args.over:
        return cmd_sweep_over(args)
    if not args.target:
        raise AccelctlError("sweep needs --target T (a device/node sweep) or --over KEY=V1,V2 --estimate|--run",
                            exit_code=exitcodes.USAGE)
    from accelctl.report.entry import entry_from_run
    from accelctl.contract.hostfacts import HostFacts
    from accelctl.decide.sweep import parse_counts, run_sweep
    from accelctl.report.tables import report_tables, scaling_tables

    try:
        devices, nodes = parse_counts(args.devices) if args.devices else [], parse_counts(args.nodes)
    except ValueError as exc:
        raise AccelctlError(str(exc), exit_code=exitcodes.USAGE) from None
    records = run_sweep(args.file, args.target, devices, nodes=nodes, workload=args.workload, engine=args.engine,
                        backend=args.backend or "", runs_root=args.runs_dir, host=HostFacts.here(),
                        progress=lambda m: print(m, file=sys.stderr, flush=True))
    entries = [entry_from_run(r) for r in records]
    reply = getattr(args, "reply", None)
    emit(report_tables(entries) + scaling_tables(entries), args.format, args.output, reply, wide=args.wide,
          ids=short_ids_of(records, args.runs_dir),
          runs=[{"run_id": r.id, "status": r.status, "path": str(r.path)} for r in records])
    if args.plot is not None:
        plot(entries, args.plot, f"accelctl sweep {Path(args.file).name} --target {args.target}", entries)
    return exitcodes.OK if all(r.status == "ok" for r in records) else exitcodes.FAILED


def add_sweep(sub) -> None:
    s = sub.add_parser("sweep")
    s.add_argument("file")
    s.add_argument("--target", "-t")
    add_over_arguments(s)
    s.add_argument("--devices", "-d", help="comma-separated device counts per node, e.g. 1,2 (default: the target's)")
    s.add_argument("--nodes", default="1", help="comma-separated node counts, run through the target's engine "
                   "(e.g. 1,2 on Slurm; default 1)")
    s.add_argument("--workload", "-w")
    s.add_argument("--engine", "-e")
    s.add_argument("--backend", help="force one backend for every point (e.g. torchrun)")
    s.add_argument("--plot", metavar="FILE.png")
    table_options(s)
    s.set_defaults(fn=guarded(cmd_sweep))
