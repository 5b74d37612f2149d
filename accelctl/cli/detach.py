"""Verbs of runs that outlive the terminal, and of the store's housekeeping:

    accelctl status [RUN]               state, step, phase, ETA (no RUN: every run in progress)
    accelctl logs RUN [-f] [--rank N]   the run's worker.log (-f: follow it while the run goes on)
    accelctl attach RUN                 the console stream of a running or finished run
    accelctl cancel RUN                 stop a run from any terminal; nothing of it left running
    accelctl runs rm RUN...             remove runs (never one in progress)
    accelctl runs gc --failed | --older-than 7d [--dry-run]

``accelctl run FILE --detach``, which starts such a run, is ``run``'s (``accelctl.cli.run``);
``runs rm`` and ``runs gc`` go under ``runs`` where the parser is built (``accelctl.cli.add_runs``).
The logic lives in ``accelctl.run`` (``detach``, ``follow``, ``liveness``, ``housekeeping``);
this module parses and prints.  Imports nothing heavy at module level.
"""

from __future__ import annotations

import argparse
import signal
import sys

from accelctl import exitcodes
from accelctl.cli.common import JSON_HELP, RUNS_DIR_HELP
from accelctl.errors import AccelctlError


def _reply(args):
    return getattr(args, "reply", None)


def _record(args, run_id: str):
    from accelctl.cli.common import unknown_run_is_usage
    from accelctl.run.store import load_run

    return unknown_run_is_usage(load_run, run_id, args.runs_dir)


# ------------------------------------------------------------------ status, logs, attach, cancel

def cmd_status(args) -> int:
    from accelctl.api import list_runs
    from accelctl.run.store import liveness
    from accelctl.run.viewers import follow

    if args.run is not None:  # "" too: a RUN that names no run, refused
        states = [follow.state_of(_record(args, args.run))]
    else:
        states = [follow.state_of(r) for r in list_runs(args.runs_dir) if liveness.in_progress(r)]
    if reply := _reply(args):
        reply.result = {"runs": [s.to_dict() for s in states]}
    elif not states:
        print("no run in progress")
    for s in states if reply is None else ():
        print(s.line())
    return exitcodes.OK


class _Detach:
    """SIGINT, SIGTERM and SIGHUP to a viewer (``logs -f``, ``attach``) end the viewing, not the
    run: ``set`` is called from the handler, the follow loop asks ``is_set``."""

    def __init__(self) -> None:
        import threading

        self.event = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, lambda signum, frame: self.event.set())

    def __call__(self) -> bool:
        return self.event.is_set()


def _detached_note(run_id: str) -> int:
    print(f"accelctl: detached from run {run_id}; it goes on (accelctl attach {run_id} follows it again, "
          f"accelctl cancel {run_id} stops it)", file=sys.stderr, flush=True)
    return exitcodes.STOPPED


def cmd_logs(args) -> int:
    from accelctl.run.viewers import follow
    from accelctl.run.store import LOG_FILE

    record = _record(args, args.run)
    world = follow.world_size(record)
    if args.rank is not None and not 0 <= args.rank < world:
        raise AccelctlError(f"run {record.id} has ranks 0 to {world - 1}: no rank {args.rank}",
                            exit_code=exitcodes.USAGE)
    from accelctl.contract import boundedfile

    if why := boundedfile.problem(record.path / LOG_FILE, 1 << 62):  # "" when missing: no lines yet
        raise AccelctlError(f"run {record.id}: {why}, not read", exit_code=exitcodes.FAILED)
    stopped = _Detach() if args.follow else (lambda: False)
    reply = _reply(args)
    kept = []
    out = sys.stdout.buffer if reply is None and hasattr(sys.stdout, "buffer") else None
    for line in follow.follow_lines(record.path, LOG_FILE, args.follow, stopped):
        if args.rank is not None and follow.rank_of(line, world) != args.rank:
            continue
        if reply is not None:
            kept.append(line.decode("utf-8", "replace"))
        elif out is not None:
            out.write(line + b"\n")
            out.flush()
        else:
            print(line.decode("utf-8", "replace"), flush=True)
    if reply is not None:
        reply.result = {"run_id": record.id, "lines": kept}
    return _detached_note(record.id) if stopped() else exitcodes.OK


def cmd_attach(args) -> int:
    from accelctl.run.viewers import follow
    from accelctl.run.supervision.orchestrate import exit_code
    from accelctl.run.viewers.console import ConsoleSink

    record = _record(args, args.run)
    reply = _reply(args)
    if reply is None and not args.headless:  # on a terminal: the live TUI (a pipe: the console stream)
        from accelctl.cli.viewer import use_tui

        if use_tui(args):
            return _attach_tui(record, args.runs_dir)
    plan = record.plan()
    sink = ConsoleSink(follow._job(record.path), headless=True, rehearsal=plan.rehearsal if plan else None)
    stopped = _Detach()
    ended = follow.attach(record, sink, stopped)
    if ended is None:
        return _detached_note(record.id)
    if reply is not None:
        reply.result = {"run_id": record.id, "status": ended.status, "summary": ended.summary}
        if ended.status != "ok":
            reply.fail("RunStopped" if ended.status == "stopped" else "RunFailed", f"run {record.id} {ended.status}")
    return exit_code(ended.status)


def _attach_tui(record, runs_dir) -> int:
    """The run's view in the TUI until the viewer leaves; the run's exit status if it has ended by
    then, else the detached note (130): leaving never stops the run."""
    from accelctl.run.store import liveness
    from accelctl.run.supervision.orchestrate import exit_code
    from accelctl.run.store import read_run
    from accelctl.tui.live import attach_live

    signal.signal(signal.SIGHUP, signal.SIG_DFL)  # a hung-up viewer just ends; the run is another process's
    attach_live(record.path, runs_dir)
    again = read_run(record.path)
    if liveness.in_progress(again):
        return _detached_note(record.id)
    return exit_code(again.status)


def cmd_cancel(args) -> int:
    from accelctl.run.supervision import detach

    record = _record(args, args.run)
    done = detach.cancel(record, args.timeout)
    if reply := _reply(args):
        reply.result = {"run_id": record.id, "status": done.status, "was_running": done.was_running,
                        "left": done.left}
    if done.left:
        message = f"run {record.id}: {len(done.left)} process(es) still alive after SIGKILL: {done.left}"
        if reply:
            reply.fail("CancelFailed", message)
        print(f"accelctl: {message}", file=sys.stderr)
        return exitcodes.FAILED
    print(f"accelctl: run {record.id} {'cancelled' if done.was_running else 'had already ended'}: {done.status}; "
          "no process of it is left", file=sys.stderr if reply else sys.stdout)
    return exitcodes.OK


# ------------------------------------------------------------------ runs rm, runs gc

def cmd_runs_rm(args) -> int:
    from accelctl.run.store import housekeeping

    records = [_record(args, name) for name in args.runs]  # an unknown id: nothing removed
    return _removed(args, housekeeping.remove(records, args.dry_run))


def cmd_runs_gc(args) -> int:
    from accelctl.api import list_runs
    from accelctl.cli.run_times import started_unix_s
    from accelctl.run.store import housekeeping

    if not args.failed and args.older_than is None:
        raise AccelctlError("runs gc needs --failed or --older-than AGE (or both)", exit_code=exitcodes.USAGE)
    every = list_runs(args.runs_dir)
    chosen = housekeeping.gc_candidates(every, failed=args.failed, started_before=args.older_than,
                                        started_unix_s=started_unix_s)
    done = housekeeping.remove(chosen, args.dry_run)
    lost = housekeeping.keep_lost([r for r in every if r.id not in done.removed], args.dry_run)
    if lost:
        print(f"{'would write' if args.dry_run else 'wrote'} the result of {len(lost)} lost run(s) into its folder",
              file=sys.stderr)
    consoles = housekeeping.remove_consoles(args.runs_dir, args.dry_run)
    if consoles:
        print(f"{'would remove' if args.dry_run else 'removed'} the console file(s) of {len(consoles)} ended "
              f"detached supervisor(s)", file=sys.stderr)
    code = _removed(args, done)
    if reply := _reply(args):
        reply.result["consoles"] = consoles
        reply.result["lost_written"] = lost
    return code


def _removed(args, done) -> int:
    """Print (or put in the document) what ``runs rm``/``gc`` removed and kept; exit 2 when a
    run was refused because it is in progress, 1 when one could not be removed."""
    verb = "would remove" if args.dry_run else "removed"
    if reply := _reply(args):
        reply.result = {**done.to_dict(), "dry_run": args.dry_run}
    else:
        for run_id in done.removed:
            print(f"{verb} {run_id}")
        if not (done.removed or done.running or done.failed):
            print("no run to remove")
    for run_id, why in done.running:
        print(f"accelctl: kept {run_id}: it is in progress ({why}); accelctl cancel {run_id} stops it",
              file=sys.stderr)
    for run_id, why in done.failed:
        print(f"accelctl: could not remove {run_id}: {why}", file=sys.stderr)
    code = exitcodes.FAILED if done.failed else exitcodes.USAGE if done.running else exitcodes.OK
    if reply and code:
        reply.fail("RunsKept", f"{len(done.running)} run(s) in progress kept, {len(done.failed)} not removable")
    return code


# ------------------------------------------------------------------ parsers

def _run_arg(p, nargs=None) -> None:
    p.add_argument("run", nargs=nargs, metavar="RUN", help="run id (or a unique prefix or suffix) or run folder")
    p.add_argument("--runs-dir", default=None, help=RUNS_DIR_HELP)
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def add_status(sub) -> None:
    s = sub.add_parser("status")
    _run_arg(s, "?")
    s.set_defaults(fn=cmd_status)


def add_logs(sub) -> None:
    lg = sub.add_parser("logs")
    _run_arg(lg)
    lg.add_argument("--follow", "-f", action="store_true",
                    help="go on printing what is written until the run ends (Ctrl-C: stop following; the run goes on)")
    lg.add_argument("--rank", type=int, metavar="N", help="only rank N's lines (torch's [rankN]: tag)")
    lg.set_defaults(fn=cmd_logs)


def add_attach(sub) -> None:
    a = sub.add_parser("attach")
    _run_arg(a)
    a.add_argument("--headless", action="store_true", help="the console stream even on a terminal (no TUI)")
    a.set_defaults(fn=cmd_attach)


def add_cancel(sub) -> None:
    c = sub.add_parser("cancel")
    _run_arg(c)
    c.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds to wait for the run to end before killing what is left (default 60)")
    c.set_defaults(fn=cmd_cancel)


def add_runs_verbs(runs: argparse.ArgumentParser) -> None:
    """``runs rm`` and ``runs gc`` under ``runs`` (which alone still lists the store)."""
    from accelctl.cli.run_times import since

    verbs = runs.add_subparsers(dest="runs_verb", metavar="{rm,gc}",
                                help="rm: remove runs; gc: remove failed or old runs (never a run in progress)")
    rm = verbs.add_parser("rm", help="remove runs by id (never one in progress: exit 2)")
    rm.add_argument("runs", nargs="+", metavar="RUN", help="run ids (or unique prefixes or suffixes) or folders")
    gc = verbs.add_parser("gc", help="remove failed runs and/or runs older than an age (never one in progress)")
    gc.add_argument("--failed", action="store_true", help="runs that failed (a lost runner too) or never started")
    gc.add_argument("--older-than", metavar="AGE", type=since,
                    help="runs started more than AGE ago (90m, 12h, 7d, 2w) or before an ISO date")
    for p in (rm, gc):
        p.add_argument("--dry-run", action="store_true", help="say what would be removed; remove nothing")
        p.add_argument("--runs-dir", default=argparse.SUPPRESS, help=RUNS_DIR_HELP)
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help=JSON_HELP)
    rm.set_defaults(fn=cmd_runs_rm)
    gc.set_defaults(fn=cmd_runs_gc)
