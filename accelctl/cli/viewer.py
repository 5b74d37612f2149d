"""How a run is viewed from this terminal, for every verb that shows one (``run``, ``attach``):
the live TUI or the plain console stream.  Imports nothing heavy: Textual is only looked for.

Not in ``accelctl.cli.common``: that module is also imported by the report layer, and this one
reaches the TUI's verb module (``accelctl.cli.tui``), a layer above it."""

from __future__ import annotations

import sys


def use_tui(args) -> bool:
    """The live TUI when both streams are a terminal (Textual draws on stderr), not
    --headless, and Textual is installed; else the plain console stream."""
    if args.headless or not (sys.stdout.isatty() and sys.stderr.isatty()):
        return False
    from accelctl.cli.common import textual_missing

    missing = textual_missing()
    if missing:
        print(f"accelctl: {missing}; streaming to the console instead", file=sys.stderr)
    return missing is None
