"""A reader of stdout that goes away (``accelctl runs | head -1``): every verb ends quietly
with exit 141 (128 + SIGPIPE, ``exitcodes.BROKEN_PIPE``), as cat does, never a traceback.

The Python docs' recipe (library/signal.html, "Note on SIGPIPE"): on ``BrokenPipeError``
point stdout at /dev/null, so that the interpreter's last flush cannot raise again, and
exit.  ``main`` hands every command's (``__complete`` included) ``BrokenPipeError`` and
``SystemExit`` to ``closed_pipe_code``; the normal path imports nothing of this module.
rich's Console meets a closed pipe with ``SystemExit(1)`` raised while it handles the
``BrokenPipeError``; that exit is the same closed pipe and ends 141 too.

Imports nothing of accelctl but ``exitcodes``.
"""

from __future__ import annotations

import io
import os
import sys

from accelctl import exitcodes


def reader_gone() -> int:
    """Stdout's reader went away: point stdout at /dev/null; ``BROKEN_PIPE``."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, io.UnsupportedOperation, AttributeError):  # a captured stdout has no descriptor
        pass
    return exitcodes.BROKEN_PIPE


def closed_pipe_code(exc: BaseException) -> int:
    """The exit status of a command that ended with ``exc`` (a ``BrokenPipeError`` or a
    ``SystemExit``): ``BROKEN_PIPE`` for a closed stdout, else ``exc`` raised again."""
    if exitcodes.closed_pipe(exc):
        return reader_gone()
    raise exc
