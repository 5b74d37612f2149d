"""``accelctl run``: read, check and plan the workloads once, then start the runs' own supervisor
(``accelctl.cli.supervise``) on those plans (``accelctl.run.supervision.batch``) and view it -- on the console
stream or in the live TUI -- or leave it running (``--detach``).  The policy (target choice, the
pre-checks, preflight, repeats, shared workers, exit codes) is ``accelctl.run.supervision.orchestrate``'s.
Imports nothing heavy at module level."""

from __future__ import annotations

import sys

from accelctl import exitcodes
from accelctl.cli.common import (FP8_HELP, RUNS_DIR_HELP, add_set, fp8_needs_rehearse, reply_of,
                                 unknown_run_is_usage)
from accelctl.cli.viewer import use_tui
from accelctl.errors import AccelctlError
from accelctl.frozen import replace


def add_parser(sub):
    """``accelctl run``."""
    r = sub.add_parser("run")
    add_set(r)
    r.add_argument("file", nargs="?", help="the workload file (with --resume: checked unchanged since the run)")
    r.add_argument("--workload", "-w")
    r.add_argument("--target", "-t")
    r.add_argument("--engine", "-e")
    r.add_argument("--headless", action="store_true", help="plain console stream (no TUI)")
    r.add_argument("--json", action="store_true", help="the finished runs (id, status, folder, summary.json) as "
                   "one JSON document on stdout; the console stream on stderr")
    r.add_argument("--rehearse", action="store_true",
                   help="rehearse an accelerator target on this CPU: its plan with the stand-in, scaled to this "
                        "machine, marked as a rehearsal everywhere (default: the first accelerator target)")
    r.add_argument("--fp8", action="store_true", help=FP8_HELP)
    r.add_argument("--runs-dir", default=None, help=RUNS_DIR_HELP)
    r.add_argument("--preflight", action="store_true",
                   help="first run a seconds-long all-reduce over the planned world through the same launches and "
                        "engine; the run starts only if it passes (a broken rendezvous costs seconds)")
    r.add_argument("--preflight-timeout", type=float, default=300.0, metavar="S",
                   help="seconds the preflight may take, queue time included (default 300)")
    r.add_argument("--launch", action="append", metavar="NAME",
                   help="start only this launch of the plan (repeatable), e.g. --launch node1 on node 1 of a "
                        "torchrun rendezvous; the others run elsewhere (default: all, here)")
    r.add_argument("--resume", metavar="RUN_ID",
                   help="continue a stopped or failed run from its newest checkpoint, into the same run record "
                        "(its workload needs checkpoint { every = N steps }; refused when the workload file "
                        "changed since)")
    r.add_argument("--detach", "-d", action="store_true",
                   help="start the run under its own supervisor (not this terminal's session), print its id and "
                        "return; then: accelctl status|logs|attach|cancel RUN")
    from accelctl.cli.track import add_arguments as add_tracker_flags

    add_tracker_flags(r)
    r.set_defaults(fn=cmd_run)
    return r


def request_of(args):
    """The orchestrator's ``Request`` of ``run``'s options."""
    from accelctl.run.supervision.orchestrate import Request

    return Request(target=args.target, engine=args.engine, rehearse=args.rehearse, fp8=args.fp8,
                   runs_dir=args.runs_dir, only=tuple(args.launch) if args.launch else None,
                   preflight=args.preflight, preflight_timeout=args.preflight_timeout)


def cmd_run(args) -> int:
    """``accelctl run``: the workloads checked and planned here (a refusal is this command's,
    positioned, and nothing starts), then their supervisor started on the plans: left running
    with ``--detach``, else viewed -- on a terminal in the live TUI, else on the console stream."""
    if args.json:
        args.headless = True  # no TUI: the console stream goes to stderr, the document to stdout
    if args.resume:
        resume_checks(args)
        chosen, runs = [], batch_of(args, resume=args.resume)
    else:
        source, chosen, req = checked(args)
        runs = batch_of(args, chosen, source, req)
    if args.detach:  # the run's own supervisor, in a session of its own
        return run_detached(args, runs)
    if use_tui(args) and not args.launch and not args.resume:
        return run_in_tui(args, chosen, runs)
    return run_foreground(args, runs)


def batch_of(args, chosen=(), source=None, req=None, resume=None):
    """What the supervisor is given (``accelctl.run.supervision.batch.Batch``): the plans as checked here, and
    the store resolved here."""
    from accelctl.run.supervision.batch import Batch
    from accelctl.run.supervision.orchestrate import Request
    from accelctl.run.store import runs_root

    req = replace(req or Request(), runs_dir=str(runs_root(args.runs_dir)))
    document = reply_of(args) is not None and not args.detach  # a detached one has no reader for it
    return Batch(tuple(c.planned() for c in chosen), source, req, json=document, resume=resume,
                 resume_file=args.file if resume else None)


def checked(args):
    """The workloads of ``run FILE`` read, their targets chosen and planned, and every refusal
    made before anything starts (``orchestrate.refuse_unstartable``): (source, chosen, request)."""
    if not args.file:
        raise AccelctlError("run needs a workload FILE (or --resume RUN_ID)", exit_code=exitcodes.USAGE)
    fp8_needs_rehearse(args)
    from accelctl.api import load_selected_source
    from accelctl.cli.track import with_flags
    from accelctl.run.supervision import orchestrate

    req = request_of(args)
    # read once: the run stores what was checked (with the --set settings written in)
    source, specs = load_selected_source(args.file, args.workload, args.set)
    # --mlflow / --wandb / --tensorboard: checked before anything starts
    chosen = [orchestrate.Chosen(*c) for c in with_flags(args, orchestrate.choose(specs, req))]
    orchestrate.refuse_unstartable(chosen, source, req)
    return source, chosen, req


def run_detached(args, runs) -> int:
    """``accelctl run ... --detach``: the run's supervisor started in a session of its own; the
    first run's id on stdout (the hints on stderr).  A supervisor that ended before any run (a
    failed preflight, a resume refused): its output and exit code are this command's."""
    from accelctl.run import store
    from accelctl.run.supervision import batch, detach

    try:
        started = detach.start(batch.encode(runs), store.runs_root(args.runs_dir))
    except KeyboardInterrupt as exc:
        print(f"accelctl: {exc}", file=sys.stderr)
        raise
    reply = reply_of(args)
    if started.run_id is None:
        sys.stderr.write(started.console_text())  # its diagnostics, as a foreground run prints them
        started.console.unlink(missing_ok=True)
        code = started.returncode or exitcodes.FAILED
        if reply is not None:
            reply.fail("RunNotStarted", f"the detached supervisor (pid {started.pid}) ended with exit {code} "
                                        "before any run (its output is above, on stderr)")
        return code
    run_dir = store.runs_root(args.runs_dir) / started.run_id
    if reply is not None:
        reply.result = {"run_id": started.run_id, "run_dir": str(run_dir), "supervisor_pid": started.pid,
                        "console": str(started.console)}
    else:
        print(started.run_id, flush=True)
    print(f"accelctl: run {started.run_id} goes on detached (supervisor pid {started.pid}, console "
          f"{started.console}): accelctl status|logs -f|attach|cancel {started.run_id}", file=sys.stderr)
    return exitcodes.OK


def run_foreground(args, runs) -> int:
    """``accelctl run`` in the foreground: the run's own supervisor started and viewed on the
    console stream."""
    from accelctl.run.supervision import foreground

    reply = reply_of(args)
    viewed = foreground.run(runs, args.runs_dir)
    args.fast_exit = True
    _say_killed(viewed)
    if viewed.detached:
        _detached(viewed, reply)
    elif reply is not None and viewed.document:  # the supervisor's document is the command's
        reply.result = viewed.document.get("result") or {}
        reply.diagnostics = viewed.document.get("diagnostics") or []
        reply.error = viewed.document.get("error")
    elif reply is not None and viewed.code:
        reply.fail("RunFailed", f"the run's supervisor (pid {viewed.pid}) ended with exit {viewed.code} and no "
                                "document (its output is above, on stderr)")
    return viewed.code


def run_in_tui(args, chosen, runs) -> int:
    """``accelctl run FILE`` on a terminal: the run's own supervisor started and its runs shown in
    the live TUI, one after the other; leaving the TUI while a run goes on (``q``, a hang-up)
    only detaches from it."""
    from pathlib import Path

    from accelctl.tui.app import AccelctlApp, Selection
    from accelctl.tui.supervised import view

    spec = chosen[0].spec
    path = Path(spec.path) if spec.path and spec.path != "<input>" else None
    viewed = view(runs, args.runs_dir, path, Selection(path, spec.name, chosen[0].plan.target),
                  sum(c.repeats for c in chosen), app_factory=AccelctlApp)
    args.fast_exit = True
    _say_killed(viewed)
    if viewed.detached:
        _detached(viewed, None)
    return viewed.code


def _say_killed(viewed) -> None:
    if viewed.killed_by:
        print(f"accelctl: the run's supervisor (pid {viewed.pid}) was killed by {viewed.killed_by}"
              + (f": accelctl status {viewed.run_id}" if viewed.run_id else ""), file=sys.stderr, flush=True)


def _detached(viewed, reply) -> None:
    """The viewer went away (a hang-up, a closed pipe): the run goes on, and where to find it."""
    who = f"run {viewed.run_id}" if viewed.run_id else f"the run's supervisor (pid {viewed.pid})"
    how = (f"accelctl attach {viewed.run_id} follows it again, accelctl cancel {viewed.run_id} stops it"
           if viewed.run_id else f"its console: {viewed.console}")
    try:
        print(f"accelctl: {viewed.detached}: detached from {who}; it goes on ({how})", file=sys.stderr, flush=True)
    except OSError:  # the terminal itself is gone
        pass
    if reply is None:  # a closed pipe, a hung-up terminal: nothing more to write there (the last flush must not fail)
        from accelctl.cli.pipes import reader_gone

        reader_gone()
    else:
        reply.result = {"run_id": viewed.run_id, "supervisor_pid": viewed.pid}
        reply.fail("Detached", f"{viewed.detached}: detached from {who}; it goes on")


def resume_checks(args) -> None:
    """``run --resume``'s refusals made before anything starts: options that would change the
    run's plan, an unknown run id."""
    fixed = [f"--{name}" for name in ("workload", "target", "engine", "launch") if getattr(args, name)]
    fixed += ["--rehearse"] if args.rehearse else []
    if fixed:
        raise AccelctlError(f"{', '.join(fixed)} cannot change a resumed run: it goes on with its own plan",
                            exit_code=exitcodes.USAGE)
    from accelctl.run.store import load_run

    unknown_run_is_usage(load_run, args.resume, args.runs_dir)
