"""What every verb of the command line shares: colour, the width text folds to, diagnostics and
errors on stderr, the JSON document being filled, and the usage errors of a missing file or an
unknown run.  Imports nothing heavy (a clean ``validate`` loads only this, the parser and the
checker)."""

from __future__ import annotations

import os
import sys
from typing import Sequence

from accelctl import exitcodes
from accelctl.errors import AccelctlError, Diagnostic
from accelctl.reply import Reply

#: the help of every verb's ``--json`` (``accelctl.reply`` is the document)
JSON_HELP = "one JSON document on stdout in every outcome, errors and diagnostics inside (docs/cli.md)"
RUNS_DIR_HELP = "run store (default $ACCELCTL_RUNS_DIR or ./runs)"
SET_HELP = ("KEY=VALUE: a setting of the language written into the workload for this command, as an edit of the "
            "file would be (batch.micro=16, precision=fp32, devices=2, parallel.stage=3, target.NAME.KEY=...); "
            "repeatable; a run keeps the edited file")
FP8_HELP = ("with --rehearse: the FP8 rehearsal of an fp8 target: its recipe (E4M3/E5M2, delayed scaling, amax "
            "history, margin) emulated on this CPU beside the same model in bf16/fp32; reports the loss divergence, "
            "saturation/flush-to-zero per layer and the layers to keep in higher precision (default target: the "
            "first fp8 one)")


def add_set(parser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help=SET_HELP)


def color(text: str, code: str, stream=None) -> str:
    """``text`` in colour ``code`` on a terminal, unless $NO_COLOR is set and not empty
    (https://no-color.org, as rich and Textual read it); plain in a pipe."""
    stream = stream or sys.stderr
    return f"\033[{code}m{text}\033[0m" if stream.isatty() and not os.environ.get("NO_COLOR") else text


def width(stream, wide: bool = False) -> int | None:
    """The width plain text (plans, diagnostics) folds to on a terminal: $COLUMNS, else the
    terminal's; None (whole lines) in a pipe or a file, and under ``--wide``."""
    if wide:
        return None
    try:
        if not stream.isatty():
            return None  # what output_width says of a pipe here, without importing it (cold start)
    except (AttributeError, ValueError):
        return None
    from accelctl.report.width import output_width

    return output_width(stream, None, columns_in_pipe=False)


def wide_of(args) -> bool:
    """``--wide`` on this command line: every line whole, as in a pipe."""
    return bool(getattr(args, "wide", False))


def print_diags(diags: Sequence[Diagnostic], stream=None, wide: bool = False) -> None:
    """Each diagnostic, its message and hint wrapped to the terminal (the source line and its
    caret stay intact: a long one shows a window around the caret); whole in a pipe."""
    if not diags:
        return  # a clean ``validate`` loads nothing more (tests/test_imports.py)
    stream = stream or sys.stderr
    fold = width(stream, wide)
    for d in diags:
        text = d.render(fold)
        head, _, rest = text.partition("\n")
        code = "1;31" if d.severity == "error" else "1;33"
        print(color(head, code, stream) + ("\n" + rest if rest else ""), file=stream)
        print(file=stream)


def print_error(exc: AccelctlError, wide: bool = False) -> None:
    """An error's diagnostics, or its one-line message, on stderr."""
    if exc.diagnostics:
        print_diags(exc.diagnostics, wide=wide)
    else:
        print(color(f"accelctl: error: {exc}", "1;31"), file=sys.stderr)


def reply_of(args) -> Reply | None:
    """The JSON document being filled (``--json`` / ``-f json``), None for text output."""
    return getattr(args, "reply", None)


def report_diags(args, diags: Sequence[Diagnostic]) -> None:
    """Diagnostics into the JSON document being filled, else on stderr."""
    if reply := reply_of(args):
        reply.add(diags)
    else:
        print_diags(diags, wide=wide_of(args))


def no_such_file_is_usage(path: str) -> None:
    """Nothing at ``path``: a usage error (exit 2).  Anything else wrong with it (a folder, a
    FIFO, a device, a link loop, ...) is the verb's to report, as ``read_source``'s E001/E002."""
    from accelctl.dsl.source import absent

    if absent(path):
        raise AccelctlError(f"no such workload file: {path}", exit_code=exitcodes.USAGE)


def unknown_run_is_usage(fn, *args):
    """``fn(*args)``; a run id the store does not have (or has twice) is a usage error."""
    from accelctl.run.store import RunStoreError

    try:
        return fn(*args)
    except RunStoreError as exc:
        raise AccelctlError(str(exc), exit_code=exitcodes.USAGE) from None


def fp8_needs_rehearse(args) -> None:
    """``--fp8`` (plan, estimate, run) only with ``--rehearse``: it names a kind of rehearsal."""
    if getattr(args, "fp8", False) and not args.rehearse:
        raise AccelctlError("--fp8 is a kind of rehearsal: use it with --rehearse", exit_code=exitcodes.USAGE)


def textual_missing() -> str | None:
    """Why the TUI cannot start here (None when it can)."""
    import importlib.util

    for mod in ("textual", "textual_plotext"):
        if importlib.util.find_spec(mod) is None:
            return f"accelctl tui needs {mod.replace('_', '-')}: pip install 'accelctl[tui]'"
    return None
