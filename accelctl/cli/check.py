"""``accelctl validate``, ``plan`` and ``estimate``: the verbs that read workloads and start
nothing (no torch: tests/test_imports.py).  Parsed by ``accelctl.cli``; each prints here."""

from __future__ import annotations

import sys

from accelctl import exitcodes
from accelctl.cli.common import (FP8_HELP, JSON_HELP, add_set, color, fp8_needs_rehearse, no_such_file_is_usage,
                                 print_error, report_diags, reply_of, wide_of, width)
from accelctl.errors import AccelctlError, WorkloadError

#: ``accelctl plan --check``: every plan printed and none rejected, but a check could not run
#: (its tool is not installed here) and ``--allow-unavailable`` was not given
EXIT_CHECK_NOT_RUN = exitcodes.CHECK_NOT_RUN


def add_validate(sub) -> None:
    v = sub.add_parser("validate")
    add_set(v)
    v.add_argument("files", nargs="+")
    v.add_argument("--json", action="store_true", help=JSON_HELP)
    v.add_argument("--wide", action="store_true", help="diagnostics unwrapped (default: wrapped to the terminal)")
    v.set_defaults(fn=cmd_validate)


def add_plan(sub) -> None:
    p = sub.add_parser("plan")
    add_set(p)
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
    p.add_argument("--fp8", action="store_true", help=FP8_HELP)
    p.add_argument("--check", action="store_true",
                   help="also check each plan with the real software it targets, where installed "
                        "(DeepSpeed, torchrun, Transformer Engine, optimum-habana); exit 1 if one rejects a plan, "
                        f"{EXIT_CHECK_NOT_RUN} if one could not run")
    p.add_argument("--allow-unavailable", action="store_true",
                   help="with --check: a check that could not run (its tool is not installed) does not fail the "
                        f"command (exit 0 instead of {EXIT_CHECK_NOT_RUN})")
    p.set_defaults(fn=cmd_plan)


def add_estimate(sub) -> None:
    es = sub.add_parser("estimate")
    add_set(es)
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


def _validate_with_sets(path, sets, host):
    """``api.validate`` of the file with the ``--set`` settings written in, for ``host``."""
    from accelctl.api import validate, validate_text

    if not sets:
        return validate(path, host)
    from accelctl.dsl.parser import read_source
    from accelctl.language import settings

    try:
        return validate_text(settings.applied(str(path), read_source(path), settings.parse_sets(list(sets))), path, host)
    except AccelctlError as exc:
        return (), list(exc.diagnostics)


def cmd_validate(args) -> int:
    from accelctl.contract.hostfacts import HostFacts

    report, errors, workloads = [], 0, 0
    host = HostFacts.here()  # what plan would refuse, planned for this machine: read once, passed
    for path in args.files:
        specs, diags = _validate_with_sets(path, args.set, host)
        n_err = sum(d.severity == "error" for d in diags)
        errors += n_err
        workloads += len(specs) if not n_err else 0
        report.append({"path": str(path), "ok": n_err == 0, "workloads": [s.name for s in specs] if not n_err else [],
                       "diagnostics": [d.to_dict() for d in diags]})
        report_diags(args, diags)
    if reply := reply_of(args):
        reply.result = {"files": report}
    else:
        files = len(args.files)
        bad = sum(not r["ok"] for r in report)
        msg = (f"{files} file(s), {workloads} workload(s): ok" if not errors
               else f"{bad} of {files} file(s) invalid, {errors} error(s)")
        refused = sum(d["severity"] == "warning" and d["code"].startswith("E") for r in report for d in r["diagnostics"])
        if refused and not errors:
            msg += f"; {refused} target refusal(s) above: `accelctl plan` refuses those targets"
        print(color(msg, "32" if not errors else "31", sys.stdout))
    return exitcodes.OK if errors == 0 else exitcodes.FAILED




def cmd_plan(args) -> int:
    """Print each chosen target's plan; a target that cannot be planned prints its diagnostic
    and the others still print (exit 1 if any failed).  With ``--check``: exit 1 when a real
    tool rejected a plan, else EXIT_CHECK_NOT_RUN when a check could not run, unless
    ``--allow-unavailable``."""
    from accelctl.api import load_selected, named_target, plan_diff, refusal_header, render_plan
    from accelctl.api import plan as make_plan
    from accelctl.contract.hostfacts import HostFacts

    fp8_needs_rehearse(args)
    reply = reply_of(args)
    host = HostFacts.here()  # every plan below is this machine's: its facts read once, passed explicitly
    if args.diff:
        for spec in load_selected(args.file, args.workload, args.set):
            for name in args.diff:
                named_target(spec, name)  # an unknown target is an error, not an empty diff
            diff = plan_diff(spec, *args.diff, args.engine, None if reply else width(sys.stdout, wide_of(args)), host)
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
        from accelctl.cli import plan_summary as cli_plan_summary
    for spec, t in chosen:
        try:
            p = make_plan(spec, t, args.engine, rehearse=args.rehearse, fp8=args.fp8, device_path=args.rehearse,
                          host=host)
        except AccelctlError as exc:
            failed += 1
            if summary is not None:
                summary.append(cli_plan_summary.refused(spec, t, exc))
                print_error(exc, wide_of(args))
                continue
            if reply:  # the refusal in the document, its diagnostics beside it
                plans.append({"workload": spec.name, "target": t.name, "refused": True,
                              "error": str(exc), "diagnostics": reply.add(exc.diagnostics)})
                continue
            print(refusal_header(spec.name, t.name), flush=True)
            print_error(exc, wide_of(args))
            continue
        if summary is not None:
            summary.append(cli_plan_summary.planned(spec, t, p))
            continue
        if reply:
            from accelctl.plan.render import printed

            plans.append({"workload": spec.name, "target": t.name, "refused": False,
                          "plan": printed(p).to_dict()})
        else:
            print(render_plan(p, args.format, width(sys.stdout, wide_of(args)) if args.format == "text" else None))
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
                print(r.render(width(stream, wide_of(args))), file=stream)
            if not results:
                print(f"# check: backend {p.backend} has no external tool to check against",
                      file=sys.stderr if args.format != "text" else sys.stdout)
            failed += any(r.ok is False for r in results)
            not_run += sum(r.ok is None for r in results)
    if summary:
        print(cli_plan_summary.render(summary, width(sys.stdout, wide_of(args))))
    if failed:
        return exitcodes.FAILED
    if not_run and not args.allow_unavailable:
        message = (f"{not_run} check(s) NOT RUN: the plan is unchecked, not passed (install the tool named above, "
                   "or pass --allow-unavailable to accept that)")
        if reply:
            reply.fail("CheckNotRun", message)
        print(color(f"accelctl: {message}", "1;33"), file=sys.stderr)
        return EXIT_CHECK_NOT_RUN
    return exitcodes.OK


def cmd_estimate(args) -> int:
    """Predicted step time, throughput, bound, memory fit and cost of each target (no torch).
    Several files at once (``accelctl estimate workloads/*.wl``); with ``-t T`` only the
    workloads that have a target T (an error when none has)."""
    from accelctl.api import estimate_calibrations, estimate_factors, estimate_targets, load_selected, named_target
    from accelctl.estimate import render

    for f in args.files:
        no_such_file_is_usage(f)
    if args.calibrate:
        try:
            stored, fitted = estimate_factors(args.calibrate, args.runs_dir)
        except OSError as exc:  # a full disk, a store not ours, a device where the file goes
            raise AccelctlError(f"estimate --calibrate: {exc.strerror or exc}", exit_code=exitcodes.FAILED) from None
        print(f"accelctl estimate: calibration of {', '.join(fitted)} stored in {stored}", file=sys.stderr)
        if reply := reply_of(args):
            reply.result["calibration"] = {"stored": str(stored), "fitted": list(fitted)}
    calibrations = {} if args.no_calibration else estimate_calibrations(args.runs_dir)
    from accelctl.contract.hostfacts import HostFacts

    host = HostFacts.here()  # a target plan refuses on this machine gets plan's words, no figure
    specs, invalid = [], 0
    for f in args.files:  # a file that cannot be read or checked is reported; the others are estimated
        try:
            specs += load_selected(f, args.workload, args.set)
        except WorkloadError as exc:
            invalid += 1
            report_diags(args, exc.diagnostics)
    if invalid and not specs:
        raise AccelctlError(f"{invalid} of {len(args.files)} file(s) invalid", exit_code=exitcodes.FAILED)
    if args.target and not any(args.target in {t.name for t in s.targets} for s in specs):
        named_target(specs[0], args.target)  # raises: no workload has it, with the targets it has
    for spec in specs:
        targets = [t for t in spec.targets if not args.target or t.name == args.target]
        if not targets:
            continue
        estimates = estimate_targets(spec, targets, calibrations=calibrations, host=host, verdict=True)
        if reply := reply_of(args):
            reply.result.setdefault("estimates", []).extend(e.record() for e in estimates)
        else:
            print(render.json_records(estimates) if args.format == "json"
                  else render.text(spec.name, estimates, spec, width(sys.stdout, wide_of(args))) + "\n")
    if invalid:
        if reply := reply_of(args):
            reply.fail("WorkloadError", f"{invalid} of {len(args.files)} file(s) invalid")
        return exitcodes.FAILED
    return exitcodes.OK



