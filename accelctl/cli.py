"""Command line: parse the arguments, run the verb, render how it ended.

    accelctl validate FILE...            check workloads, every diagnostic at once
    accelctl plan FILE [--target T]      print the launch plan (text, json or sh)
    accelctl run FILE [--target T]       run it for real, stream events, store the run
    accelctl run --resume RUN_ID         continue a run from its newest checkpoint (same run record)
                                         (measure { repeat = N }: N independent runs, one series)
    accelctl runs                        list stored runs

The verbs live in ``accelctl.cli_*`` (``cli_check``: validate, plan, estimate; ``cli_run``: run;
``cli_runs``, ``cli_detach``, ``cli_doctor``, ``cli_init``; what several share is in ``cli_common``,
``cli_viewer``, ``cli_run_times``) and with their feature
(``accelctl.report.cli``, ``accelctl.tui.cli``); the run policy is ``accelctl.run.orchestrate``.
``validate`` and ``plan`` import neither torch nor textual: the heavy stacks load only inside the
launched worker.  No process-wide mutable state: what ``main`` needs at the end (``run``'s
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
from accelctl.cli_check import EXIT_CHECK_NOT_RUN  # noqa: F401 - the plan --check status, as tests name it
from accelctl.cli_common import JSON_HELP, no_such_file_is_usage, print_error, reply_of, wide_of
from accelctl.errors import AccelctlError
from accelctl.reply import Reply, UsageError, wants_json


#: every verb, in the order ``accelctl --help`` lists them -> the function that adds its parser
#: (``module:function``, called with the subparsers action): a command builds only its verb's
#: (``accelctl.cli_lazy``); the verbs that live with their feature import nothing heavy at module level
VERBS = {
    "validate": "accelctl.cli_check:add_validate",
    "plan": "accelctl.cli_check:add_plan",
    "estimate": "accelctl.cli_check:add_estimate",
    "run": "accelctl.cli_run:add_parser",
    "runs": "accelctl.cli:add_runs",  # and runs rm, runs gc
    "report": "accelctl.report.cli:add_report",
    "compare": "accelctl.report.cli:add_compare",
    "sweep": "accelctl.report.cli:add_sweep",
    "pick": "accelctl.report.decide_cli:add_pick",
    "fit": "accelctl.report.decide_cli:add_fit",
    "tui": "accelctl.tui.cli:register",
    "status": "accelctl.cli_detach:add_status",
    "logs": "accelctl.cli_detach:add_logs",
    "attach": "accelctl.cli_detach:add_attach",
    "cancel": "accelctl.cli_detach:add_cancel",
    "doctor": "accelctl.cli_doctor:add_parser",
    "init": "accelctl.cli:add_init",
    "completion": "accelctl.cli:add_completion",
}


def build_parser() -> argparse.ArgumentParser:
    from accelctl.cli_help import explain
    from accelctl.cli_lazy import LazySubParsers

    ap = Parser(prog="accelctl", description="one workload, every accelerator: plan, run, compare")
    ap.add_argument("--version", action="version", version=f"accelctl {__version__}")
    sub = ap.add_subparsers(dest="cmd", required=True, action=LazySubParsers)
    sub.built = explain  # help for every option, examples for every verb, as each verb is built
    for verb, adds in VERBS.items():
        sub.declare(verb, adds)
    explain(ap)
    return ap


def add_runs(sub) -> None:
    """``accelctl runs`` (``accelctl.cli_runs``) with ``runs rm`` and ``runs gc`` under it
    (``accelctl.cli_detach``), joined here so that neither verb module imports the other."""
    from accelctl.cli_detach import add_runs_verbs
    from accelctl.cli_runs import add_parser

    add_runs_verbs(add_parser(sub))


def add_init(sub) -> None:
    from accelctl.cli_init import add_parser

    add_parser(sub).set_defaults(fn=_cmd_init)


def add_completion(sub) -> None:
    co = sub.add_parser("completion", help="print the shell completion script (bash, zsh or fish): "
                        "eval \"$(accelctl completion bash)\"")
    co.add_argument("shell", choices=("bash", "zsh", "fish"))
    co.add_argument("--json", action="store_true", help=JSON_HELP)
    co.set_defaults(fn=cmd_completion)


def _cmd_init(args) -> int:
    from accelctl.cli_init import cmd_init

    return cmd_init(args, reply_of(args))


def cmd_completion(args) -> int:
    """``accelctl completion bash|zsh|fish``: the shell's completion script (accelctl.completion)."""
    from accelctl.completion import script

    text = script(args.shell, build_parser())
    if reply := reply_of(args):
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
        from accelctl.cli_pipes import closed_pipe_code

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
    if argv[:1] == ["__complete"]:  # the shells' fast path: no parser, no rich (accelctl.completion)
        from accelctl.completion import complete

        return complete(argv[1:])
    if not argv:  # bare ``accelctl``: the TUI on a terminal, the help otherwise (exit 0)
        from accelctl.cli_help import bare_opens_tui

        if not bare_opens_tui():
            build_parser().print_help()
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
    if reply is not None and not (getattr(args, "json", False) or getattr(args, "format", None) == "json"):
        reply = None  # e.g. ``-f json -f text``: the last word wins, as argparse says
    args.reply = reply
    done.args = args
    if reply is None:
        return _execute(args, None)
    reply.command = args.cmd
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
    (``accelctl.cli_pipes``)."""
    from accelctl.cli_pipes import reader_gone

    reader_gone()


if __name__ == "__main__":
    sys.exit(main())
