"""Verbs of the reports: ``report``, ``compare``, ``sweep``.

    accelctl report [RUN...] [--reference] [--format rich|md|csv|json] [--plot FILE.png]
                    [--tensorboard DIR] [--mlflow [URI]] [--wandb [PROJECT]] [--all]
                    [--workload W] [--runs-dir DIR]
    accelctl compare A B [--tolerance 0.05] [--fail-on-regression] [--force] [--format ...]
    accelctl sweep FILE --target T [--devices 1,2] [--nodes 1,2] [--backend torchrun]

RUN, A and B are run ids (or unique prefixes/suffixes) or run folders; a run of a
``measure { repeat = N }`` series stands for its whole series in ``compare``.  A run the
store cannot read is named with its reason (``unreadable: ...``) on stderr, never a
traceback; ``compare`` refuses it, an incomplete run and runs of different workloads
(exit 2, E226/E227) unless ``--force``.  Without RUN,
``report`` takes every ok run of the store (``--all``: any status); ``--reference``
alone prints the seeds' published tables, with RUN it places the runs next to them.
``--tensorboard``, ``--mlflow`` and ``--wandb`` are ``accelctl.report.exports``: their settings
and places checked before any table, the exports written after it (a place that cannot be
written: exit 1, one line naming the path and the errno, nothing partial left).
With ``--json`` (``-f json``) the tables fill the JSON document's result (``accelctl.reply``)
and a failure raises ``AccelctlError``: ``accelctl.cli.main`` writes it as text or into the
document.  This module imports nothing heavy at module level (no torch, rich or matplotlib).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from accelctl import exitcodes
from accelctl.errors import AccelctlError, Diagnostic

FORMATS = ("rich", "md", "csv", "json")


def _emit(tables: list, fmt: str, output: str | None = None, reply: Any = None, wide: bool = False,
          ids: dict | None = None, **extra: Any) -> None:
    """Print ``tables`` in ``fmt`` (or write them to ``output``): rich fitted to the output
    width (``accelctl.report.fit``; not a terminal and no $COLUMNS: 200 wide, as before), short
    run ids unless ``wide``; with ``reply`` (``--json``) they are the document's result instead
    (and ``output``, when given, gets the same JSON)."""
    from accelctl.report.render import json_data, print_rich, render

    if reply is not None:
        reply.result.update(json_data(tables, **extra))
        if output:
            reply.result["output"] = output
    if fmt == "rich" and output is None:
        from accelctl.report.fit import output_width

        print_rich(tables, width=None if wide else output_width(sys.stdout, 200), ids=None if wide else ids)
        return
    text = render(tables, "md" if fmt == "rich" else fmt, **extra) or ""
    if output:
        Path(output).write_text(text, encoding="utf-8")
        print(f"wrote {output}", file=sys.stderr)
    elif reply is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _short_ids(records: list, runs_dir: str | None) -> dict[str, str]:
    """{run id: its shortest tail unique in the store} for ``records``."""
    from accelctl.report.fit import short_ids
    from accelctl.run.store import runs_root

    root = runs_root(runs_dir)
    try:
        universe = [n for n in os.listdir(root) if (root / n).is_dir()]
    except OSError:
        universe = []
    return short_ids([r.id for r in records], universe)


#: ``compare`` refused the runs (E226/E227), or a run could not be found
EXIT_REFUSED = exitcodes.USAGE


def _records(ids: list[str], runs_dir: str | None, any_status: bool, workload: str | None) -> list:
    """The runs to report; an unreadable one is named on stderr with its reason and left out."""
    from accelctl.run.store import list_runs, load_run

    if ids:
        records = [load_run(i, runs_dir) for i in ids]
    else:
        records = [r for r in list_runs(runs_dir) if any_status or r.status == "ok" or r.unreadable]
    for r in records:
        if r.unreadable:
            print(f"accelctl: run {r.id} is {r.status} (left out of the report)", file=sys.stderr)
    return [r for r in records if not r.unreadable and workload in (None, r.workload)]


def _entries(records: list) -> list:
    """The report entries of ``records``; one whose files have an unexpected shape is named
    on stderr with its reason and left out."""
    from accelctl.report.entry import entry_from_run

    entries = [entry_from_run(r) for r in records]
    for e in entries:
        if e.status.startswith("unreadable"):
            print(f"accelctl: run {e.source} is {e.status} (left out of the report)", file=sys.stderr)
    return [e for e in entries if not e.status.startswith("unreadable")]


def _plot(entries: list, path: str, title: str, runs: list, reference: bool = False) -> None:
    """Bars of ``entries``; scaling curves of the ``runs`` entries (and the seeds')."""
    from accelctl.report.plot import plot_report
    from accelctl.report.tables import scaling_groups

    curves = [(f"{w} ({d})", rows) for w, d, _, rows in scaling_groups(runs)]
    if reference:
        from accelctl.report.reference import load_reference, publication, table_scaling

        curves += [(f"{publication(t['seed'])}: {t['id'][4:]}", list(table_scaling(t).values()))
                   for t in load_reference()["tables"] if t["kind"] == "scaling"]
    try:
        out = plot_report(entries, path, curves, title=title)
    except ModuleNotFoundError as exc:
        raise AccelctlError(f"--plot needs matplotlib ({exc}); pip install 'accelctl[report]'") from None
    print(f"wrote {out}", file=sys.stderr)


def cmd_report(args) -> int:
    from accelctl.report.exports import prepare

    records = [] if (args.reference and not args.runs) else _records(args.runs, args.runs_dir, args.all, args.workload)
    # the trackers' settings and places, checked before any table is printed: exit 2 naming the
    # setting, 1 naming a place that cannot be written (accelctl.report.exports)
    exports = prepare(args)
    try:
        code, reported = _report(args, records)
        if reported:
            exports.write(records)
        return code
    finally:
        exports.discard()  # what an export that did not finish made


def _report(args, records: list) -> tuple[int, bool]:
    """The tables (and plot) of ``records``: (exit code, whether there was anything to report)."""
    from accelctl.report.tables import report_tables, scaling_tables

    entries = _entries(records)
    reply = getattr(args, "reply", None)
    if not entries and not args.reference:
        message = ("no runs to report (accelctl run FILE stores them under ./runs); "
                   "accelctl report --reference prints the published tables accelctl reproduces")
        print(message, file=sys.stderr)
        if reply is not None:
            reply.result = {"tables": []}
            if args.runs:
                reply.fail("NoRuns", message)
        return (exitcodes.OK if not args.runs else exitcodes.FAILED), False
    tables = []
    if args.reference:
        from accelctl.report.reference import load_reference, reference_tables, table_entries

        # runs of a workload a seed's entries table names go into that table; the rest
        # (and every scaling table's workload) keep their own tables
        placed = {w for t in load_reference()["tables"] if t["kind"] == "entries" for w in t.get("workloads", [])}
        tables += report_tables([e for e in entries if e.workload not in placed])
        tables += scaling_tables(entries)
        tables += reference_tables(entries)
        plotted = entries or [e for t in load_reference()["tables"] if t["kind"] == "entries"
                              for e in table_entries(t).values()]
    else:
        tables += report_tables(entries) + scaling_tables(entries)
        plotted = entries
    _emit(tables, args.format, args.output, reply, wide=args.wide, ids=_short_ids(records, args.runs_dir))
    if args.plot:
        _plot(plotted, args.plot, "accelctl report" + (" (reference)" if args.reference and not entries else ""),
              entries, reference=args.reference)
    return exitcodes.OK, True


def cmd_compare(args) -> int:
    from accelctl.analysis.compare import NOT_COMPLETE, TOLERANCE
    from accelctl.report.compare import INCONCLUSIVE, REFUSED, REGRESSION, compare, compare_table
    from accelctl.report.entry import entry_from_series
    from accelctl.run.store import load_run, series_runs

    runs = [series_runs(load_run(x, args.runs_dir)) for x in (args.a, args.b)]
    unreadable = [(side, r) for side, rs in zip("AB", runs) for r in rs if r.unreadable]
    if unreadable:  # as ``runs`` and ``report`` read it: no figures to compare, --force or not
        raise AccelctlError(diagnostics=[Diagnostic(NOT_COMPLETE, f"not compared: {side} ({r.id}) is {r.status}",
                                                    path="accelctl compare",
                                                    hint="an unreadable run has no figures: --force does not apply")
                                         for side, r in unreadable], exit_code=EXIT_REFUSED)
    a, b = (entry_from_series(r) for r in runs)
    tolerance = TOLERANCE if args.tolerance is None else args.tolerance
    c = compare(a, b, confidence=args.confidence, tolerance=tolerance, force=args.force)
    if c.verdict == REFUSED:
        raise AccelctlError(diagnostics=[Diagnostic(r.code, f"not compared: {r.message}", path="accelctl compare",
                                                    hint="--force compares them anyway") for r in c.refusals],
                            exit_code=EXIT_REFUSED)
    reply = getattr(args, "reply", None)
    _emit([compare_table(c)], args.format, args.output, reply, wide=args.wide,
          ids=_short_ids([r for rs in runs for r in rs], args.runs_dir), verdict=c.verdict, speedup=c.speedup,
          speedup_ci=None if c.speedup_ci is None else [c.speedup_ci.low, c.speedup_ci.high],
          price_performance=c.price_performance, runs=list(c.runs), reason=c.reason,
          forced=[r.message for r in c.refusals])
    if args.fail_on_regression and c.verdict == REGRESSION:
        if reply is not None:
            reply.fail("Regression", f"B is significantly slower than A (--fail-on-regression): {c.reason}".rstrip(": "))
        return exitcodes.REGRESSION
    if args.fail_on_regression and c.verdict == INCONCLUSIVE:
        print(f"accelctl compare: inconclusive, no verdict (--fail-on-regression exits "
              f"{exitcodes.INCONCLUSIVE}): {c.reason}", file=sys.stderr)
        if reply is not None:
            reply.fail("Inconclusive", f"no verdict (--fail-on-regression): {c.reason}")
        return exitcodes.INCONCLUSIVE
    return exitcodes.OK


def cmd_sweep(args) -> int:
    if args.over:
        from accelctl.report.sweep_cli import cmd_sweep_over

        return cmd_sweep_over(args, _emit)
    if not args.target:
        raise AccelctlError("sweep needs --target T (a device/node sweep) or --over KEY=V1,V2 --estimate|--run",
                            exit_code=exitcodes.USAGE)
    from accelctl.report.entry import entry_from_run
    from accelctl.contract.hostfacts import HostFacts
    from accelctl.report.sweep import parse_counts, run_sweep
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
    _emit(report_tables(entries) + scaling_tables(entries), args.format, args.output, reply, wide=args.wide,
          ids=_short_ids(records, args.runs_dir),
          runs=[{"run_id": r.id, "status": r.status, "path": str(r.path)} for r in records])
    if args.plot:
        _plot(entries, args.plot, f"accelctl sweep {Path(args.file).name} --target {args.target}", entries)
    return exitcodes.OK if all(r.status == "ok" for r in records) else exitcodes.FAILED


def _common(p) -> None:
    p.add_argument("--format", "-f", choices=FORMATS, default="rich",
                   help="rich table (default), md, csv (one table, a 'table' column naming each row's) or json")
    p.add_argument("--json", action="store_const", dest="format", const="json",
                   help="one JSON document on stdout in every outcome, errors and diagnostics inside (docs/cli.md)")
    p.add_argument("--output", "-o", help="write the text to this file instead of stdout")
    p.add_argument("--runs-dir", default=None, help="run store (default $ACCELCTL_RUNS_DIR or ./runs)")
    p.add_argument("--wide", action="store_true", help="rich tables: every column and full run ids, however "
                   "wide (default: fitted to the terminal or $COLUMNS, short ids)")


def _guarded(fn):
    """Run-store errors (no such run, ambiguous id) are usage errors: one line (or the JSON
    document's error), exit 2."""

    def run(args) -> int:
        from accelctl.run.store import RunStoreError

        try:
            return fn(args)
        except RunStoreError as exc:
            raise AccelctlError(str(exc), exit_code=exitcodes.USAGE) from None

    return run


def add_report(sub) -> None:
    r = sub.add_parser("report")
    r.add_argument("runs", nargs="*", metavar="RUN", help="run ids or folders (default: every ok run)")
    r.add_argument("--reference", action="store_true", help="the published tables accelctl reproduces (with RUN: next to them)")
    r.add_argument("--all", action="store_true", help="include failed, stopped and incomplete runs")
    r.add_argument("--workload", "-w", help="only runs of this workload")
    r.add_argument("--plot", metavar="FILE.png", help="also draw step time, throughput and scaling to a PNG")
    r.add_argument("--tensorboard", metavar="DIR", help="also export each run as TensorBoard event files")
    r.add_argument("--mlflow", metavar="URI", nargs="?", const="", default=None,
                   help="also log each run as an MLflow run (default $MLFLOW_TRACKING_URI, else "
                        "sqlite in ./mlruns); put RUN before it or write --mlflow=URI")
    r.add_argument("--wandb", metavar="PROJECT", nargs="?", const="", default=None,
                   help="also log each run to Weights & Biases offline (project default: the workload); "
                        "wandb sync uploads it")
    r.add_argument("--wandb-dir", metavar="DIR", help="where --wandb writes (default: the run store)")
    _common(r)
    r.set_defaults(fn=_guarded(cmd_report))


def add_compare(sub) -> None:
    c = sub.add_parser("compare")
    c.add_argument("a", metavar="A", help="baseline run")
    c.add_argument("b", metavar="B", help="candidate run")
    c.add_argument("--tolerance", type=float, default=None,  # TOLERANCE: analysis.compare loads on use
                   help="relative change below which a significant difference is still 'same' "
                        "(default 0.05 = 5%%; 0 asks the strict question)")
    c.add_argument("--confidence", type=float, default=0.95)
    c.add_argument("--fail-on-regression", action="store_true",
                   help="exit 3 when B is significantly slower (the CI over independent runs lies below 1), "
                        "5 (inconclusive) when there is no verdict (fewer than 3 runs a side)")
    c.add_argument("--force", action="store_true",
                   help="compare incomplete, failed or stopped runs and runs of different workloads anyway (never an unreadable one)")
    _common(c)
    c.set_defaults(fn=_guarded(cmd_compare))


def add_sweep(sub) -> None:
    s = sub.add_parser("sweep")
    s.add_argument("file")
    s.add_argument("--target", "-t")
    from accelctl.report.sweep_cli import add_over_arguments

    add_over_arguments(s)
    s.add_argument("--devices", "-d", help="comma-separated device counts per node, e.g. 1,2 (default: the target's)")
    s.add_argument("--nodes", default="1", help="comma-separated node counts, run through the target's engine "
                   "(e.g. 1,2 on Slurm; default 1)")
    s.add_argument("--workload", "-w")
    s.add_argument("--engine", "-e")
    s.add_argument("--backend", help="force one backend for every point (e.g. torchrun)")
    s.add_argument("--plot", metavar="FILE.png")
    _common(s)
    s.set_defaults(fn=_guarded(cmd_sweep))
