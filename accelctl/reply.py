"""The one JSON document an ``accelctl`` command writes with ``--json`` (or ``-f json``).

In every outcome (success, diagnostics, a refusal, a usage error, Ctrl-C, a bug) stdout holds
exactly this one document -- ``schema``, ``command``, ``ok``, ``exit_code``, ``exit``, ``result``,
``diagnostics``, ``error``: docs/cli.md -- and progress and logs go to stderr.  Numbers that are
not finite are written as null: the document is strict JSON.  This module sits at the lowest
layer so that every verb's module can fill a ``Reply``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
from pathlib import PurePath
from typing import Any, Iterable, Sequence

from accelctl import exitcodes
from accelctl.frozen import Value, to_dict

SCHEMA = 1


def wants_json(argv: Sequence[str]) -> bool:
    """Does this command line ask for JSON?  Read before parsing, so that a usage error of a
    ``--json`` command line is JSON too: ``--json``, ``-f json``, ``--format json``,
    ``--format=json``, ``-fjson``, ``-f=json``."""
    argv = list(argv)
    for i, a in enumerate(argv):
        if a == "--":
            break
        if a == "--json" or a in ("--format=json", "-fjson", "-f=json"):
            return True
        if a in ("-f", "--format") and i + 1 < len(argv) and argv[i + 1] == "json":
            return True
    return False


class UsageError(Exception):
    """A command line argparse rejects (``accelctl.cli``'s parser raises it instead of exiting)."""

    def __init__(self, message: str, usage: str = "", prog: str = "accelctl"):
        super().__init__(message)
        self.usage = usage
        self.prog = prog


def plain(value: Any) -> Any:
    """``value`` as strict JSON data: dataclasses and objects with ``to_dict`` as dicts, numbers
    as int/float (non-finite floats as None), paths and other objects as strings."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [plain(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, numbers.Integral):  # numpy's integers and the like
        return int(value)
    if isinstance(value, numbers.Real):
        return plain(float(value))
    if hasattr(value, "to_dict"):
        return plain(value.to_dict())
    if isinstance(value, Value) or (dataclasses.is_dataclass(value) and not isinstance(value, type)):
        return plain(to_dict(value))
    if isinstance(value, PurePath):
        return str(value)
    return str(value)


class Reply:
    """What one command answers in JSON: filled by the verb, written once by ``accelctl.cli.main``."""

    def __init__(self, command: str | None):
        self.command = command
        self.result: dict[str, Any] = {}
        self.diagnostics: list[dict[str, Any]] = []
        self.error: dict[str, str] | None = None

    def add(self, diagnostics: Iterable[Any]) -> list[dict[str, Any]]:
        """Record diagnostics (``accelctl.errors.Diagnostic``); returns them as dicts."""
        dicts = [d.to_dict() for d in diagnostics]
        self.diagnostics += dicts
        return dicts

    def fail(self, kind: str, message: str, **more: str) -> None:
        """Record why the command stopped: ``kind`` names the error (an exception's class name,
        ``UsageError``, ``CheckNotRun``); the first reason recorded wins."""
        if self.error is None:
            self.error = {"type": kind, "message": message or kind, **more}

    def document(self, exit_code: int) -> dict[str, Any]:
        return {"schema": SCHEMA, "command": self.command, "ok": exit_code == exitcodes.OK,
                "exit_code": exit_code, "exit": exitcodes.name(exit_code), "result": plain(self.result),
                "diagnostics": plain(self.diagnostics), "error": self.error}

    def text(self, exit_code: int) -> str:
        return json.dumps(self.document(exit_code), indent=2, allow_nan=False) + "\n"
