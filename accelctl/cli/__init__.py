"""Command line: parse the arguments, run the verb, render how it ended.

    accelctl validate FILE...            check workloads, every diagnostic at once
    accelctl plan FILE [--target T]      print the launch plan (text, json or sh)
    accelctl run FILE [--target T]       run it for real, stream events, store the run
    accelctl run --resume RUN_ID         continue a run from its newest checkpoint (same run record)
                                         (measure { repeat = N }: N independent runs, one series)
    accelctl runs                        list stored runs

The verbs live in this package, a module per verb group (``check``: validate, plan, estimate;
``run``; ``runs``; ``detach``: status, logs, attach, cancel, runs rm/gc; ``report``: report,
compare; ``sweep``; ``decide``: pick, fit; ``tui``; ``doctor``; ``init``); what several share is
in ``common``, ``tables``, ``viewer`` and ``run_times``, the parser in ``parser``, help in
``help``.  The run policy is ``accelctl.run.supervision.orchestrate``.  ``validate`` and ``plan`` import
neither torch nor textual: the heavy stacks load only inside the launched worker.  No process-wide mutable state: what ``main`` needs at the end (``run``'s
``fast_exit``) is on the command's own arguments.

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
import sys
from typing import Sequence

from accelctl import __version__, exitcodes, private_files
from accelctl.cli.check import EXIT_CHECK_NOT_RUN  # noqa: F401 - the plan --check status, as tests name it
from accelctl.cli.parser import Parser, Version
from accelctl.cli.common import JSON_HELP, no_such_file_is_usage, print_error, reply_of, wide_of
from accelctl.errors import AccelctlError
from accelctl.reply import Reply, UsageError, wants_json


#: every verb, in the order ``accelctl --help`` lists them -> (the function that adds its parser,
#: ``module:function`` called with the verbs of ``build_parser``; its line in the verb list).  A
#: command builds only its verb's parser: the verbs that live with their feature import nothing
#: heavy at module level
VERBS: dict[str, tuple[str, str]] = {
    "validate": ("accelctl.cli.check:add_validate",
        "check workload files; report every problem"),
    "plan": ("accelctl.cli.check:add_plan",
        "print the launch plan of a workload's targets"),
    "estimate": ("accelctl.cli.check:add_estimate",
        "predicted step time, throughput, bound and cost per target, before renting (roofline from the "
        "architecture and the datasheets; no torch)"),
    "run": ("accelctl.cli.run:add_parser",
        "run a workload for real on one target"),
    "runs": ("accelctl.cli:add_runs",
        "list stored runs"),
    "report": ("accelctl.cli.report:add_report",
        "tables of stored runs: step time, throughput, cost; --reference: the published ones"),
    "compare": ("accelctl.cli.report:add_compare",
        "speed-up and price-performance of run B over run A, with 95%% CIs over independent runs (measure { "
        "repeat = N })"),
    "sweep": ("accelctl.cli.sweep:add_sweep",
        "any setting over values (--over KEY=V1,V2 --estimate | --run), or one target at several device "
        "counts (the scaling efficiency table)"),
    "pick": ("accelctl.cli.decide:add_pick",
        "every target x instance x layout that fits, ranked by cost by a deadline (or by time within a "
        "budget) at equal work"),
    "fit": ("accelctl.cli.decide:add_fit",
        "the largest micro-batch that fits a target's memory by the memory model (and with checkpointing, "
        "ZeRO, FSDP); --probe confirms it with a real step"),
    "tui": ("accelctl.cli.tui:register",
        "the terminal UI: workloads, plans, live runs, stored runs, comparisons"),
    "status": ("accelctl.cli.detach:add_status",
        "state, step and ETA of a run (no RUN: every run in progress)"),
    "logs": ("accelctl.cli.detach:add_logs",
        "a run's worker.log (stdout and stderr of its processes)"),
    "attach": ("accelctl.cli.detach:add_attach",
        "a running or finished run: the live TUI on a terminal, the console stream in a pipe (q, Ctrl-C or a "
        "hang-up detaches; the run goes on)"),
    "cancel": ("accelctl.cli.detach:add_cancel",
        "stop a run from any terminal: its supervisor stops it as Ctrl-C does; waits until no process of it "
        "is left"),
    "doctor": ("accelctl.cli.doctor:add_parser",
        "what this machine can run (torch, CUDA, HPU, XLA, Neuron, DeepSpeed, TE), which extras are "
        "installed, and which targets of FILEs run here"),
    "init": ("accelctl.cli:add_init",
        "write a commented workload that validates, to start from"),
    "completion": ("accelctl.cli:add_completion",
        "print the shell completion script (bash, zsh or fish): eval \"$(accelctl completion bash)\""),
}


def build_parser(argv: Sequence[str] | None = None) -> "Parser":
    """accelctl's parser: every verb's (``argv`` None: completion, tests), or the verb ``argv``
    names alone, the others listed by their help line only (a command's own parse)."""
    import importlib

    from accelctl.cli.help import explain

    only = _verb_of(argv) if argv is not None else None
    ap = Parser(prog="accelctl", description="one workload, every accelerator: plan, run, compare")
    ap.add_argument("--version", action=Version, version=f"accelctl {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, helps={verb: line for verb, (_, line) in VERBS.items()})
    for verb, (adds, _) in VERBS.items():
        if argv is not None and verb != only:
            sub.add_parser(verb, add_help=False)
            continue
        module, function = adds.split(":")
        getattr(importlib.import_module(module), function)(sub)
        if verb not in ap.verbs:
            raise RuntimeError(f"{adds} did not add the parser of {verb!r}")  # a bug in the verb table
        explain(ap.verbs[verb], verb)  # help for every option, examples for every verb
    explain(ap)
    return ap


def add_runs(sub) -> None:
    """``accelctl runs`` (``accelctl.cli.runs``) with ``runs rm`` and ``runs gc`` under it
    (``accelctl.cli.detach``), joined here so that neither verb module imports the other."""
    from accelctl.cli.detach import add_runs_verbs
    from accelctl.cli.runs import add_parser

    add_runs_verbs(add_parser(sub))


def add_init(sub) -> None:
    from accelctl.cli.init import add_parser

    add_parser(sub).set_defaults(fn=_cmd_init)


def add_completion(sub) -> None:
    co = sub.add_parser("completion")
    co.add_argument("shell", choices=("bash", "zsh", "fish"))
    co.add_argument("--json", action="store_true", help=JSON_HELP)
    co.set_defaults(fn=cmd_completion)


def _cmd_init(args) -> int:
    from accelctl.cli.init import cmd_init

    return cmd_init(args, reply_of(args))


def cmd_completion(args) -> int:
    """``accelctl completion bash|zsh|fish``: the shell's completion script (accelctl.cli.completion)."""
    from accelctl.cli.completion import script

    text = script(args.shell, build_parser())
    if reply := reply_of(args):
        reply.result = {"shell": args.shell, "script": text}
    else:
        sys.stdout.write(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """The ``accelctl`` program (``argv`` None: the console script, ``python -m accelctl.cli``), or
    one command in-process (``argv`` given: tests, embedding).  As the program, ``run`` ends the
    process with ``os._exit`` once its output is flushed: the interpreter's shutdown after the
    last summary takes a second or more (docs/bench.md), and every file of the run is closed
    by then."""
    done = argparse.Namespace(args=None)  # the command's parsed arguments, for the program's end
    try:  # a reader of stdout gone (``accelctl runs | head -1``): exit 141, for every verb
        code = _command(list(sys.argv[1:] if argv is None else argv), done)
        sys.stdout.flush()
    except (BrokenPipeError, SystemExit) as exc:
        from accelctl.cli.pipes import closed_pipe_code

        code = closed_pipe_code(exc)
    # ``run`` on the console (not the live TUI) sets ``fast_exit``: its runs' files are closed when it returns
    if argv is None and getattr(done.args, "fast_exit", False):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass
        os._exit(code)
    return code


def _command(argv: list[str], done: argparse.Namespace) -> int:
    """Parse, run the verb, return its exit status (``accelctl.exitcodes``).  With ``--json``
    (or ``-f json``) stdout is one JSON document whatever happens (``accelctl.reply``):
    everything the verb prints goes to stderr meanwhile."""
    if argv[:1] == ["__complete"]:  # the shells' fast path: no parser, no rich (accelctl.cli.completion)
        from accelctl.cli.completion import complete

        return complete(argv[1:])
    if not argv:  # bare ``accelctl``: the TUI on a terminal, the help otherwise (exit 0)
        from accelctl.cli.help import bare_opens_tui

        if not bare_opens_tui():
            build_parser([]).print_help()
            return exitcodes.OK
        argv = ["tui"]
    private_files.new_command()
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
    done.args = args
    # e.g. ``-f json -f text``: the last word wins, as argparse says
    return execute(args, reply is not None and (getattr(args, "json", False) or getattr(args, "format", None) == "json"))


def execute(args: argparse.Namespace, json_document: bool) -> int:
    """Run the verb ``args.fn`` (the command ``args.cmd``) as a command: its exit status, and with
    ``json_document`` one JSON document on stdout whatever happens, what it prints on stderr.
    Also the run's supervisor's (``accelctl.cli.supervise``), which is given no command line."""
    if not json_document:
        args.reply = None
        return _execute(args, None)
    reply = args.reply = Reply(args.cmd)
    with _stdout_to_stderr():  # progress and logs: stderr; stdout: the document alone
        code = _execute(args, reply)
    reply.add(private_files.take_warnings())  # a cache or store others could write, not used
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


def _verb_of(argv: Sequence[str]) -> str | None:
    """The verb a command line names: its first word that is one (no option of accelctl's own
    takes a value).  None when it names none."""
    return next((a for a in argv if a in VERBS), None)


def _parse(argv: list[str], reply: Reply | None) -> argparse.Namespace:
    if reply is None:
        return build_parser(argv).parse_args(argv)
    buf = io.StringIO()
    try:
        with contextlib.redirect_stdout(buf):
            return build_parser(argv).parse_args(argv)
    except SystemExit as exc:  # --help, --version printed and exited
        raise _HelpPrinted(buf.getvalue(), exc.code if isinstance(exc.code, int) else exitcodes.OK) from None


def _execute(args: argparse.Namespace, reply: Reply | None) -> int:
    """Run the verb; every way it can end becomes an exit status, and with ``reply`` the error
    and its diagnostics go into the document (else on stderr)."""
    try:
        if getattr(args, "file", None):
            no_such_file_is_usage(args.file)
        code = args.fn(args)
        sys.stdout.flush()  # inside the try: a reader gone before the buffered output is written
        return code
    except AccelctlError as exc:
        if reply is None:
            print_error(exc, wide_of(args))
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
        import traceback  # here: 6 M instructions that a command without a bug never needs

        traceback.print_exc()
        message = f"internal error: {type(exc).__name__}: {exc}"
        print(f"accelctl: {message} (a bug in accelctl; the traceback is above)", file=sys.stderr)
        if reply is not None:
            reply.fail(type(exc).__name__, message)
        return exitcodes.INTERNAL


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
    (``accelctl.cli.pipes``)."""
    from accelctl.cli.pipes import reader_gone

    reader_gone()

