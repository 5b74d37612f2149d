"""Verbs of the reports: ``report`` and ``compare`` (``sweep``: accelctl.cli.sweep).

    accelctl report [RUN...] [--reference] [--format rich|md|csv|json] [--plot FILE.png]
                    [--tensorboard DIR] [--mlflow [URI]] [--wandb [PROJECT]] [--all]
                    [--workload W] [--runs-dir DIR]
    accelctl compare A B [--tolerance 0.05] [--fail-on-regression] [--force] [--format ...]

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

import sys

from accelctl import exitcodes
from accelctl.errors import AccelctlError, Diagnostic
from accelctl.cli.tables import check_plot, emit, entries_of, guarded, plot, short_ids_of, table_options

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


def cmd_report(args) -> int:
    from accelctl.report.exports import prepare

    records = [] if (args.reference and not args.runs) else _records(args.runs, args.runs_dir, args.all, args.workload)
    if args.plot is not None:
        check_plot(args.plot)  # its format, before any table: exit 1
    # the trackers' settings and places, checked before any table is printed: exit 2 naming the
    # setting, 1 naming a place that cannot be written (accelctl.report.exports)
    exports = prepare(args, records)
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

    entries = entries_of(records)
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
    emit(tables, args.format, args.output, reply, wide=args.wide, ids=short_ids_of(records, args.runs_dir))
    if args.plot is not None:
        plot(plotted, args.plot, "accelctl report" + (" (reference)" if args.reference and not entries else ""),
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
    emit([compare_table(c)], args.format, args.output, reply, wide=args.wide,
          ids=short_ids_of([r for rs in runs for r in rs], args.runs_dir), verdict=c.verdict, speedup=c.speedup,
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


def add_report(sub) -> None:
    r = sub.add_parser("report")
    r.add_argument("runs", nargs="*", metavar="RUN", help="run ids or folders (default: every ok run)")
    r.add_argument("--reference", action="store_true", help="the published tables accelctl reproduces (with RUN: next to them)")
    r.add_argument("--all", action="store_true", help="include failed, stopped and incomplete runs")
    r.add_argument("--workload", "-w", help="only runs of this workload")
    r.add_argument("--plot", metavar="FILE.png", help="also draw step time, throughput and scaling to a PNG "
                   "(another format by its extension: .svg, .pdf, ...)")
    r.add_argument("--tensorboard", metavar="DIR", help="also export each run as TensorBoard event files")
    r.add_argument("--mlflow", metavar="URI", nargs="?", const="", default=None,
                   help="also log each run as an MLflow run (default $MLFLOW_TRACKING_URI, else "
                        "sqlite in ./mlruns); put RUN before it or write --mlflow=URI")
    r.add_argument("--wandb", metavar="PROJECT", nargs="?", const="", default=None,
                   help="also log each run to Weights & Biases offline (project default: the workload); "
                        "wandb sync uploads it")
    r.add_argument("--wandb-dir", metavar="DIR", help="where --wandb writes (default: the run store)")
    table_options(r)
    r.set_defaults(fn=guarded(cmd_report))


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
    table_options(c)
    c.set_defaults(fn=guarded(cmd_compare))
