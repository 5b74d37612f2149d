"""The ``accelctl tui`` verb.  Imported by ``accelctl.cli.build_parser`` for its parser (and by help and completion),
so it imports nothing heavy: Textual loads only when the verb runs."""

from __future__ import annotations

import sys

from accelctl.cli.common import textual_missing


def register(sub) -> None:
    p = sub.add_parser("tui")
    p.add_argument("path", nargs="?", default=None,
                   help="a folder of .wl files, or one .wl file (default: ./workloads, else .)")
    p.add_argument("--runs-dir", default=None, help="run store (default $ACCELCTL_RUNS_DIR or ./runs)")
    p.add_argument("--view", choices=("workloads", "plan", "run", "runs"), default="workloads",
                   help="the view to open first")
    p.add_argument("--preflight", action="store_true",
                   help="preflight each run started here first, as run --preflight: a seconds-long all-reduce over "
                        "the planned world through the same launches and engine; the run starts only if it passes")
    p.set_defaults(fn=cmd_tui)


def cmd_tui(args) -> int:
    import os

    from accelctl.dsl.source import absent, read_source

    missing = textual_missing()
    if missing:
        print(f"error: {missing}", file=sys.stderr)
        return 2
    if args.path is not None and absent(args.path):
        print(f"error: no such file or folder: {args.path}", file=sys.stderr)
        return 2
    if args.path is not None and not os.path.isdir(args.path):
        read_source(args.path)  # a file that cannot be read (a FIFO, a device, a link loop...): its E00x
    from accelctl.run.supervision.foreground import Signals
    from accelctl.tui.app import AccelctlApp
    from accelctl.tui.priority import lower_this_thread

    with Signals() as signals:  # SIGTERM: the run `r` started is stopped; SIGHUP: it goes on
        app = AccelctlApp(args.path, runs_root=args.runs_dir, start=args.view, preflight=args.preflight,
                          signals=signals)
        lower_this_thread()  # the display yields to the runs it starts (they start at normal priority)
        app.run()
    left_going(app.supervisor)
    # a quit is a quit: the exit code of `accelctl tui` is not the last run's (`accelctl run` is)
    return 0


def left_going(sup) -> None:
    """The TUI left while the run ``r`` started goes on under its own supervisor: say where it is."""
    if sup is None or sup.ended():
        if sup is not None:
            sup.forget()
        return
    run = sup.runs[-1].name if sup.runs else None
    how = (f"accelctl attach {run} follows it again, accelctl cancel {run} stops it" if run
           else f"its console: {sup.spawned.console}")
    if run:  # found by its id: its console folder is not needed
        sup.forget()
    try:
        print(f"accelctl: {sup.why or 'the TUI ended'}: run {run or '(not started yet)'} goes on under its own "
              f"supervisor (pid {sup.pid}; {how})", file=sys.stderr, flush=True)
    except OSError:  # the terminal itself is gone
        pass
