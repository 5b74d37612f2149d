"""Command line: thin verbs over accelctl.api.

    accelctl validate FILE...            check workloads, every diagnostic at once
    accelctl plan FILE [--target T]      print the launch plan (text, json or sh)
    accelctl run FILE [--target T]       run it for real, stream events, store the run
    accelctl run --resume RUN_ID         continue a run from its newest checkpoint (same run record)
                                         (measure { repeat = N }: N independent runs, one series)
    accelctl runs                        list stored runs

``validate`` and ``plan`` import neither torch nor textual: the heavy stacks load only
inside the launched worker.

Every verb takes ``--json`` (``-f json`` where it has ``-f``): ``main`` then sends whatever
the verb prints to stderr and writes one JSON document on stdout (``accelctl.reply``) in
every outcome, usage errors included.  Exit statuses are ``accelctl.exitcodes``; a verb
that cannot do what it was asked raises ``AccelctlError`` (with its exit code and
diagnostics) and ``main`` renders it as text or into the document.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import traceback
from typing import Sequence

from accelctl import __version__, exitcodes
from accelctl.errors import AccelctlError, Diagnostic, WorkloadError
from accelctl.reply import Reply, UsageError, wants_json


def _color(text: str, code: str, stream=None) -> str:
    """``text`` in colour ``code`` on a terminal, unless $NO_COLOR is set and not empty
    (https://no-color.org, as rich and Textual read it); plain in a pipe."""
    stream = stream or sys.stderr
    return f"\033[{code}m{text}\033[0m" if stream.isatty() and not os.environ.get("NO_COLOR") else text


#: ``--wide`` (validate, plan): every line whole, as in a pipe; set by ``main``
_WIDE = False


def _width(stream) -> int | None:
    """The width plain text (plans, diagnostics) folds to on a terminal: $COLUMNS, else
    the terminal's; None (whole lines) in a pipe or a file, and under ``--wide``."""
    if _WIDE:
        return None
    try:
        if not stream.isatty():
            return None  # what output_width says of a pipe here, without importing it (cold start)
    except (AttributeError, ValueError):
        return None
    from accelctl.report.fit import output_width

    return output_width(stream, None, columns_in_pipe=False)


def _print_diags(diags: Sequence[Diagnostic], stream=None) -> None:
    """Each diagnostic, its message and hint wrapped to the terminal (the source line and
    its caret stay intact: a long one shows a window around the caret); whole in a pipe."""
    if not diags:
        return  # a clean ``validate`` loads nothing more (tests/test_imports.py)
    stream = stream or sys.stderr
    width = _width(stream)
    for d in diags:
        text = d.render(width)
        head, _, rest = text.partition("\n")
        code = "1;31" if d.severity == "error" else "1;33"
        print(_color(head, code, stream) + ("\n" + rest if rest else ""), file=stream)
        print(file=stream)


def _print_error(exc: AccelctlError) -> None:
    """An error's diagnostics, or its one-line message, on stderr."""
    if exc.diagnostics:
        _print_diags(exc.diagnostics)
    else:
        print(_color(f"accelctl: error: {exc}", "1;31"), file=sys.stderr)


# ------------------------------------------------------------------ validate

def _validate_with_sets(path, sets):
    """``api.validate`` of the file with the ``--set`` settings written in."""
    from accelctl.api import validate, validate_text

    if not sets:
        return validate(path)
    from accelctl.dsl.parser import read_source
    from accelctl.spec import settings

    try:
        return validate_text(settings.applied(str(path), read_source(path), settings.parse_sets(list(sets))), path)
    except AccelctlError as exc:
        return (), list(exc.diagnostics)


def cmd_validate(args) -> int:
    report, errors, workloads = [], 0, 0
    for path in args.files:
        specs, diags = _validate_with_sets(path, args.set)
        n_err = sum(d.severity == "error" for d in diags)
        errors += n_err
        workloads += len(specs) if not n_err else 0
        report.append({"path": str(path), "ok": n_err == 0, "workloads": [s.name for s in specs] if not n_err else [],
                       "diagnostics": [d.to_dict() for d in diags]})
        _report_diags(args, diags)
    if reply := _reply(args):
        reply.result = {"files": report}
    else:
        files = len(args.files)
        bad = sum(not r["ok"] for r in report)
        msg = (f"{files} file(s), {workloads} workload(s): ok" if not errors
               else f"{bad} of {files} file(s) invalid, {errors} error(s)")
        refused = sum(d["severity"] == "warning" and d["code"].startswith("E") for r in report for d in r["diagnostics"])
        if refused and not errors:
            msg += f"; {refused} target refusal(s) above: `accelctl plan` refuses those targets"
        print(_color(msg, "32" if not errors else "31", sys.stdout))
    return exitcodes.OK if errors == 0 else exitcodes.FAILED


def _report_diags(args, diags: Sequence[Diagnostic]) -> None:
    """Diagnostics into the JSON document being filled, else on stderr."""
    if reply := _reply(args):
        reply.add(diags)
    else:
        _print_diags(diags)


def _reply(args) -> Reply | None:
    """The JSON document being filled (``--json`` / ``-f json``), None for text output."""
    return getattr(args, "reply", None)


# ------------------------------------------------------------------ plan

#: ``accelctl plan --check``: every plan printed and none rejected, but a check could not run
#: (its tool is not installed here) and ``--allow-unavailable`` was not given
EXIT_CHECK_NOT_RUN = exitcodes.CHECK_NOT_RUN


def cmd_plan(args) -> int:
    """Print each chosen target's plan; a target that cannot be planned prints its diagnostic
    and the others still print (exit 1 if any failed).  With ``--check``: exit 1 when a real
    tool rejected a plan, else EXIT_CHECK_NOT_RUN when a check could not run, unless
    ``--allow-unavailable``."""
    from accelctl.api import load_selected, named_target, plan_diff, refusal_header, render_plan
    from accelctl.api import plan as make_plan

    _fp8_needs_rehearse(args)
    reply = _reply(args)
    if args.diff:
        for spec in load_selected(args.file, args.workload, args.set):
            for name in args.diff:
                named_target(spec, name)  # an unknown target is an error, not an empty diff
            diff = plan_diff(spec, *args.diff, args.engine, None if reply else _width(sys.stdout))
            if reply:
                reply.result.setdefault("diffs", []).append({"workload": spec.name, "targets": args.diff, "diff": diff})
            else:
                print(diff)
        return exitcodes.OK
    failed = not_run = 0
    plans = reply.result.setdefault("plans", []) if reply else []
    chosen = []
    for spec in load_selected(args.file, args.workload, args.set):
        targets = [named_target(spec, args.target)] if args.target else list(spec.targets)
        if args.fp8 and not args.target:
            targets = [t for t in targets if t.precision.dtype == "fp8"]
        chosen += [(spec, t) for t in targets]
    # several plans, as text, nothing asked of each: one row each (the full plans: --full or -t)
    summary = None if (reply or args.full or args.check or args.rehearse or args.format != "text"
                       or len(chosen) < 2) else []
    if summary is not None:
        from accelctl import cli_plan_summary
    for spec, t in chosen:
        try:
            p = make_plan(spec, t, args.engine, rehearse=args.rehearse, fp8=args.fp8, device_path=args.rehearse)
        except AccelctlError as exc:
            failed += 1
            if summary is not None:
                summary.append(cli_plan_summary.refused(spec, t, exc))
                _print_error(exc)
                continue
            if reply:  # the refusal in the document, its diagnostics beside it
                plans.append({"workload": spec.name, "target": t.name, "refused": True,
                              "error": str(exc), "diagnostics": reply.add(exc.diagnostics)})
                continue
            print(refusal_header(spec.name, t.name), flush=True)
            _print_error(exc)
            continue
        if summary is not None:
            summary.append(cli_plan_summary.planned(spec, t, p))
            continue
        if reply:
            from accelctl.plan.render import printed

            plans.append({"workload": spec.name, "target": t.name, "refused": False,
                          "plan": printed(p).to_dict()})
        else:
            print(render_plan(p, args.format, _width(sys.stdout) if args.format == "text" else None))
        if args.format == "text":
            print()
        if args.check:
            from accelctl.api import check_plan

            results = check_plan(p, spec)
            if reply:
                plans[-1]["checks"] = [{"tool": r.tool, "ok": r.ok, "messages": list(r.messages)}
                                       for r in results]
            for r in results:
                stream = sys.stderr if args.format != "text" else sys.stdout
                print(r.render(_width(stream)), file=stream)
            if not results:
                print(f"# check: backend {p.backend} has no external tool to check against",
                      file=sys.stderr if args.format != "text" else sys.stdout)
            failed += any(r.ok is False for r in results)
            not_run += sum(r.ok is None for r in results)
    if summary:
        print(cli_plan_summary.render(summary, None if args.wide else _width(sys.stdout)))
    if failed:
        return exitcodes.FAILED
    if not_run and not args.allow_unavailable:
        message = (f"{not_run} check(s) NOT RUN: the plan is unchecked, not passed (install the tool named above, "
                   "or pass --allow-unavailable to accept that)")
        if reply:
            reply.fail("CheckNotRun", message)
        print(_color(f"accelctl: {message}", "1;33"), file=sys.stderr)
        return EXIT_CHECK_NOT_RUN
    return exitcodes.OK


def cmd_estimate(args) -> int:
    """Predicted step time, throughput, bound, memory fit and cost of each target (no torch).
    Several files at once (``accelctl estimate workloads/*.wl``); with ``-t T`` only the
    workloads that have a target T (an error when none has)."""
    from accelctl.api import estimate_calibrations, estimate_factors, estimate_targets, load_selected, named_target
    from accelctl.estimate import render

    for f in args.files:
        _no_such_file_is_usage(f)
    if args.calibrate:
        stored, fitted = estimate_factors(args.calibrate, args.runs_dir)
        print(f"accelctl estimate: calibration of {', '.join(fitted)} stored in {stored}", file=sys.stderr)
        if reply := _reply(args):
            reply.result["calibration"] = {"stored": str(stored), "fitted": list(fitted)}
    calibrations = {} if args.no_calibration else estimate_calibrations(args.runs_dir)
    specs, invalid = [], 0
    for f in args.files:  # a file that cannot be read or checked is reported; the others are estimated
        try:
            specs += load_selected(f, args.workload, args.set)
        except WorkloadError as exc:
            invalid += 1
            _report_diags(args, exc.diagnostics)
    if invalid and not specs:
        raise AccelctlError(f"{invalid} of {len(args.files)} file(s) invalid", exit_code=exitcodes.FAILED)
    if args.target and not any(args.target in {t.name for t in s.targets} for s in specs):
        named_target(specs[0], args.target)  # raises: no workload has it, with the targets it has
    for spec in specs:
        targets = [t for t in spec.targets if not args.target or t.name == args.target]
        if not targets:
            continue
        estimates = estimate_targets(spec, targets, calibrations=calibrations)
        if reply := _reply(args):
            reply.result.setdefault("estimates", []).extend(e.record() for e in estimates)
        else:
            print(render.json_records(estimates) if args.format == "json"
                  else render.text(spec.name, estimates, spec, _width(sys.stdout)) + "\n")
    if invalid:
        if reply := _reply(args):
            reply.fail("WorkloadError", f"{invalid} of {len(args.files)} file(s) invalid")
        return exitcodes.FAILED
    return exitcodes.OK


# ------------------------------------------------------------------ run

def use_tui(args) -> bool:
    """The live TUI when both streams are a terminal (Textual draws on stderr), not
    --headless, and Textual is installed; else the plain console stream."""
    if args.headless or not (sys.stdout.isatty() and sys.stderr.isatty()):
        return False
    from accelctl.tui.cli import textual_missing

    missing = textual_missing()
    if missing:
        print(f"accelctl: {missing}; streaming to the console instead", file=sys.stderr)
    return missing is None


def _stop_like_ctrl_c(signum, frame) -> None:
    """SIGTERM / SIGHUP to ``accelctl run`` stop the run as Ctrl-C does (its launches get the
    SIGINT -> SIGTERM -> SIGKILL sequence, the run is recorded ``stopped``), instead of
    killing the runner and leaving its workers running."""
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def _run_repeats(p, spec, source: str, args, only, repeats: int) -> int:
    """Run plan ``p`` ``repeats`` times, one independent process each (``measure { repeat
    = N }``), streaming to the console; with N > 1 each run folder gets ``series.json``
    (the series' id is the first run's).  A repeat that does not end ok ends the series.
    Returns 0 (all ok), 1 (one failed) or 130 (stopped)."""
    from accelctl.api import launch
    from accelctl.run.console import ConsoleSink
    from accelctl.run.store import write_series

    series = None
    for index in range(1, repeats + 1):
        if repeats > 1:
            print(f"accelctl: repeat {index} of {repeats} (an independent process; measure {{ repeat = {repeats} }})",
                  flush=True)
        sink = ConsoleSink(headless=args.headless, job=p.job, rehearsal=p.rehearsal)
        handle = launch(p, source_text=source, spec_json=spec.to_json(), runs_root=args.runs_dir, sinks=[sink],
                        only=only)
        if repeats > 1:
            series = series or handle.run_id
            try:
                write_series(handle.run_dir, series, index, repeats)
            except OSError as exc:  # a full disk: the run ends store_error, as for its other files
                handle.fail_store(exc, "series.json")
        try:
            result = handle.wait()
        except KeyboardInterrupt:
            handle.stop()
            result = handle.wait()
        _record_run(args, p, result, series)
        if sink.reader_gone:  # ``accelctl run | head``: the run ended as it would; stdout's reader did not wait
            return exitcodes.BROKEN_PIPE
        if result.status != "ok":
            if repeats > 1:
                print(f"accelctl: repeat {index} of series {series} {result.status}: the series stops there",
                      file=sys.stderr, flush=True)
            return run_exit_code(result.status)
    if series:
        print(f"accelctl: series {series}: {repeats} runs ok; `accelctl compare {series} OTHER` compares it "
              "run-to-run", flush=True)
    return exitcodes.OK


def run_exit_code(status: str) -> int:
    """A finished run's exit status: ok 0, stopped 130, anything else (failed) 1."""
    return {"ok": exitcodes.OK, "stopped": exitcodes.STOPPED}.get(status, exitcodes.FAILED)


def _record_run(args, p, result, series: str | None = None) -> None:
    """``run --json``: a finished run in the document (its id, status, folder, summary.json)."""
    if reply := _reply(args):
        reply.result.setdefault("runs", []).append({
            "run_id": result.run_dir.name, "status": result.status, "run_dir": str(result.run_dir),
            "workload": p.workload, "target": p.target, "backend": p.backend, "engine": p.engine,
            "rehearsal": p.rehearsal is not None, "series": series, "summary": result.summary})
        if result.status != "ok":
            failure = (result.summary or {}).get("failure") or {}
            why = failure.get("message") if isinstance(failure, dict) else None
            reply.fail("RunStopped" if result.status == "stopped" else "RunFailed",
                       f"run {result.run_dir.name} {result.status}" + (f": {why}" if why else ""))


def _pick_fp8(spec):
    from accelctl.plan.rehearse import first_fp8_target

    return first_fp8_target(spec), "--rehearse --fp8: the first fp8 target"


def _fp8_needs_rehearse(args) -> None:
    if getattr(args, "fp8", False) and not args.rehearse:
        raise AccelctlError("--fp8 is a kind of rehearsal: use it with --rehearse", exit_code=exitcodes.USAGE)


def _refuse_missing_devices(plans, args) -> None:
    """A target whose devices are not on this machine (its engine starting the launches here) is
    refused before any run folder exists: one line, exit NO_DEVICE (issue 23); a rehearsal runs here."""
    from accelctl.plan.select import missing_here

    from accelctl.plan.render import env_filled

    for spec, p, _, _ in plans:
        if p.rehearsal is None:
            why = missing_here(spec, spec.target(p.target), p.engine)
            if why is not None:
                raise AccelctlError(why, exit_code=exitcodes.NO_DEVICE)
        if p.engine in ("local", "torchrun"):  # launches this machine starts: their folders must resolve here
            unset = env_filled(p)[1]
            if unset:
                raise AccelctlError(f"target {p.target}: the plan runs in ${unset[0]} (the optimum-habana checkout), "
                                    f"which is not set: set {unset[0]} to that folder")


def cmd_run(args) -> int:
    if args.detach:  # the run's own supervisor, in a session of its own (accelctl.cli_detach)
        from accelctl.cli_detach import run_detached

        return run_detached(args)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop_like_ctrl_c)
    from accelctl.run.detach import detached

    detached()  # a detached supervisor: a SIGHUP does not stop it
    if args.resume:
        return resume_run(args)
    if not args.file:
        raise AccelctlError("run needs a workload FILE (or --resume RUN_ID)", exit_code=exitcodes.USAGE)
    _fp8_needs_rehearse(args)
    if args.json:
        args.headless = True  # no TUI: the console stream goes to stderr, the document to stdout
    from accelctl.api import load_selected_source, one_process, pick_rehearsal, pick_target
    from accelctl.api import plan as make_plan

    status_code = 0
    # read once: the run stores what was checked (with the --set settings written in)
    source, specs = load_selected_source(args.file, args.workload, args.set)
    chosen = [(spec, *(_pick_fp8(spec) if args.fp8 and not args.target else
                       pick_rehearsal(spec) if args.rehearse and not args.target else pick_target(spec, args.target)))
              for spec in specs]
    # measure { repeat = N }: N independent processes, each planned with one measured round
    plans = [(spec, make_plan(one, t1, args.engine, rehearse=args.rehearse, fp8=args.fp8, device_path=args.rehearse),
              why, n)
             for spec, t, why in chosen for one, t1, n in [one_process(spec, t)]]
    only = args.launch or None
    from accelctl.cli_track import with_flags

    plans = with_flags(args, plans)  # --mlflow / --wandb / --tensorboard: checked before anything starts
    _refuse_missing_devices(plans, args)
    for _, p, _, _ in plans:
        unknown = sorted(set(only or ()) - {ln.name for ln in p.launches})
        if unknown:
            raise AccelctlError(f"target {p.target} has no launch {', '.join(unknown)} "
                                f"(launches: {', '.join(ln.name for ln in p.launches)})", exit_code=exitcodes.USAGE)
    from accelctl.api import start_blocker, tracking_blocker
    from accelctl.errors import RunError, attach_source

    untracked = [d for spec, p, _, _ in plans for d in [tracking_blocker(spec, p, only)] if d is not None]
    if untracked:  # a tracker the workload names and this Python lacks: refused, never skipped
        raise RunError(diagnostics=attach_source(untracked[:1], source))
    for _, p, _, _ in plans:
        blocked = start_blocker(p, args.runs_dir)
        if blocked:
            raise AccelctlError(f"target {p.target} (engine {p.engine}): {blocked}", exit_code=exitcodes.FAILED)
    live = use_tui(args) and only is None
    global _fast_exit
    _fast_exit = not live  # (set before the runs: a stop's exit code 130 ends the program as fast)
    # workloads whose stacks match share one worker process (accelctl.run.shared); the live TUI,
    # a preflight, --launch and measure { repeat = N } (independent processes) keep one each
    shareable = not live and only is None and not args.preflight
    from accelctl.run.shared import groups

    for group in (groups([p if n == 1 else None for _, p, _, n in plans]) if shareable
                  else [[i] for i in range(len(plans))]):
        if len(group) > 1:
            code = _run_shared([plans[i] for i in group], source, args)
            if code == exitcodes.STOPPED:
                return code
            status_code = status_code or code
            continue
        spec, p, why, repeats = plans[group[0]]
        _announce(spec, p, why, only)
        if args.preflight and not _preflight(spec, p, args.runs_dir, args.preflight_timeout, only, _reply(args)):
            status_code = exitcodes.FAILED
            continue
        if live and repeats == 1:
            from accelctl.tui.live import SKIPPED, run_live

            place = group[0] + 1
            rc = run_live(p, spec, source, args.runs_dir, queue=(place, len(plans)) if len(plans) > 1 else None)
            if rc == exitcodes.STOPPED:  # x: the whole queue stops
                return rc
            status_code = status_code or (exitcodes.STOPPED if rc == SKIPPED else rc)
            continue
        code = _run_repeats(p, spec, source, args, only, repeats)
        if code == exitcodes.STOPPED:
            return code
        status_code = status_code or code
    return status_code


def _announce(spec, p, why: str, only) -> None:
    """The lines ``accelctl run`` prints before a workload's run: target, rehearsal, warnings."""
    from accelctl.contract.plan import FREE_PORT

    print(f"accelctl: workload {spec.name} -> target {p.target} ({why}); backend {p.backend}", flush=True)
    if p.rehearsal is not None:
        print(_color(f"REHEARSAL of target {p.rehearsal.of} ({p.rehearsal.world_size} x {p.rehearsal.device}) on "
                     f"{p.rehearsal.on} with the stand-in: " + ("; ".join(p.rehearsal.changes) or "same layout"),
                     "1;33", sys.stdout), flush=True)
    for w in p.warnings:
        print(_color(f"WARNING: {w}", "1;33", sys.stdout), flush=True)
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
            print(_color(f"WARNING: the plan uses {FREE_PORT}, a port this accelctl picks for itself: other "
                         "machines cannot know it (set a fixed port, e.g. engine torchrun { rdzv_endpoint = "
                         '"NODE0:29400" })', "1;33", sys.stdout), flush=True)


def _run_shared(items, source: str, args) -> int:
    """Run several workloads' plans in ONE worker process (``accelctl.run.shared``), each still a
    run of its own (folder, events, summary), streamed to the console in order.  A failed run
    does not stop the next; a stop ends them all (the runs not started are not recorded, and
    named here).  Returns 0 (all ok), 1 (one failed) or 130 (stopped)."""
    from accelctl.run.console import ConsoleSink
    from accelctl.run.shared import SharedRuns

    runs = SharedRuns([p for _, p, _, _ in items], source_text=source,
                      spec_jsons=[spec.to_json() for spec, _, _, _ in items], runs_root=args.runs_dir)
    code, not_run = 0, []
    try:
        for k, (spec, p, why, _) in enumerate(items):
            _announce(spec, p, why, None)
            if k == 0:
                print(f"accelctl: one worker process runs workloads {', '.join(s.name for s, _, _, _ in items)} in "
                      "order (the same stack: command, environment, backend)", flush=True)
            sink = ConsoleSink(headless=args.headless, job=p.job, rehearsal=p.rehearsal)
            handle = runs.start([sink])
            result = handle.wait()  # Ctrl-C / SIGTERM while it waits: the run is stopped, then returned
            _record_run(args, p, result)
            if sink.reader_gone:  # ``accelctl run | head``: the others run on; the exit says the pipe closed
                code = exitcodes.BROKEN_PIPE
            if result.status == "stopped":
                code = exitcodes.STOPPED
                break
            code = code or run_exit_code(result.status)
    except KeyboardInterrupt:
        runs.stop()
        code = exitcodes.STOPPED
    finally:
        not_run = runs.close()
    for name in not_run:
        print(f"accelctl: workload {name} not run: the run before it was stopped", file=sys.stderr, flush=True)
    if not_run and (reply := _reply(args)):  # run --json: the workloads a stop left out, named
        reply.result.setdefault("not_run", []).extend(not_run)
    return code


def resume_run(args) -> int:
    """``accelctl run [FILE] --resume RUN_ID``: the run's own plan, from its newest checkpoint,
    into its own folder (FILE, when given, is the workload file checked unchanged)."""
    from accelctl.api import prepare_resume, resume
    from accelctl.run.console import ConsoleSink

    fixed = [f"--{name}" for name in ("workload", "target", "engine", "launch") if getattr(args, name)]
    fixed += ["--rehearse"] if args.rehearse else []
    if fixed:
        raise AccelctlError(f"{', '.join(fixed)} cannot change a resumed run: it goes on with its own plan",
                            exit_code=exitcodes.USAGE)
    from accelctl.run.store import load_run

    _unknown_run_is_usage(load_run, args.resume, args.runs_dir)
    point = prepare_resume(args.resume, args.runs_dir, args.file)
    global _fast_exit
    _fast_exit = True
    print(f"accelctl: resuming run {point.run_dir.name} after step {point.step} "
          f"(checkpoint {point.checkpoint})", flush=True)
    sink = ConsoleSink(headless=args.headless, job=point.job, rehearsal=point.plan.rehearsal)
    handle = resume(point, sinks=[sink])
    result = handle.wait()
    _record_run(args, point.plan, result)
    return run_exit_code(result.status)


def _unknown_run_is_usage(fn, *args):
    """``fn(*args)``; a run id the store does not have (or has twice) is a usage error."""
    from accelctl.run.store import RunStoreError

    try:
        return fn(*args)
    except RunStoreError as exc:
        raise AccelctlError(str(exc), exit_code=exitcodes.USAGE) from None


def _preflight(spec, p, runs_dir, timeout_s: float, only=None, reply: Reply | None = None) -> bool:
    """Run ``p``'s preflight (``accelctl.run.preflight``), print its one-line verdict (and put
    it in ``reply``); passed?"""
    from accelctl.api import preflight

    world = 0 if p.rehearsal is not None else spec.target(p.target).world_size
    print(f"accelctl: preflight of target {p.target} (world {world or '?'}, engine {p.engine}) ...", flush=True)
    pre = preflight(p, planned=world, runs_dir=runs_dir, timeout_s=timeout_s, only=only)
    print(_color(pre.message, "32" if pre.ok else "1;31", sys.stdout), flush=True)
    if reply is not None:
        reply.result.setdefault("preflights", []).append(
            {"workload": spec.name, "target": p.target, "engine": p.engine, "world": world, "ok": pre.ok,
             "message": pre.message})
    return pre.ok


def cmd_runs(args) -> int:
    from accelctl.api import list_runs
    from accelctl.cli_runs import empty_message, filtered, missing_store
    from accelctl.run.store import RunStoreError

    if missing := missing_store(args.runs_dir):
        raise AccelctlError(missing, exit_code=exitcodes.USAGE)
    try:
        stored = list_runs(args.runs_dir)
    except RunStoreError as exc:
        raise AccelctlError(str(exc), exit_code=exitcodes.USAGE) from None
    runs = filtered(stored, args)
    if reply := _reply(args):
        reply.result = {"runs": [r.__dict__ if hasattr(r, "__dict__") else r for r in runs]}
        return exitcodes.OK
    if not runs:
        print(empty_message(args.runs_dir, len(stored)))
        return 0
    from accelctl.report.fit import output_width
    from accelctl.report.render import print_runs

    # fitted to the terminal or $COLUMNS (80 where stdout is not a terminal, as rich did)
    print_runs(runs, None if args.wide else output_width(sys.stdout, 80), [r.id for r in stored])
    return 0


def cmd_doctor(args) -> int:
    if args.plan:  # the preflight of one target: can its planned world form, with its engine?
        _no_such_file_is_usage(args.plan)
        from accelctl.api import load_selected, pick_target
        from accelctl.api import plan as make_plan

        ok = True
        for spec in load_selected(args.plan, args.workload):
            target, _ = pick_target(spec, args.target)
            ok &= _preflight(spec, make_plan(spec, target, args.engine), args.runs_dir, args.preflight_timeout,
                             reply=_reply(args))
        return exitcodes.OK if ok else exitcodes.FAILED
    from accelctl.doctor import describe_calibration, extras_installed, host_facts, run_probes, stored_calibrations
    from accelctl.doctor import targets_here

    if args.calibrate:
        return cmd_calibrate(args)
    for path in args.files:
        _no_such_file_is_usage(path)
    if reply := _reply(args):
        reply.result = {"host": host_facts(), "probes": [p.__dict__ for p in run_probes()],
                        "extras": extras_installed(), "targets": targets_here(args.files),
                        "calibrations": [c.__dict__ for c in stored_calibrations()]}
        return exitcodes.OK
    from accelctl.cli_doctor import print_doctor

    print_doctor(host_facts(), run_probes, extras_installed(), targets_here(args.files), _color)
    ceilings = stored_calibrations()
    from accelctl.cli_doctor import out

    out("matmul ceiling for MFU: " + ("stored by accelctl doctor --calibrate" if ceilings else
                                      "not calibrated (accelctl doctor --calibrate); runs probe a best-of per run"))
    for c in ceilings:
        out(f"  {describe_calibration(c)}")
    return 0


def cmd_calibrate(args) -> int:
    import subprocess

    from accelctl.contract import calibration
    from accelctl.doctor import calibrate, describe_calibration
    from accelctl.hostinfo import cpu_count

    threads = args.threads or sorted({1, cpu_count()})
    if any(n < 1 for n in threads) or args.seconds <= 0:
        raise AccelctlError("doctor --calibrate: --threads and --seconds must be positive", exit_code=exitcodes.USAGE)
    print(f"measuring the matmul ceiling ({args.seconds:g} s per dtype) for threads {threads} ...", flush=True)
    try:
        entries = calibrate(threads, seconds=args.seconds)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        raise AccelctlError(f"doctor --calibrate: {exc}", exit_code=exitcodes.FAILED) from None
    for c in entries:
        print(f"  {describe_calibration(c)}")
    print(f"stored in {calibration.path()}")
    if reply := _reply(args):
        reply.result = {"calibrations": [c.__dict__ for c in entries], "stored_in": str(calibration.path())}
    return exitcodes.OK


# ------------------------------------------------------------------ main

#: the help of every verb's ``--json`` (``accelctl.reply`` is the document)
JSON_HELP = "one JSON document on stdout in every outcome, errors and diagnostics inside (docs/cli.md)"


SET_HELP = ("KEY=VALUE: a setting of the language written into the workload for this command, as an edit of the "
            "file would be (batch.micro=16, precision=fp32, devices=2, parallel.stage=3, target.NAME.KEY=...); "
            "repeatable; a run keeps the edited file")


def _add_set(parser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="accelctl", description="one workload, every accelerator: plan, run, compare")
    ap.add_argument("--version", action="version", version=f"accelctl {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True)

    v = sub.add_parser("validate", help="check workload files; report every problem")
    _add_set(v)
    v.add_argument("files", nargs="+")
    v.add_argument("--json", action="store_true", help=JSON_HELP)
    v.add_argument("--wide", action="store_true", help="diagnostics unwrapped (default: wrapped to the terminal)")
    v.set_defaults(fn=cmd_validate)

    p = sub.add_parser("plan", help="print the launch plan of a workload's targets")
    _add_set(p)
    p.add_argument("file")
    p.add_argument("--workload", "-w")
    p.add_argument("--target", "-t")
    p.add_argument("--engine", "-e")
    p.add_argument("--format", "-f", choices=("text", "json", "sh"), default="text")
    p.add_argument("--json", action="store_const", dest="format", const="json", help=JSON_HELP)
    p.add_argument("--wide", action="store_true", help="text: lines unfolded (default: comments and launch "
                   "commands folded to the terminal or $COLUMNS; whole in a pipe)")
    p.add_argument("--full", action="store_true", help="every target's whole plan (default for several targets "
                   "in text: one summary row each; -t T, -f json/sh and --check always print whole plans)")
    p.add_argument("--diff", nargs=2, metavar=("T1", "T2"), help="show what changes between two targets' plans")
    p.add_argument("--rehearse", action="store_true",
                   help="the plan of a CPU rehearsal of the target (this CPU, the stand-in, random weights)")
    p.add_argument("--fp8", action="store_true", help="with --rehearse: the FP8 rehearsal of an fp8 target: its recipe (E4M3/E5M2, delayed scaling, "
                        "amax history, margin) emulated on this CPU beside the same model in bf16/fp32; reports "
                        "the loss divergence, saturation/flush-to-zero per layer and the layers to keep in higher "
                        "precision (default target: the first fp8 one)")
    p.add_argument("--check", action="store_true",
                   help="also check each plan with the real software it targets, where installed "
                        "(DeepSpeed, torchrun, Transformer Engine, optimum-habana); exit 1 if one rejects a plan, "
                        f"{EXIT_CHECK_NOT_RUN} if one could not run")
    p.add_argument("--allow-unavailable", action="store_true",
                   help="with --check: a check that could not run (its tool is not installed) does not fail the "
                        f"command (exit 0 instead of {EXIT_CHECK_NOT_RUN})")
    p.set_defaults(fn=cmd_plan)

    es = sub.add_parser("estimate", help="predicted step time, throughput, bound and cost per target, before "
                        "renting (roofline from the architecture and the datasheets; no torch)")
    _add_set(es)
    es.add_argument("files", nargs="+", metavar="FILE")
    es.add_argument("--workload", "-w")
    es.add_argument("--target", "-t")
    es.add_argument("--format", "-f", choices=("text", "json"), default="text")
    es.add_argument("--json", action="store_const", dest="format", const="json", help=JSON_HELP)
    es.add_argument("--calibrate", nargs="+", metavar="RUN",
                    help="fit the MFU, bandwidth and per-layer host time of each device and precision to these "
                         "recorded runs (ids in the run store), store the fit beside the runs and use it from now on")
    es.add_argument("--no-calibration", action="store_true",
                    help="the catalog's factors only, ignoring a stored --calibrate fit")
    es.add_argument("--runs-dir", default=None, help="run store for --calibrate (default $ACCELCTL_RUNS_DIR or ./runs)")
    es.add_argument("--wide", action="store_true", help="text: every column, lines whole (default: fitted to the "
                    "terminal; a pipe gets them whole)")
    es.set_defaults(fn=cmd_estimate)

    r = sub.add_parser("run", help="run a workload for real on one target")
    _add_set(r)
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
    r.add_argument("--fp8", action="store_true", help="with --rehearse: the FP8 rehearsal of an fp8 target: its recipe (E4M3/E5M2, delayed scaling, "
                        "amax history, margin) emulated on this CPU beside the same model in bf16/fp32; reports "
                        "the loss divergence, saturation/flush-to-zero per layer and the layers to keep in higher "
                        "precision (default target: the first fp8 one)")
    r.add_argument("--runs-dir", default=None, help="run store (default $ACCELCTL_RUNS_DIR or ./runs)")
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
    from accelctl.cli_track import add_arguments as add_tracker_flags

    add_tracker_flags(r)
    r.set_defaults(fn=cmd_run)

    ls = sub.add_parser("runs", help="list stored runs")
    ls.add_argument("--runs-dir", default=None, help="run store (default $ACCELCTL_RUNS_DIR or ./runs)")
    from accelctl.cli_runs import add_filters

    add_filters(ls)
    ls.add_argument("--json", action="store_true", help=JSON_HELP)
    ls.add_argument("--wide", action="store_true", help="every column and full run ids, however wide "
                    "(default: fitted to the terminal or $COLUMNS, short ids)")
    ls.set_defaults(fn=cmd_runs)
    from accelctl.cli_detach import add_runs_verbs

    add_runs_verbs(ls)  # runs rm, runs gc
    # verbs that live with their feature: accelctl/report/cli.py, accelctl/tui/cli.py each
    # define register(sub) and import nothing heavy at module level
    import importlib

    for mod in ("accelctl.report.cli", "accelctl.report.decide_cli", "accelctl.tui.cli", "accelctl.cli_detach"):
        try:
            importlib.import_module(mod).register(sub)
        except ModuleNotFoundError as exc:
            if exc.name != mod:
                raise

    d = sub.add_parser("doctor", help="what this machine can run (torch, CUDA, HPU, XLA, Neuron, DeepSpeed, TE), "
                       "which extras are installed, and which targets of FILEs run here")
    d.add_argument("files", nargs="*", metavar="FILE", help="workload files: what this machine can do with each "
                   "target (runs here, rehearse here, through its engine, refused)")
    d.add_argument("--json", action="store_true", help=JSON_HELP)
    d.add_argument("--plan", metavar="FILE", help="instead: the preflight of a target of FILE (a seconds-long "
                   "all-reduce over its planned world through its launches and engine); exit 1 if it fails")
    d.add_argument("--target", "-t")
    d.add_argument("--workload", "-w")
    d.add_argument("--engine", "-e")
    d.add_argument("--runs-dir", default=None, help="run store; the preflight runs go under its preflight/")
    d.add_argument("--preflight-timeout", type=float, default=300.0, metavar="S")
    d.add_argument("--calibrate", action="store_true",
                   help="measure and store this CPU's matmul ceiling (the MFU denominator) per thread count")
    d.add_argument("--threads", type=int, action="append", metavar="N",
                   help="with --calibrate: thread count to calibrate (repeatable; default 1 and all cores)")
    d.add_argument("--seconds", type=float, default=2.0, help="with --calibrate: seconds of timed matmuls per dtype")
    d.set_defaults(fn=cmd_doctor)

    from accelctl.cli_init import add_parser as add_init

    add_init(sub).set_defaults(fn=_cmd_init)

    co = sub.add_parser("completion", help="print the shell completion script (bash, zsh or fish): "
                        "eval \"$(accelctl completion bash)\"")
    co.add_argument("shell", choices=("bash", "zsh", "fish"))
    co.add_argument("--json", action="store_true", help=JSON_HELP)
    co.set_defaults(fn=cmd_completion)
    from accelctl.cli_help import explain

    explain(ap)  # help for every option, examples for every verb
    return ap


def _cmd_init(args) -> int:
    from accelctl.cli_init import cmd_init

    return cmd_init(args, _reply(args))


def cmd_completion(args) -> int:
    """``accelctl completion bash|zsh|fish``: the shell's completion script (accelctl.completion)."""
    from accelctl.completion import script

    text = script(args.shell, build_parser())
    if reply := _reply(args):
        reply.result = {"shell": args.shell, "script": text}
    else:
        sys.stdout.write(text)
    return 0


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors raise ``UsageError`` instead of exiting: ``main`` prints them
    as argparse does, or puts them in the JSON document of a ``--json`` command line.  Its
    subparsers (``add_subparsers``) are of this class too."""

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(message, self.format_usage(), self.prog)

    def _print_message(self, message: str, file=None) -> None:
        """As argparse's, but a closed stdout (``accelctl --help | head -1``) is not swallowed:
        ``main`` ends it with exit 141 as every verb (argparse would exit 0)."""
        if message:
            try:
                (file or sys.stderr).write(message)
            except BrokenPipeError:
                raise
            except (AttributeError, OSError):  # as argparse: a stream that cannot take it
                pass


#: set by a command after which the program may end with ``os._exit`` (``main``): ``run`` on the
#: console (not the live TUI), once every run has ended and its summary is written
_fast_exit = False


def main(argv: Sequence[str] | None = None) -> int:
    """The ``accelctl`` program (``argv`` None: the console script, ``python -m accelctl.cli``), or
    one command in-process (``argv`` given: tests, embedding).  As the program, ``run`` ends the
    process with ``os._exit`` once its output is flushed: the interpreter's shutdown after the
    last summary took 1.0-1.3 s here (load ~10; 0.015 s with ``os._exit``, issue 12), and every
    file of the run is closed by then."""
    try:  # a reader of stdout gone (``accelctl runs | head -1``): exit 141, for every verb
        code = _command(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()
    except (BrokenPipeError, SystemExit) as exc:
        from accelctl.cli_pipes import closed_pipe_code

        code = closed_pipe_code(exc)
    if argv is None and _fast_exit:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass
        os._exit(code)
    return code


def _command(argv: list[str]) -> int:
    """Parse, run the verb, return its exit status (``accelctl.exitcodes``).  With ``--json``
    (or ``-f json``) stdout is one JSON document whatever happens (``accelctl.reply``):
    everything the verb prints goes to stderr meanwhile."""
    if argv[:1] == ["__complete"]:  # the shells' fast path: no parser, no rich (accelctl.completion)
        from accelctl.completion import complete

        return complete(argv[1:])
    if not argv:  # bare ``accelctl``: the TUI on a terminal, the help otherwise (exit 0)
        from accelctl.cli_help import bare_opens_tui

        if not bare_opens_tui():
            build_parser().print_help()
            return exitcodes.OK
        argv = ["tui"]
    reply = Reply(None) if wants_json(argv) else None
    try:
        args = _parse(argv, reply)
    except UsageError as exc:
        if reply is None:
            sys.stderr.write(exc.usage)
            print(f"{exc.prog}: error: {exc}", file=sys.stderr)
            return exitcodes.USAGE
        reply.command = exc.prog.split()[1] if " " in exc.prog else _verb_of(argv)
        reply.fail("UsageError", str(exc), usage=exc.usage.strip())
        return _write_reply(reply, exitcodes.USAGE)
    except _HelpPrinted as done:
        assert reply is not None
        reply.command = _verb_of(argv)
        reply.result = {"text": done.text}
        return _write_reply(reply, done.code)
    if reply is not None and not (getattr(args, "json", False) or getattr(args, "format", None) == "json"):
        reply = None  # e.g. ``-f json -f text``: the last word wins, as argparse says
    args.reply = reply
    global _WIDE
    _WIDE = bool(getattr(args, "wide", False))
    if reply is None:
        return _execute(args, None)
    reply.command = args.cmd
    with _stdout_to_stderr():  # progress and logs: stderr; stdout: the document alone
        code = _execute(args, reply)
    return _write_reply(reply, code)


@contextlib.contextmanager
def _stdout_to_stderr():
    """While the verb runs, what it prints goes to stderr: Python's ``print`` and, where stdout
    is a real file descriptor, whatever a library or a child process writes to descriptor 1."""
    saved = None
    try:
        out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
        sys.stdout.flush()
        saved = os.dup(out_fd)
        os.dup2(err_fd, out_fd)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):  # captured streams: no descriptor
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            sys.stderr.flush()
            os.dup2(saved, out_fd)
            os.close(saved)


class _HelpPrinted(Exception):
    """``--help`` / ``--version`` on a ``--json`` command line: their text, for the document."""

    def __init__(self, text: str, code: int):
        super().__init__(text)
        self.text, self.code = text, code


def _verb_of(argv: list[str]) -> str | None:
    """The verb a command line names (None when it names none)."""
    verbs = next(a.choices for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return next((a for a in argv if a in verbs), None)


def _parse(argv: list[str], reply: Reply | None) -> argparse.Namespace:
    if reply is None:
        return build_parser().parse_args(argv)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            return build_parser().parse_args(argv)
    except SystemExit as exc:  # --help, --version printed and exited
        raise _HelpPrinted(buf.getvalue(), exc.code if isinstance(exc.code, int) else exitcodes.OK) from None


def _execute(args: argparse.Namespace, reply: Reply | None) -> int:
    """Run the verb; every way it can end becomes an exit status, and with ``reply`` the error
    and its diagnostics go into the document (else on stderr)."""
    try:
        if getattr(args, "file", None):
            _no_such_file_is_usage(args.file)
        code = args.fn(args)
        sys.stdout.flush()  # inside the try: a reader gone before the buffered output is written
        return code
    except AccelctlError as exc:
        if reply is None:
            _print_error(exc)
        else:
            reply.add(exc.diagnostics)
            reply.fail(type(exc).__name__, str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        if reply is not None:
            reply.fail("KeyboardInterrupt", "interrupted")
        return exitcodes.STOPPED
    except BrokenPipeError:
        if reply is not None:  # stdout is stderr while the verb runs: stderr went away
            reply.fail("BrokenPipeError", "stderr was closed")
            return exitcodes.BROKEN_PIPE
        _silence_stdout()
        return exitcodes.BROKEN_PIPE
    except SystemExit as exc:  # a library (or a verb) that exits: its status and message
        if reply is None:
            raise
        code = exc.code if isinstance(exc.code, int) else exitcodes.FAILED
        if code:
            reply.fail("SystemExit", str(exc.code) if not isinstance(exc.code, int) else f"exit {code}")
        return code
    except Exception as exc:  # noqa: BLE001 - a bug: the traceback, and an exit status that says so
        traceback.print_exc()
        message = f"internal error: {type(exc).__name__}: {exc}"
        print(f"accelctl: {message} (a bug in accelctl; the traceback is above)", file=sys.stderr)
        if reply is not None:
            reply.fail(type(exc).__name__, message)
        return exitcodes.INTERNAL


def _no_such_file_is_usage(path: str) -> None:
    """Nothing at ``path``: a usage error (exit 2).  Anything else wrong with it (a folder, a
    FIFO, a device, a link loop, ...) is the verb's to report, as ``read_source``'s E001/E002."""
    from accelctl.dsl.source import absent

    if absent(path):
        raise AccelctlError(f"no such workload file: {path}", exit_code=exitcodes.USAGE)


def _write_reply(reply: Reply, code: int) -> int:
    """The one JSON document on stdout; a reader gone away is BROKEN_PIPE."""
    try:
        sys.stdout.write(reply.text(code))
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        return exitcodes.BROKEN_PIPE
    return code


def _silence_stdout() -> None:
    """The reader went away (``accelctl plan ... | head``): stop quietly, as cat does
    (``accelctl.cli_pipes``)."""
    from accelctl.cli_pipes import reader_gone

    reader_gone()


if __name__ == "__main__":
    sys.exit(main())
