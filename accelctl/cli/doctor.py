"""``accelctl doctor``'s text: the host first (at once), the probes as they finish (a counter on
a terminal's stderr: torch's import takes seconds), then the extras installed and what this
machine can do with each target of the files named."""

from __future__ import annotations

import shutil
import sys
import textwrap

from accelctl import exitcodes
from accelctl.cli.common import JSON_HELP, color, no_such_file_is_usage, reply_of
from accelctl.errors import AccelctlError
from accelctl.frozen import to_dict


def add_parser(sub) -> None:
    """``accelctl doctor``."""
    d = sub.add_parser("doctor")
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


def cmd_doctor(args) -> int:
    if args.plan:  # the preflight of one target: can its planned world form, with its engine?
        no_such_file_is_usage(args.plan)
        from accelctl.api import load_selected
        from accelctl.cli.preflight import preflight
        from accelctl.run.supervision.orchestrate import Chosen, Request, choose

        req = Request(target=args.target, engine=args.engine, runs_dir=args.runs_dir,
                      preflight_timeout=args.preflight_timeout)
        ok = True
        for c in choose(load_selected(args.plan, args.workload), req):
            ok &= preflight(Chosen(c.spec, c.plan, c.why, 1), req, reply=reply_of(args))
        return exitcodes.OK if ok else exitcodes.FAILED
    from accelctl.doctor import describe_calibration, extras_installed, host_facts, run_probes, stored_calibrations
    from accelctl.doctor import targets_here

    if args.calibrate:
        return cmd_calibrate(args)
    for path in args.files:
        no_such_file_is_usage(path)
    if reply := reply_of(args):
        reply.result = {"host": host_facts(), "probes": [p.__dict__ for p in run_probes()],
                        "extras": extras_installed(), "targets": targets_here(args.files),
                        "calibrations": [to_dict(c) for c in stored_calibrations()]}
        return exitcodes.OK
    print_doctor(host_facts(), run_probes, extras_installed(), targets_here(args.files), color)
    ceilings = stored_calibrations()
    out("matmul ceiling for MFU: " + ("stored by accelctl doctor --calibrate" if ceilings else
                                      "not calibrated (accelctl doctor --calibrate); runs probe a best-of per run"))
    for c in ceilings:
        out(f"  {describe_calibration(c)}")
    return 0


#: the longest ``--seconds`` per dtype (the measurement runs under a 300 s timeout per thread count)
MAX_SECONDS = 60


def cmd_calibrate(args) -> int:
    import subprocess

    from accelctl.contract import calibration
    from accelctl.doctor import calibrate, describe_calibration
    from accelctl.hostinfo import cpu_count

    threads = args.threads or sorted({1, cpu_count()})
    if any(n < 1 for n in threads) or not 0 < args.seconds <= MAX_SECONDS:  # NaN fails it too
        raise AccelctlError(f"doctor --calibrate: --threads must be positive and --seconds in (0, {MAX_SECONDS}]",
                            exit_code=exitcodes.USAGE)
    if problem := calibration.store_problem():  # before measuring: nothing to store it in
        raise AccelctlError(f"doctor --calibrate: cannot store a calibration in {calibration.path()}: {problem}",
                            exit_code=exitcodes.FAILED)
    print(f"measuring the matmul ceiling ({args.seconds:g} s per dtype) for threads {threads} ...", flush=True)
    try:
        entries = calibrate(threads, seconds=args.seconds)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        raise AccelctlError(f"doctor --calibrate: {exc}", exit_code=exitcodes.FAILED) from None
    for c in entries:
        print(f"  {describe_calibration(c)}")
    print(f"stored in {calibration.path()}")
    if reply := reply_of(args):
        reply.result = {"calibrations": [to_dict(c) for c in entries], "stored_in": str(calibration.path())}
    return exitcodes.OK


def out(line: str) -> None:
    """A line of the report, folded at spaces to the terminal's width under its own indent (issue
    27: doctor's lines ran past 80 columns); whole in a pipe."""
    if not sys.stdout.isatty():
        print(line)
        return
    width = shutil.get_terminal_size((100, 24)).columns
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    print("\n".join(textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False)) or line)


def print_doctor(host: dict, run_probes, extras: list[dict], targets: list[dict], color) -> None:
    out(f"cpu: {host['cpu']} ({host['cores']} cores), native bf16: {'yes' if host['native_bf16'] else 'no'}"
          + (f" ({', '.join(host['bf16_flags'])})" if host["bf16_flags"] else ""))
    out(f"precision: {host['bf16_advice']}")
    out("device adapters present: " + ", ".join(f"{k} ({v})" for k, v in host["adapters_present"].items()))
    out("C++ compiler (optimize { compile = on } on the CPU): "
          + (host["cxx_compiler"] or "none: torch.compile cannot build CPU kernels here (install g++)"))
    sys.stdout.flush()  # the host at once: the probes take seconds
    live = sys.stderr.isatty()

    def progress(done: int, total: int, probe) -> None:
        if live:
            end = "\n" if done == total else ""
            sys.stderr.write(f"\r\x1b[Kprobing the stacks, each in its own interpreter: {done}/{total} ({probe.name})"
                             + end)
            sys.stderr.flush()

    if live:
        sys.stderr.write("probing the stacks, each in its own interpreter...")
        sys.stderr.flush()
    for p in run_probes(progress=progress):
        state = color("ok", "32", sys.stdout) if p.ok else color("absent", "33", sys.stdout)
        detail = ", ".join(f"{k}={v}" for k, v in p.facts.items()) if p.ok else p.error
        out(f"  {p.name:<20} {state:<6} {detail}")
    out("extras (pip install 'accelctl[EXTRA]'; scripts/setup.sh installs them):" if extras else
          "extras: unknown (accelctl runs from a checkout, not installed: scripts/setup.sh installs it)")
    for e in extras:
        if not e["missing"]:
            state = color("installed", "32", sys.stdout)
            detail = ", ".join(f"{n} {v}" for n, v in e["installed"])
        else:
            state = color("missing" if not e["installed"] else "partial", "33", sys.stdout)
            detail = "missing " + ", ".join(f"{n}{w}" for n, w in e["missing"])
            if e["elsewhere"]:
                detail += f"; its own environment: {e['elsewhere']}"
        out(f"  {e['extra']:<12} {state:<9} {detail}")
    if targets:
        out("targets of the files named:")
    for t in targets:
        where = f"{t['workload']} / {t['target']}" if t["workload"] else t["file"]
        out(f"  {where}: {t['verdict']} -- {t['detail']}")
