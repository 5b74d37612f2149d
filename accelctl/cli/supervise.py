"""A run's supervisor: ``python -m accelctl.cli.supervise`` (``accelctl.entrypoints.SUPERVISOR``).

``accelctl run`` and the TUI start it in a session of its own with the runs they checked and
planned on its stdin (``accelctl.run.supervision.batch``); it never reads the workload file again and takes
no options.  It owns the runs: it starts their launches, records them, prints their console
stream (which the face that started it views) and, for ``run --json``, writes the document on
stdout.  SIGTERM stops the runs as Ctrl-C does; SIGHUP does nothing (a detached run outlives
its terminal); SIGKILL leaves no launch behind (``accelctl.run.supervision.supervisor``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from accelctl import exitcodes
from accelctl.cli.common import color, reply_of
from accelctl.cli.preflight import print_preflight
from accelctl.run.supervision.batch import Batch, BatchError, decode


def _stop_like_ctrl_c(signum, frame) -> None:
    """SIGTERM to a run's supervisor stops the run as Ctrl-C does (its launches get the
    SIGINT -> SIGTERM -> SIGKILL sequence, the run is recorded ``stopped``), instead of killing
    the runner and leaving its workers running."""
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _given() -> Batch:
    """The batch on stdin; stdin is ``/dev/null`` from then on (the launches inherit it)."""
    data = sys.stdin.buffer.read()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return decode(data)


def main() -> int:
    """The supervisor process: the batch run, its exit status that of ``accelctl run``."""
    try:
        runs = _given()
    except (BatchError, OSError) as exc:
        print(f"accelctl: error: {exc}: this program is started by `accelctl run` with the runs it planned "
              "on its stdin", file=sys.stderr)
        return exitcodes.USAGE
    signal.signal(signal.SIGHUP, lambda signum, frame: None)  # a handler, not SIG_IGN: exec resets it
    signal.signal(signal.SIGTERM, _stop_like_ctrl_c)
    from accelctl.cli import execute

    args = argparse.Namespace(cmd="run", fn=supervise, runs=runs, headless=True, json=runs.json)
    return execute(args, runs.json)


def supervise(args) -> int:
    """Run ``args.runs``: a resumed run from its own folder, else every planned workload in order
    (``accelctl.run.supervision.orchestrate.run_all``)."""
    runs: Batch = args.runs
    if runs.resume is not None:
        return resume_run(args, runs)
    from accelctl.run.supervision import orchestrate

    return orchestrate.run_all(runs.planned, runs.source, runs.request, ConsoleFace(args))


class ConsoleFace:
    """The supervisor's face for the orchestrator: the console stream (``ConsoleSink``), which a
    viewer (``accelctl.run.supervision.foreground``, ``accelctl.tui.supervised``) shows; ``run --json`` fills
    the document."""

    def __init__(self, args) -> None:
        self.args = args

    def say(self, text: str, error: bool = False) -> None:
        print(f"accelctl: {text}", file=sys.stderr if error else sys.stdout, flush=True)

    def announce(self, c, only) -> None:
        announce(c.name, c.plan, c.why, only)

    def preflighted(self, c, result) -> None:
        print_preflight(c, result, reply_of(self.args))

    def sinks(self, c):
        from accelctl.run.viewers.console import ConsoleSink

        return [ConsoleSink(headless=True, job=c.plan.job, rehearsal=c.plan.rehearsal)]

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


def announce(name: str, p, why: str, only) -> None:
    """The lines ``accelctl run`` prints before a workload's run: target, rehearsal, warnings."""
    from accelctl.contract.plan import FREE_PORT

    print(f"accelctl: workload {name} -> target {p.target} ({why}); backend {p.backend}", flush=True)
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


def resume_run(args, runs: Batch) -> int:
    """``accelctl run [FILE] --resume RUN_ID``: the run's own plan, read from its folder, from its
    newest checkpoint, into that folder (``runs.resume_file``, when given, is the workload file
    checked unchanged)."""
    from accelctl.api import prepare_resume, resume
    from accelctl.run.viewers.console import ConsoleSink
    from accelctl.run.supervision.orchestrate import exit_code, wait

    point = prepare_resume(runs.resume, runs.request.runs_dir, runs.resume_file)
    print(f"accelctl: resuming run {point.run_dir.name} after step {point.step} "
          f"(checkpoint {point.checkpoint})", flush=True)
    sink = ConsoleSink(headless=True, job=point.job, rehearsal=point.plan.rehearsal)
    result = wait(resume(point, sinks=[sink]))
    record_run(args, point.plan, result)
    return exit_code(result.status)


if __name__ == "__main__":
    code = main()
    try:  # every file of the runs is closed by now: the interpreter's shutdown is skipped (docs/bench.md)
        sys.stdout.flush()
        sys.stderr.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass
    os._exit(code)
