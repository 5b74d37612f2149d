"""Syntax highlighting for workload files, plans and plan diffs (rich ``Text``, no Textual).

A small regex highlighter of our own: the workload language is simple enough that a
line-based pass (comments, strings, quantities with units, block keywords, keys,
calls) reads well, and it is deterministic for snapshot tests.  ``source_with_diagnostics``
renders a file with line numbers and each diagnostic inline under the line it points at
(carets under the span, the message, the hint).
"""

from __future__ import annotations

import re
from collections import defaultdict

from rich.text import Text

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?')
_COMMENT = re.compile(r"#.*$")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?:\s*(?:[KMGT]i?B|usd/hr?|\$/h|steps?|tokens?|samples?|"
                     r"ms|min|s|h)\b)?")
_KEY = re.compile(r"\b([A-Za-z_][\w.]*)\s*(?==)")
_CALL = re.compile(r"\b([A-Za-z_]\w*)(?=\()")
_BLOCK = re.compile(r"^\s*(workload|task|model|dataset|optimizer|precision|batch|measure|target|engine|parallel|"
                    r"fp8|offload)\b")
_CONST = re.compile(r"\b(on|off|true|false|none|greedy|sample|beam)\b")

STYLES = {
    "comment": "italic #7f8c8d",
    "string": "#98c379",
    "number": "#d19a66",
    "key": "#61afef",
    "call": "#e5c07b",
    "block": "bold #c678dd",
    "const": "#56b6c2",
}


def _code_spans(line: str) -> list[tuple[int, int, str]]:
    """(start, end, style) spans of one workload line."""
    spans: list[tuple[int, int, str]] = []
    taken = [False] * len(line)

    def mark(a: int, b: int, style: str) -> None:
        if any(taken[a:b]):
            return
        spans.append((a, b, style))
        for i in range(a, b):
            taken[i] = True

    # a '#' outside strings starts a comment (which may itself hold quotes)
    cut, quoted = len(line), False
    for i, ch in enumerate(line):
        if ch == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        elif ch == "#" and not quoted:
            cut = i
            break
    if cut < len(line):
        mark(cut, len(line), STYLES["comment"])
    for m in _STRING.finditer(line[:cut]):
        mark(m.start(), m.end(), STYLES["string"])
    for rx, style, group in ((_BLOCK, "block", 1), (_KEY, "key", 1), (_CALL, "call", 1), (_NUMBER, "number", 0),
                             (_CONST, "const", 1)):
        for m in rx.finditer(line):
            mark(m.start(group), m.end(group), STYLES[style])
    return spans


def highlight_workload_line(line: str) -> Text:
    text = Text(line)
    for a, b, style in _code_spans(line):
        text.stylize(style, a, b)
    return text


def highlight_workload(source: str) -> Text:
    return Text("\n").join(highlight_workload_line(line) for line in source.splitlines())


SEVERITY_STYLE = {"error": "bold red", "warning": "bold yellow"}


def source_with_diagnostics(source: str, diags, *, number_width: int | None = None) -> Text:
    """The file with line numbers, highlighted, each diagnostic inline under its line."""
    lines = source.splitlines() or [""]
    width = number_width or len(str(len(lines)))
    by_line: dict[int, list] = defaultdict(list)
    loose = []
    for d in diags:
        if d.span is not None and 1 <= d.span.line <= len(lines):
            by_line[d.span.line].append(d)
        else:
            loose.append(d)
    out = Text()
    for d in loose:
        out.append(f"{d.severity}[{d.code}]: {d.message}\n", SEVERITY_STYLE.get(d.severity, "bold"))
        if d.hint:
            out.append(f"  hint: {d.hint}\n", "italic")
    for n, line in enumerate(lines, start=1):
        marked = bool(by_line.get(n))
        out.append(f"{n:>{width}} ", "bold red" if marked else "dim")
        out.append("│ ", "dim")
        out.append_text(highlight_workload_line(line.expandtabs(4)))
        out.append("\n")
        for d in by_line.get(n, ()):
            style = SEVERITY_STYLE.get(d.severity, "bold")
            sp = d.span
            col = max(1, sp.column)
            span_w = (sp.end_column - sp.column) if sp.end_line == sp.line else len(line) - col + 1
            span_w = max(1, min(span_w, max(1, len(line) - col + 1)))
            pad = " " * (width + 1)
            out.append(pad, "dim")
            out.append("│ ", "dim")
            out.append(" " * (col - 1) + "^" * span_w, style)
            out.append(f" {d.severity}[{d.code}]: {d.message}\n", style)
            if d.hint:
                out.append(pad + "│ " + " " * (col - 1), "dim")
                out.append(f"hint: {d.hint}\n", "italic")
    out.rstrip()
    return out


# --------------------------------------------------------------------------- plans

_PLAN_ARG = re.compile(r"(?<!\S)(--?[A-Za-z][\w-]*)")
_ENV = re.compile(r"(?<!\S)([A-Z][A-Z0-9_]*)=")
_JSON_KEY = re.compile(r'^\s*("[^"]*")\s*:')
_PLACEHOLDER = re.compile(r"\{run_dir\}|\{optimum_habana\}")


def highlight_plan(text: str) -> Text:
    """``accelctl plan`` text: headers, notes, warnings, files and launch lines."""
    out = Text()
    for line in text.splitlines():
        t = Text(line)
        stripped = line.lstrip()
        if stripped.startswith("#   WARNING:"):
            t.stylize("bold yellow")
        elif stripped.startswith("#   note:"):
            t.stylize("#56b6c2")
        elif stripped.startswith(("# file", "# launch")):
            t.stylize("bold #c678dd")
        elif stripped.startswith("# plan:"):
            t.stylize("bold")
        elif stripped.startswith("#"):
            t.stylize(STYLES["comment"])
        else:
            for rx, style, group in ((_JSON_KEY, "key", 1), (_ENV, "key", 1), (_PLAN_ARG, "call", 1),
                                     (_STRING, "string", 0), (_NUMBER, "number", 0), (_PLACEHOLDER, "const", 0)):
                for m in rx.finditer(line):
                    t.stylize(STYLES[style], m.start(group), m.end(group))
        out.append_text(t)
        out.append("\n")
    out.rstrip()
    return out


def highlight_diff(text: str) -> Text:
    out = Text()
    for line in text.splitlines():
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "#56b6c2"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        else:
            style = "dim"
        out.append(line + "\n", style)
    out.rstrip()
    return out
