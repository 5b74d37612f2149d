"""``accelctl run``: parse its options into an orchestrator ``Request`` and show the runs --
on the console stream or in the live TUI.  The policy (target choice, the pre-checks, preflight,
repeats, shared workers, exit codes) is ``accelctl.run.orchestrate``'s; this module prints.
Imports nothing heavy at module level."""

from __future__ import annotations

import signal
import sys

from accelctl import exitcodes
from accelctl.cli.common import (FP8_HELP, RUNS_DIR_HELP, add_set, color, fp8_needs_rehearse, reply_of,
                                 unknown_run_is_usage)
from accelctl.cli.preflight import print_preflight
from accelctl.cli.viewer import use_tui
from accelctl.errors import AccelctlError


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
    r.set_defaults(fn=cmd_run, run_parser=r)
    return r


def _stop_like_ctrl_c(signum, frame) -> None:
    """SIGTERM / SIGHUP to a run's supervisor stop the run as Ctrl-C does (its launches get the
    SIGINT -> SIGTERM -> SIGKILL sequence, the run is recorded ``stopped``), instead of
    killing the runner and leaving its workers running."""
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def request_of(args):
    """The orchestrator's ``Request`` of ``run``'s options."""
    from accelctl.run.orchestrate import Request

    return Request(target=args.target, engine=args.engine, rehearse=args.rehearse, fp8=args.fp8,
                   runs_dir=args.runs_dir, only=tuple(args.launch) if args.launch else None,
                   preflight=args.preflight, preflight_timeout=args.preflight_timeout)


def cmd_run(args) -> int:
    """``accelctl run``: ``--detach`` starts the run's supervisor and returns; the supervisor
    (``accelctl.run.detach``'s mark in its environment) runs it; a foreground run starts the same
    supervisor and views it: on the console stream (``accelctl.run.foreground``) or, on a terminal,
    in the live TUI (``accelctl.tui.supervised``)."""
    if args.detach:  # the run's own supervisor, in a session of its own
        return run_detached(args)
    from accelctl.run.detach import detached

    if args.json:
        args.headless = True  # no TUI: the console stream goes to stderr, the document to stdout
    supervisor = detached()  # this process is the run's supervisor: a SIGHUP does not stop it
    if not supervisor and use_tui(args) and not args.launch and not args.resume:
        return run_in_tui(args)
    if not supervisor:
        return run_foreground(args)
    signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
    if args.resume:
        return resume_run(args)
    source, chosen, req = checked(args)
    face = ConsoleFace(args, source=source)
    args.fast_exit = True  # (set before the runs: a stop's exit code 130 ends the program as fast)
    from accelctl.run import orchestrate

    return orchestrate.run_all(chosen, source, req, face)


def checked(args):
    """The workloads of ``run FILE`` read, their targets chosen and planned, and every refusal
    made before anything starts (``orchestrate.refuse_unstartable``): (source, chosen, request)."""
    if not args.file:
        raise AccelctlError("run needs a workload FILE (or --resume RUN_ID)", exit_code=exitcodes.USAGE)
    fp8_needs_rehearse(args)
    from accelctl.api import load_selected_source
    from accelctl.cli.track import with_flags
    from accelctl.run import orchestrate

    req = request_of(args)
    # read once: the run stores what was checked (with the --set settings written in)
    source, specs = load_selected_source(args.file, args.workload, args.set)
    # --mlflow / --wandb / --tensorboard: checked before anything starts
    chosen = [orchestrate.Chosen(*c) for c in with_flags(args, orchestrate.choose(specs, req))]
    orchestrate.refuse_unstartable(chosen, source, req)
    return source, chosen, req


#: ``run``'s options a supervisor is not given as they were: it is headless, stores where it is told
_NOT_PASSED = {"file", "detach", "json", "headless", "runs_dir", "help"}


def supervisor_argv(args) -> list[str]:
    """``run``'s command line for the run's supervisor, rebuilt from ``args``: every option given
    (each value joined to its option, ``--set`` and ``--launch`` repeated), then ``--`` and the
    file, so that no value is ever taken for an option."""
    argv = []
    for action in args.run_parser.arguments:
        if action.dest in _NOT_PASSED or not action.option_strings:
            continue
        value, flag = getattr(args, action.dest, None), max(action.option_strings, key=len)
        if value is None or value == action.default:
            continue
        if value is True or (action.const is not None and value == action.const):
            argv.append(flag)
        else:
            argv += [f"{flag}={v}" for v in (value if isinstance(value, list) else [value])]
    return argv + (["--", args.file] if args.file else [])


def run_detached(args) -> int:
    """``accelctl run ... --detach``: the run's supervisor started in a session of its own; the
    first run's id on stdout (the hints on stderr).  A workload refused before any run: the
    supervisor's output and exit code are this command's."""
    from accelctl.run import detach, store

    argv = supervisor_argv(args)  # each value joined to its option, the file after "--"
    try:
        started = detach.start(argv, store.runs_root(args.runs_dir))
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


def run_foreground(args) -> int:
    """``accelctl run`` in the foreground: the same checks here first (a refusal is this command's,
    positioned, and nothing starts), then the run's own supervisor started and viewed."""
    if args.resume:
        resume_checks(args)
    else:
        checked(args)
    from accelctl.cli.common import reply_of
    from accelctl.run import foreground

    reply = reply_of(args)
    viewed = foreground.run(supervisor_argv(args), args.runs_dir, json_document=reply is not None)
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


def run_in_tui(args) -> int:
    """``accelctl run FILE`` on a terminal: the same checks here first, then the run's own
    supervisor started and its runs shown in the live TUI, one after the other; leaving the TUI
    while a run goes on (``q``, a hang-up) only detaches from it."""
    _, chosen, _ = checked(args)
    from pathlib import Path

    from accelctl.tui.app import AccelctlApp, Selection
    from accelctl.tui.supervised import view

    spec = chosen[0].spec
    path = Path(spec.path) if spec.path and spec.path != "<input>" else None
    viewed = view(supervisor_argv(args), args.runs_dir, path, Selection(path, spec.name, chosen[0].plan.target),
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


class ConsoleFace:
    """The run's supervisor's face for the orchestrator: the console stream (``ConsoleSink``), which
    a viewer (``accelctl.run.foreground``, ``accelctl.tui.supervised``) shows; ``run --json`` fills
    the document."""

    def __init__(self, args, source: str | None = None) -> None:
        self.args, self.source = args, source

    def say(self, text: str, error: bool = False) -> None:
        print(f"accelctl: {text}", file=sys.stderr if error else sys.stdout, flush=True)

    def announce(self, c, only) -> None:
        announce(c.spec, c.plan, c.why, only)

    def preflighted(self, c, result) -> None:
        print_preflight(c, result, reply_of(self.args))

    def sinks(self, c):
        from accelctl.run.console import ConsoleSink

        return [ConsoleSink(headless=self.args.headless, job=c.plan.job, rehearsal=c.plan.rehearsal)]

    def ran(self, c, result, sinks, series_id) -> int | None:
        record_run(self.args, c.plan, result, series_id)
        if any(getattr(s, "reader_gone", False) for s in sinks):  # ``accelctl run | head``: stdout's reader left
            return exitcodes.BROKEN_PIPE
        return None

    def not_run(self, names: list[str]) -> None:
        for name in names:
            print(f"accelctl: workload {name} not run: the run before it was stopped", file=sys.stderr, flush=True)
        if reply := reply_of(self.args):  # run --json: the workloads a stop left out, named
            reply.result.setdefault("not_run", []).extend(names)


def record_run(args, p, result, series: str | None = None) -> None:
    """``run --json``: a finished run in the document (its id, status, folder, summary.json)."""
    if reply := reply_of(args):
        reply.result.setdefault("runs", []).append({
            "run_id": result.run_dir.name, "status": result.status, "run_dir": str(result.run_dir),
            "workload": p.workload, "target": p.target, "backend": p.backend, "engine": p.engine,
            "rehearsal": p.rehearsal is not None, "series": series, "summary": result.summary})
        if result.status != "ok":
            failure = (result.summary or {}).get("failure") or {}
            why = failure.get("message") if isinstance(failure, dict) else None
            reply.fail("RunStopped" if result.status == "stopped" else "RunFailed",
                       f"run {result.run_dir.name} {result.status}" + (f": {why}" if why else ""))


def announce(spec, p, why: str, only) -> None:
    """The lines ``accelctl run`` prints before a workload's run: target, rehearsal, warnings."""
    from accelctl.contract.plan import FREE_PORT

    print(f"accelctl: workload {spec.name} -> target {p.target} ({why}); backend {p.backend}", flush=True)
    if p.rehearsal is not None:
        print(color(f"REHEARSAL of target {p.rehearsal.of} ({p.rehearsal.world_size} x {p.rehearsal.device}) on "
                     f"{p.rehearsal.on} with the stand-in: " + ("; ".join(p.rehearsal.changes) or "same layout"),
                     "1;33", sys.stdout), flush=True)
    for w in p.warnings:
        print(color(f"WARNING: {w}", "1;33", sys.stdout), flush=True)
    from accelctl.plan.tracking import logging_launch, tracks_here

    if p.tracking is not None and p.tracking.enabled and not tracks_here(p, only):
        print(f"accelctl: tracking: not from this runner: the runner of launch {logging_launch(p)} (rank 0) logs "
              "the run", flush=True)
    else:
        for note in (n for n in p.notes if n.startswith("tracking: ")):  # track { ... }: where it goes
            print(f"accelctl: {note}", flush=True)
    if only is not None:
        print(f"accelctl: starting launch(es) {', '.join(only)} only; the others run elsewhere", flush=True)
        if any(FREE_PORT in a for ln in p.launches for a in ln.argv):
            print(color(f"WARNING: the plan uses {FREE_PORT}, a port this accelctl picks for itself: other "
                         "machines cannot know it (set a fixed port, e.g. engine torchrun { rdzv_endpoint = "
                         '"NODE0:29400" })', "1;33", sys.stdout), flush=True)



def resume_run(args) -> int:
    """``accelctl run [FILE] --resume RUN_ID``: the run's own plan, from its newest checkpoint,
    into its own folder (FILE, when given, is the workload file checked unchanged)."""
    from accelctl.api import prepare_resume, resume
    from accelctl.run.console import ConsoleSink
    from accelctl.run.orchestrate import exit_code, wait

    resume_checks(args)
    point = prepare_resume(args.resume, args.runs_dir, args.file)
    args.fast_exit = True
    print(f"accelctl: resuming run {point.run_dir.name} after step {point.step} "
          f"(checkpoint {point.checkpoint})", flush=True)
    sink = ConsoleSink(headless=args.headless, job=point.job, rehearsal=point.plan.rehearsal)
    result = wait(resume(point, sinks=[sink]))
    record_run(args, point.plan, result)
    return exit_code(result.status)


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
