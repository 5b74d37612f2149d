"""Errors and diagnostics.

Every problem found in a workload is a ``Diagnostic``: a stable code, a message, the
span it points at, and a hint.  Passes collect diagnostics and report them all at once;
``AccelctlError`` carries a list of them to the CLI, which renders each as::

    workloads/bloomz.wl:7:15: error[E201]: unknown key 'max_new_token' in task generate
       7 |     max_new_token = 100
         |     ^^^^^^^^^^^^^
      = hint: did you mean 'max_new_tokens'?
"""

from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

from accelctl.frozen import Value, replace, uncompared


class Span(NamedTuple):
    """A region of a source file; lines and columns are 1-based, ``end_*`` exclusive."""

    line: int
    column: int
    end_line: int
    end_column: int

    @staticmethod
    def point(line: int, column: int, width: int = 1) -> "Span":
        return Span(line, column, line, column + max(width, 1))

    def to_dict(self) -> dict[str, int]:
        return {"line": self.line, "column": self.column, "end_line": self.end_line, "end_column": self.end_column}


@uncompared("source_line")
class Diagnostic(Value):
    """One finding at a place in a workload: an error, or a warning (a target ``plan`` refuses).
    A file reports at most ``spec.values.MAX_ERRORS`` errors, so their size does not matter."""

    code: str
    message: str
    span: Span | None = None
    path: str = "<input>"
    hint: str = ""
    severity: str = "error"
    #: the source text of ``span.line``, filled in by ``attach_source``
    source_line: str = ""
    #: fixes the hint proposes, each checked to plan: (label, its ``--set`` arguments)
    fixes: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def to_dict(self) -> dict:
        d = {"code": self.code, "severity": self.severity, "message": self.message, "path": self.path}
        if self.span:
            d.update(self.span.to_dict())
        if self.hint:
            d["hint"] = self.hint
        if self.fixes:
            d["fixes"] = [{"label": label, "set": list(sets)} for label, sets in self.fixes]
        return d

    def render(self, width: int | None = None) -> str:
        """``file:line:col: severity[CODE]: message``, the line, a caret, the hint.

        With ``width`` (the terminal's): the message and the hint wrap at spaces under
        their own indent; the source line is never wrapped -- one longer than the width
        shows a window of it around the caret, cut at each side with ``…``, and the caret
        stays under the same characters.  ``None``: every part on one line (pipes, logs)."""
        if self.span is None:
            head = f"{self.path}: {self.severity}[{self.code}]: {self.message}"
            return _wrap(head, width, "    ") + (_wrap(f"\n  = hint: {self.hint}", width, "          ")
                                                 if self.hint else "")
        sp = self.span
        out = [_wrap(f"{self.path}:{sp.line}:{sp.column}: {self.severity}[{self.code}]: {self.message}", width, "    ")]
        if self.source_line:
            num = str(sp.line)
            pad = " " * len(num)
            text = self.source_line.rstrip("\n").expandtabs(1)
            carets = (sp.end_column - sp.column) if sp.end_line == sp.line else len(text) - sp.column + 1
            carets = max(1, min(carets, max(1, len(text) - sp.column + 1)))
            column = sp.column
            if width is not None:
                text, column, carets = _window(text, column, carets, width - len(num) - 4)
            out.append(f" {num} | {text}")
            out.append(f" {pad} | {' ' * (column - 1)}{'^' * carets}")
        if self.hint:
            out.append(_wrap(f"  = hint: {self.hint}", width, "          "))
        return "\n".join(out)


def _wrap(line: str, width: int | None, indent: str) -> str:
    """``line`` wrapped at spaces to ``width`` (unchanged when None or short enough), its
    leading spaces kept, the lines after the first starting with ``indent``; a word longer
    than the width stays whole.  A leading newline is kept."""
    lead, body = ("\n", line[1:]) if line.startswith("\n") else ("", line)
    if width is None or len(body) <= width:
        return line
    import textwrap

    stripped = body.lstrip(" ")
    first = " " * (len(body) - len(stripped))
    return lead + "\n".join(textwrap.wrap(stripped, width=width, initial_indent=first, subsequent_indent=indent,
                                          break_long_words=False, break_on_hyphens=False))


def _window(text: str, column: int, carets: int, room: int) -> tuple[str, int, int]:
    """(the part of ``text`` that fits ``room`` characters around the caret, the caret's
    1-based column in it, how many carets): cut sides are marked ``…``."""
    if len(text) <= room or room < 12:
        return text, column, carets
    carets = min(carets, room - 2)
    start = max(0, min(column - 1 - (room - carets) // 2, len(text) - room))
    end = start + room
    left, right = start > 0, end < len(text)
    start += left  # the … takes one character on each cut side
    end -= right
    piece = ("…" if left else "") + text[start:end] + ("…" if right else "")
    return piece, column - start + left, carets


def attach_source(diags: Iterable[Diagnostic], text: str) -> list[Diagnostic]:
    """Fill ``source_line`` of each diagnostic from the file text (split into lines only when
    there is a diagnostic: a valid file of megabytes has none)."""
    diags = list(diags)
    lines = text.splitlines() if diags else []
    out = []
    for d in diags:
        if d.span and 1 <= d.span.line <= len(lines):
            d = replace(d, source_line=lines[d.span.line - 1])
        out.append(d)
    return out


class AccelctlError(Exception):
    """A failure with one or more diagnostics, or a plain message."""

    def __init__(self, message: str = "", diagnostics: Sequence[Diagnostic] = (), exit_code: int = 1):
        self.diagnostics = list(diagnostics)
        if not message and self.diagnostics:
            message = self.diagnostics[0].message
        super().__init__(message)
        self.exit_code = exit_code

    def render(self) -> str:
        if self.diagnostics:
            return "\n\n".join(d.render() for d in self.diagnostics)
        return f"error: {self}"


class WorkloadError(AccelctlError):
    """The workload file is not valid (syntax or meaning)."""


class PlanError(AccelctlError):
    """A valid workload cannot be planned for the chosen target or engine."""


class RunError(AccelctlError):
    """A run could not start, or failed."""


def first_line(exc: BaseException, limit: int = 200, empty: str | None = "") -> str:
    """The first line of ``exc``'s message, at most ``limit`` characters: how a library's
    exception is quoted in one line.  ``empty``: what an exception without a message gives
    (None: its repr)."""
    text = str(exc)
    if not text:
        return repr(exc) if empty is None else empty
    return text.splitlines()[0][:limit]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """A hint naming the closest choice, or listing the choices when none is close."""
    import difflib  # here: only a diagnostic with a misspelt name needs it

    choices = sorted(set(choices))
    same = [c for c in choices if c.casefold() == word.casefold()]  # the names are case-sensitive: TARGET
    close = same[:1] or difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if close:
        return f"did you mean '{close[0]}'?"
    if len(choices) <= 12:
        return "expected one of: " + ", ".join(choices)
    return ""
