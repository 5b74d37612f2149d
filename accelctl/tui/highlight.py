"""Syntax highlighting for workload files, plans and plan diffs (rich ``Text``, no Textual).

Workload text is highlighted by the grammar itself: the parser's own lexer and LALR
tables (``accelctl.dsl.lalr.lark_parser``, over ``grammar/workload.lark``) read it,
and each token is styled by its terminal (string, number, unit, ``workload``) or, for a
``NAME``, by the rule it ends up in (block kind, key, call, header, value word).  Text
with a syntax error is highlighted up to the error and left plain after it; the rules
of the part before the error come from completing the parse with closing tokens the
parser accepts.  A fragment that does not start with ``workload`` is read as the inside
of a workload's body.  ``source_with_diagnostics`` renders a file with line numbers and
each diagnostic inline under the line it points at (carets under the span, the
message, the hint).
"""

from __future__ import annotations

import bisect
import functools
import re
from collections import defaultdict

from lark import Token, Tree
from lark.exceptions import UnexpectedInput
from rich.text import Text

from accelctl.dsl.lalr import lark_parser

STYLES = {
    "comment": "italic #7f8c8d",
    "string": "#98c379",
    "number": "#d19a66",
    "key": "#61afef",
    "call": "#e5c07b",
    "block": "bold #c678dd",
    "const": "#56b6c2",
    "name": "bold",
}

#: the style of a token by its terminal (``NAME`` is styled by its rule, ``_NAME_ROLES``)
_TERMINAL_STYLES = {"STRING": "string", "SIGNED_NUMBER": "number", "UNIT": "number", "WORKLOAD": "block"}

#: (rule, index of the NAME among the rule's children) -> style
_NAME_ROLES = {
    ("workload", 1): "name",    # workload NAME { ... }
    ("block", 0): "block",      # NAME header? { ... }
    ("block", 1): "name",       # target NAME { ... }
    ("statement", 0): "block",  # NAME header
    ("statement", 1): "const",  # precision NAME
    ("entry", 0): "key",        # NAME = value
    ("kwarg", 0): "key",        # call(NAME = value)
    ("call", 0): "call",        # NAME(...)
    ("word", 0): "const",       # key = NAME
}

#: what closes an unfinished parse, in order of preference (a missing value becomes a NAME)
_CLOSERS = ("RBRACE", "RPAR", "RSQB", "NAME", "LBRACE")
#: a workload's head, fed before a fragment that is the inside of a body
_BODY_HEAD = (("WORKLOAD", "workload"), ("NAME", "_"), ("LBRACE", "{"))


def _read(source: str, as_body: bool):
    """Feed ``source`` to the grammar's parser: (tokens accepted, parse tree or None, where it stopped)."""
    ip = lark_parser().parse_interactive(source)
    if as_body:
        for kind, value in _BODY_HEAD:
            ip.feed_token(Token(kind, value))
    tokens, stop = [], len(source)
    try:
        for tok in ip.lexer_thread.lex(ip.parser_state):
            ip.feed_token(tok)
            tokens.append(tok)
    except UnexpectedInput as exc:
        tok = getattr(exc, "token", None)
        stop = tok.start_pos if tok is not None and tok.start_pos is not None else exc.pos_in_stream
        stop = min(max(stop or 0, 0), len(source))
    return tokens, _complete(ip), stop


def _complete(ip):
    """The parse tree of what was fed, closed with tokens the parser accepts (None if it will not close)."""
    try:
        for _ in range(256):
            accepts = ip.accepts()
            if "$END" in accepts:
                return ip.feed_eof()
            kind = next((k for k in _CLOSERS if k in accepts), None)
            if kind is None:
                return None
            ip.feed_token(Token(kind, ""))
    except UnexpectedInput:
        return None
    return None


def _name_styles(tree) -> tuple[dict[int, str], dict[int, int]]:
    """From the tree: the style of each ``NAME`` token (by offset), and each quantity's
    number offset -> the end of its unit (a quantity on one line is one span)."""
    names: dict[int, str] = {}
    quantities: dict[int, int] = {}
    if tree is None:
        return names, quantities
    for node in tree.iter_subtrees():
        for i, child in enumerate(node.children):
            if isinstance(child, Token) and child.type == "NAME" and child.start_pos is not None:
                style = _NAME_ROLES.get((node.data, i))
                if style:
                    names[child.start_pos] = style
        if node.data == "quantity":
            number, unit = node.children
            (num,) = number.children if isinstance(number, Tree) else (number,)
            if num.start_pos is not None and unit.end_pos is not None and num.line == unit.line:
                quantities[num.start_pos] = unit.end_pos
    return names, quantities


@functools.lru_cache(maxsize=1)
def _comment_pattern() -> re.Pattern:
    return re.compile(lark_parser().get_terminal("COMMENT").pattern.to_regexp())


def workload_spans(source: str) -> list[tuple[int, int, str]]:
    """(start, end, style) of every highlighted token of workload text, in order, up to
    its first syntax error."""
    tokens, tree, stop = _read(source, as_body=False)
    if not tokens and stop < len(source):  # not a file: perhaps the inside of a workload
        body = _read(source, as_body=True)
        if body[0]:
            tokens, tree, stop = body
    names, quantities = _name_styles(tree)
    comment = _comment_pattern()
    spans: list[tuple[int, int, str]] = []
    pos, skip_to = 0, 0
    for tok in [*tokens, None]:
        gap_end = tok.start_pos if tok is not None else stop
        for m in comment.finditer(source, pos, gap_end):  # between tokens: only what the grammar ignores
            spans.append((m.start(), m.end(), STYLES["comment"]))
        if tok is None:
            break
        pos = tok.end_pos
        if tok.start_pos < skip_to:
            continue
        if tok.start_pos in quantities:
            skip_to = quantities[tok.start_pos]
            spans.append((tok.start_pos, skip_to, STYLES["number"]))
            continue
        style = names.get(tok.start_pos) if tok.type == "NAME" else _TERMINAL_STYLES.get(tok.type)
        if style:
            spans.append((tok.start_pos, tok.end_pos, STYLES[style]))
    return spans


def highlighted_lines(source: str) -> list[Text]:
    """``source.splitlines()``, each line a ``Text`` styled by ``workload_spans``."""
    spans = workload_spans(source)
    starts = [a for a, _, _ in spans]
    out, offset = [], 0
    for kept, line in zip(source.splitlines(keepends=True), source.splitlines()):
        text = Text(line)
        end = offset + len(line)
        for a, b, style in spans[bisect.bisect_left(starts, offset):bisect.bisect_left(starts, end)]:
            text.stylize(style, a - offset, min(b, end) - offset)  # a token never spans lines
        out.append(text)
        offset += len(kept)
    return out


def highlight_workload(source: str) -> Text:
    return Text("\n").join(highlighted_lines(source))


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
    highlighted = highlighted_lines(source) or [Text("")]
    out = Text()
    for d in loose:
        out.append(f"{d.severity}[{d.code}]: {d.message}\n", SEVERITY_STYLE.get(d.severity, "bold"))
        if d.hint:
            out.append(f"  hint: {d.hint}\n", "italic")
    for n, line in enumerate(lines, start=1):
        marked = bool(by_line.get(n))
        out.append(f"{n:>{width}} ", "bold red" if marked else "dim")
        out.append("│ ", "dim")
        shown = highlighted[n - 1]
        shown.expand_tabs(4)
        out.append_text(shown)
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

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"?')
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e-?\d+)?(?:\s*(?:[KMGT]i?B|usd/hr?|\$/h|steps?|tokens?|samples?|"
                     r"ms|min|s|h)\b)?")

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


def source_with_diagnostics_wrapped(source: str, diags, *, number_width: int | None = None):
    """As ``source_with_diagnostics``, for a panel narrower than the file (a diagnostic
    must not be cut off right of the caret): the source and caret lines are
    cut with ``…`` at the panel's edge, each diagnostic's message and hint wrap on lines of
    their own under the gutter.  A rich ``Group`` of ``Text`` lines."""
    from rich.console import Group

    lines = source.splitlines() or [""]
    width = number_width or len(str(len(lines)))
    by_line: dict[int, list] = defaultdict(list)
    out: list[Text] = []
    for d in diags:
        if d.span is not None and 1 <= d.span.line <= len(lines):
            by_line[d.span.line].append(d)
        else:
            out += _message_lines(d, "")
    highlighted = highlighted_lines(source) or [Text("")]
    pad = " " * (width + 1)
    for n, line in enumerate(lines, start=1):
        row = Text(no_wrap=True, overflow="ellipsis")
        row.append(f"{n:>{width}} ", "bold red" if by_line.get(n) else "dim")
        row.append("│ ", "dim")
        shown = highlighted[n - 1]
        shown.expand_tabs(4)
        row.append_text(shown)
        out.append(row)
        for d in by_line.get(n, ()):
            sp = d.span
            col = max(1, sp.column)
            span_w = (sp.end_column - sp.column) if sp.end_line == sp.line else len(line) - col + 1
            span_w = max(1, min(span_w, max(1, len(line) - col + 1)))
            caret = Text(no_wrap=True, overflow="ellipsis")
            caret.append(pad + "│ ", "dim")
            caret.append(" " * (col - 1) + "^" * span_w, SEVERITY_STYLE.get(d.severity, "bold"))
            out.append(caret)
            out += _message_lines(d, pad + "│ ")
    return Group(*out)


def _message_lines(d, gutter: str) -> list[Text]:
    style = SEVERITY_STYLE.get(d.severity, "bold")
    msg = Text(gutter, "dim")
    msg.append(f"{d.severity}[{d.code}]: {d.message}", style)
    out = [msg]
    if d.hint:
        hint = Text(gutter, "dim")
        hint.append(f"hint: {d.hint}", "italic")
        out.append(hint)
    return out
