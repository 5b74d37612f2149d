"""``accelctl runs``: which store it reads (and a folder named that does not exist), and the
filters applied before the table: ``--workload``, ``--target``, ``--status``, ``--since``.

Imports nothing heavy: ``runs`` stays a cold start.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, Sequence

from accelctl.cli.run_times import since, started_unix_s

#: the environment variable naming the store (accelctl.run.store.RUNS_DIR_ENV)
RUNS_DIR_ENV = "ACCELCTL_RUNS_DIR"
STATUSES = ("ok", "failed", "stopped", "incomplete", "unreadable")


def add_filters(parser: argparse.ArgumentParser) -> None:
    """The ``runs`` filter options."""
    parser.add_argument("--workload", "-w", metavar="NAME",
                        help="only runs of this workload (a shell pattern: 'bert*')")
    parser.add_argument("--target", "-t", metavar="NAME", help="only runs on this target (a shell pattern)")
    parser.add_argument("--status", "-s", type=statuses, metavar="STATUS[,STATUS]",
                        help=f"only runs with this status: {', '.join(STATUSES)} (comma-separated for several)")
    parser.add_argument("--since", type=since, metavar="WHEN",
                        help="only runs started since WHEN: an age (90m, 12h, 2d, 1w) or an ISO date or time "
                             "(2026-01-31, 2026-01-31T08:00; UTC unless it names a zone)")


def statuses(text: str) -> tuple[str, ...]:
    wanted = tuple(s.strip() for s in text.split(",") if s.strip())
    unknown = [s for s in wanted if s not in STATUSES]
    if unknown or not wanted:
        raise argparse.ArgumentTypeError(f"unknown status {', '.join(unknown) or repr(text)} "
                                         f"(one of {', '.join(STATUSES)})")
    return wanted


def filtered(runs: Sequence[Any], args: argparse.Namespace) -> list[Any]:
    """``runs`` that pass every filter given on the command line (a run whose start is
    unknown does not pass ``--since``)."""
    import fnmatch

    def keep(r) -> bool:
        if args.workload and not fnmatch.fnmatchcase(r.workload, args.workload):
            return False
        if args.target and not fnmatch.fnmatchcase(r.target, args.target):
            return False
        if args.status and r.status.split(":")[0] not in args.status:
            return False
        if args.since is not None:
            start = started_unix_s(r)
            return start is not None and start >= args.since
        return True

    return [r for r in runs if keep(r)]


def filters_given(args: argparse.Namespace) -> bool:
    return any(getattr(args, k, None) not in (None, "") for k in ("workload", "target", "status", "since"))


def missing_store(runs_dir: str | None) -> str | None:
    """The message for a store folder named (``--runs-dir`` or $ACCELCTL_RUNS_DIR) that does
    not exist; None when it exists or none was named (./runs not there yet: no runs yet)."""
    named, how = (runs_dir, "--runs-dir") if runs_dir else (os.environ.get(RUNS_DIR_ENV), f"${RUNS_DIR_ENV}")
    if not named or Path(named).expanduser().exists():
        return None
    return f"no run store at {named} ({how}): the folder does not exist"


def empty_message(runs_dir: str | None, filtered_out: int) -> str:
    """What ``runs`` prints when there is nothing to list."""
    if filtered_out:
        return f"no runs match the filters ({filtered_out} stored run(s) do not)"
    where = runs_dir or os.environ.get(RUNS_DIR_ENV) or "./runs"
    return f"no runs yet in {where} (accelctl run FILE stores them there)"


def add_parser(sub) -> argparse.ArgumentParser:
    """``accelctl runs``; returns its parser, under which ``accelctl.cli.add_runs`` adds ``runs rm``
    and ``runs gc`` (``accelctl.cli.detach``)."""
    from accelctl.cli.common import JSON_HELP, RUNS_DIR_HELP

    ls = sub.add_parser("runs")
    ls.add_argument("--runs-dir", default=None, help=RUNS_DIR_HELP)
    add_filters(ls)
    ls.add_argument("--json", action="store_true", help=JSON_HELP)
    ls.add_argument("--wide", action="store_true", help="every column and full run ids, however wide "
                    "(default: fitted to the terminal or $COLUMNS, short ids)")
    ls.set_defaults(fn=cmd_runs)
    return ls


def cmd_runs(args) -> int:
    import sys

    from accelctl import exitcodes
    from accelctl.api import list_runs
    from accelctl.cli.common import reply_of
    from accelctl.errors import AccelctlError
    from accelctl.run.store import RunStoreError

    if missing := missing_store(args.runs_dir):
        raise AccelctlError(missing, exit_code=exitcodes.USAGE)
    try:
        stored = list_runs(args.runs_dir)
    except RunStoreError as exc:
        raise AccelctlError(str(exc), exit_code=exitcodes.USAGE) from None
    runs = filtered(stored, args)
    if reply := reply_of(args):
        reply.result = {"runs": [r.__dict__ if hasattr(r, "__dict__") else r for r in runs]}
        return exitcodes.OK
    if not runs:
        print(empty_message(args.runs_dir, len(stored)))
        return 0
    from accelctl.report.width import output_width
    from accelctl.report.render import print_runs

    # fitted to the terminal or $COLUMNS (80 where stdout is not a terminal, as rich did)
    print_runs(runs, None if args.wide else output_width(sys.stdout, 80), [r.id for r in stored])
    return 0
