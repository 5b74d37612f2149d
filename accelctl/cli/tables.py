"""What the table verbs share (report, compare, sweep, pick, fit): the table options, the
output of tables in every format, short run ids, the entries of runs, the plot, and run-store
errors as usage errors.  Imports nothing heavy at module level."""

from __future__ import annotations

import os
import sys
from typing import Any

from accelctl.cli.common import unknown_run_is_usage
from accelctl.errors import AccelctlError

FORMATS = ("rich", "md", "csv", "json")


def emit(tables: list, fmt: str, output: str | None = None, reply: Any = None, wide: bool = False,
          ids: dict | None = None, **extra: Any) -> None:
    """Print ``tables`` in ``fmt`` (or write them to ``output``): rich fitted to the output
    width (``accelctl.report.width``; not a terminal and no $COLUMNS: 200 wide, as before), short
    run ids unless ``wide``; with ``reply`` (``--json``) they are the document's result instead
    (and ``output``, when given, gets the same JSON).  ``output`` is written whole or not at all
    (``exportpath.write_file``); a place that cannot take it is exit 1 naming it and the errno."""
    from accelctl.report.render import json_data, print_rich, render

    if reply is not None:
        reply.result.update(json_data(tables, **extra))
        if output is not None:
            reply.result["output"] = output
    if fmt == "rich" and output is None:
        from accelctl.report.width import output_width

        print_rich(tables, width=None if wide else output_width(sys.stdout, 200), ids=None if wide else ids)
        return
    text = render(tables, "md" if fmt == "rich" else fmt, **extra) or ""
    if output is not None:  # "" too: a file that cannot be, refused
        from accelctl.report.exportpath import refusal, shown, write_file

        try:
            write_file(output, text.encode("utf-8"))
        except OSError as exc:
            raise refusal("--output", output, exc, "write") from None
        print(f"wrote {shown(output)}", file=sys.stderr)
    elif reply is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def short_ids_of(records: list, runs_dir: str | None) -> dict[str, str]:
    """{run id: its shortest tail unique in the store} for ``records``."""
    from accelctl.report.width import short_ids
    from accelctl.run.store import runs_root

    root = runs_root(runs_dir)
    try:
        universe = [n for n in os.listdir(root) if (root / n).is_dir()]
    except OSError:
        universe = []
    return short_ids([r.id for r in records], universe)


def entries_of(records: list) -> list:
    """The report entries of ``records``; one whose files have an unexpected shape is named
    on stderr with its reason and left out."""
    from accelctl.report.entry import entry_from_run

    entries = [entry_from_run(r) for r in records]
    for e in entries:
        if e.status.startswith("unreadable"):
            print(f"accelctl: run {e.source} is {e.status} (left out of the report)", file=sys.stderr)
    return [e for e in entries if not e.status.startswith("unreadable")]


_NO_MATPLOTLIB = "--plot needs matplotlib ({}); pip install 'accelctl[report]'"


def check_plot(path: str) -> None:
    """``--plot PATH``'s extension, checked before any table is printed: one matplotlib does
    not write is exit 1 (``accelctl.report.plot.plot_format``)."""
    from accelctl.report.plot import plot_format

    try:
        plot_format(path)
    except ModuleNotFoundError as exc:
        raise AccelctlError(_NO_MATPLOTLIB.format(exc)) from None


def plot(entries: list, path: str, title: str, runs: list, reference: bool = False) -> None:
    """Bars of ``entries``; scaling curves of the ``runs`` entries (and the seeds').  A place
    that cannot take the file is exit 1 naming it (``accelctl.report.plot``)."""
    from accelctl.report.exportpath import shown
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
        raise AccelctlError(_NO_MATPLOTLIB.format(exc)) from None
    print(f"wrote {shown(out)}", file=sys.stderr)


def table_options(p) -> None:
    p.add_argument("--format", "-f", choices=FORMATS, default="rich",
                   help="rich table (default), md, csv (one table, a 'table' column naming each row's) or json")
    p.add_argument("--json", action="store_const", dest="format", const="json",
                   help="one JSON document on stdout in every outcome, errors and diagnostics inside (docs/cli.md)")
    p.add_argument("--output", "-o", help="write the text to this file instead of stdout")
    p.add_argument("--runs-dir", default=None, help="run store (default $ACCELCTL_RUNS_DIR or ./runs)")
    p.add_argument("--wide", action="store_true", help="rich tables: every column and full run ids, however "
                   "wide (default: fitted to the terminal or $COLUMNS, short ids)")


def guarded(fn):
    """Run-store errors (no such run, ambiguous id) are usage errors: one line (or the JSON
    document's error), exit 2."""

    def run(args) -> int:
        return unknown_run_is_usage(fn, args)

    return run
