"""The parser of workload files: lark's LALR parser over ``grammar/workload.lark``.

``ast_parser()`` builds the AST while it parses (an inline transformer, ``_ToAst``: no parse
tree), each node's span from its first and last tokens; its lexer callbacks (``_LexChecks``)
refuse nesting past ``MAX_NESTING`` (E005) and unrepresentable numbers (E003), and ``_classify``
turns lark's ``UnexpectedInput`` into a positioned diagnostic.  ``lark_parser()`` is the same
grammar building lark's own tree (the TUI's highlighter, ``_classify``'s lexing).  Both load the
tables shipped with the package (``accelctl.dsl.lark_tables``: JSON, never a pickle), analysing
the grammar only where those were built from another grammar text or lark version.
"""

from __future__ import annotations

import functools
import math
import re
import threading

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput

from accelctl.dsl import ast
from accelctl.dsl.lark_tables import parser as _tables_parser
from accelctl.dsl.lexemes import MAX_INT_DIGITS
from accelctl.dsl.hints import glued_hint_text
from accelctl.errors import Diagnostic, Span, WorkloadError

#: deeper nesting of [..], f(..) and blocks is E005 (real workloads nest 3 or 4 deep)
MAX_NESTING = 100

_TOKEN_NAMES = {
    "LBRACE": "'{'", "RBRACE": "'}'", "EQUAL": "'='", "LPAR": "'('", "RPAR": "')'",
    "COMMA": "','", "LSQB": "'['", "RSQB": "']'", "WORKLOAD": "'workload'", "NAME": "a name",
    "STRING": "a string", "SIGNED_NUMBER": "a number", "UNIT": "a unit", "$END": "end of file",
}

#: lark's terminals that are punctuation ("stray '}'")
_PUNCT = {"LBRACE", "RBRACE", "EQUAL", "LPAR", "RPAR", "COMMA", "LSQB", "RSQB"}
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
_ESCAPE = re.compile(r"\\(.)", re.S)
#: the keyword glued to what follows it (``workloadfoo``): E106 with a hint
_GLUED = re.compile(r"workload([A-Za-z0-9_\-.]+)")
#: a statement whose value is a call (``model vit(...)``, ``dataset synthetic(...)``,
#: ``optimizer sgd(...)``) with its keyword glued to the call's name
_GLUED_CALL = re.compile(r"(model|dataset|optimizer)([A-Za-z_][A-Za-z0-9_\-.]*)")


def _lark(**options) -> Lark:
    """The grammar's parser; ``options`` are only those lark applies when it loads tables
    (the transformer, lexer callbacks), so both parsers share the shipped tables."""
    return _tables_parser(**options)


@functools.lru_cache(maxsize=1)
def lark_parser() -> Lark:
    """The grammar's LALR parser (contextual lexer) building lark's tree: the TUI's
    highlighter (``accelctl.tui.highlight``) lexes and parses with it."""
    return _lark()


# ----------------------------------------------------------------- the AST, built as lark reduces

class _Refused(Exception):
    """E003/E005 met while parsing: the diagnostic without its path (``parse`` adds it)."""

    def __init__(self, code: str, message: str, span: Span, hint: str):
        super().__init__(code, message, span, hint)
        self.code, self.message, self.span, self.hint = code, message, span, hint


def _tspan(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column + len(tok))


def _from(tok: Token, end: Span) -> Span:
    """From the start of ``tok`` to the end of ``end``."""
    return Span(tok.line, tok.column, end.end_line, end.end_column)


def unescape(raw: str) -> str:
    """The value of a string token (``"a\\"b"`` -> ``a"b``); unknown escapes keep the character."""
    body = raw[1:-1]
    if "\\" not in body:
        return body
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def number_value(text: str, span: Span) -> int | float:
    """A number literal's value; E003 when it cannot be represented."""
    clean = text.replace("_", "")
    hint = "write a number in the setting's range (each setting's range is in docs/language.md)"
    if any(c in clean for c in ".eE"):
        value = float(clean)
        if not math.isfinite(value):
            raise _Refused("E003", f"number {text} is beyond the range of a number here (about ±1.8e308)", span, hint)
        return value
    digits = len(clean.lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise _Refused("E003", f"number with {digits:,} digits is too long (at most {MAX_INT_DIGITS:,})", span, hint)
    return int(clean)


class _ToAst(Transformer):
    """lark's inline transformer: each method gets a rule's children (tokens, and what the
    methods of its sub-rules returned) and returns its ``ast`` node."""

    def start(self, children):
        return tuple(children)

    def workload(self, children):
        keyword, name, (items, close) = children
        return ast.Workload(str(name), items, _from(keyword, close), _tspan(name))

    def body(self, children):
        """``{ item* }``: the items, and the span of the closing brace."""
        return tuple(children[1:-1]), _tspan(children[-1])

    def block(self, children):
        kind, *header, (items, close) = children
        return ast.Block(str(kind), _header(header[0]) if header else None, items, _from(kind, close), _tspan(kind))

    def entry(self, children):
        key, value = children
        return ast.Entry(str(key), value, _from(key, value.span), _tspan(key))

    def statement(self, children):
        key, header = children
        header = _header(header)
        return ast.Statement(str(key), header, _from(key, header.span), _tspan(key))

    def word(self, children):
        (tok,) = children
        return ast.Word(str(tok), _tspan(tok))

    def string(self, children):
        (tok,) = children
        return ast.Str(unescape(str(tok)), _tspan(tok))

    def number(self, children):
        (tok,) = children
        span = _tspan(tok)
        return ast.Num(number_value(str(tok), span), str(tok), span)

    def quantity(self, children):
        num, unit = children
        return ast.Quantity(num.value, str(unit), Span(num.span.line, num.span.column, unit.end_line, unit.end_column))

    def call(self, children):
        name, *rest = children
        args = tuple(a for a in rest[1:-1] if not isinstance(a, ast.KwArg))
        kwargs = tuple(a for a in rest[1:-1] if isinstance(a, ast.KwArg))
        return ast.Call(str(name), args, kwargs, _from(name, _tspan(rest[-1])), _tspan(name))

    def kwarg(self, children):
        name, value = children
        return ast.KwArg(str(name), value, _from(name, value.span))

    def list(self, children):
        return ast.ListV(tuple(children[1:-1]), _from(children[0], _tspan(children[-1])))


def _header(header):
    """A block's or statement's header: a name (a token here) or a call."""
    return ast.Word(str(header), _tspan(header)) if isinstance(header, Token) else header


class _LexChecks:
    """Lexer callbacks: the depth of ``{``, ``(`` and ``[`` as they are read, E005 past
    ``MAX_NESTING`` at the bracket (at the name of a call); and the last two numbers read:
    ``_ToAst.number`` refuses one (E003) only once the parser has read the token after it,
    ``number_before`` refuses it first where that token is a syntax error.  Reset before
    each parse."""

    def __init__(self):
        self.depth = 0
        self.name: Token | None = None
        self.numbers: tuple[Token | None, Token | None] = (None, None)

    def reset(self) -> None:
        self.depth, self.name, self.numbers = 0, None, (None, None)

    def number_before(self, exc: UnexpectedInput) -> None:
        """E003 for the number read before the syntax error (a number before it that could not
        be represented was refused as the parser read on)."""
        before, last = self.numbers
        tok = getattr(exc, "token", None)
        num = before if last is not None and tok is not None and tok.start_pos == last.start_pos else last
        if num is not None:
            number_value(str(num), _tspan(num))

    def callbacks(self) -> dict:
        return {"LBRACE": self.open, "LSQB": self.open, "LPAR": self.open_call, "NAME": self.named,
                "RBRACE": self.close, "RSQB": self.close, "RPAR": self.close, "SIGNED_NUMBER": self.number}

    def number(self, tok: Token) -> Token:
        self.numbers = (self.numbers[1], tok)
        return tok

    def named(self, tok: Token) -> Token:
        self.name = tok
        return tok

    def open_call(self, tok: Token) -> Token:
        self.open(self.name if self.name is not None else tok)
        return tok

    def open(self, tok: Token) -> Token:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _Refused("E005", f"nesting deeper than {MAX_NESTING} levels", _tspan(tok),
                           "flatten it: workloads nest blocks, calls and lists a few levels deep")
        return tok

    def close(self, tok: Token) -> Token:
        self.depth -= 1
        return tok


_CHECKS = _LexChecks()
#: one parse at a time: the nesting count is the parser's
_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def ast_parser() -> Lark:
    """The grammar's LALR parser building the AST as it reduces (``_ToAst``, inline)."""
    return _lark(transformer=_ToAst(), lexer_callbacks=_CHECKS.callbacks())


def parse_text(text: str, path: str) -> tuple[ast.Workload, ...]:
    """The workloads of ``text``; ``WorkloadError`` with one positioned diagnostic (no source
    lines attached: ``parser.parse`` does that)."""
    parser = ast_parser()
    with _LOCK:
        _CHECKS.reset()
        try:
            try:
                return parser.parse(text)
            except UnexpectedInput as exc:
                _CHECKS.number_before(exc)  # a number that cannot be represented comes first
                diag = _classify(exc.with_traceback(None), text, path)
        except _Refused as exc:
            diag = Diagnostic(exc.code, exc.message, exc.span, path, exc.hint)
        finally:
            _CHECKS.reset()
    raise WorkloadError(diagnostics=[diag])


# ----------------------------------------------------------------- syntax error classification

def _unclosed_brace(text: str) -> Token | None:
    """The innermost '{' left open at the end of the text (lexing only)."""
    stack: list[Token] = []
    try:
        for tok in lark_parser().lex(text):
            if tok.type == "LBRACE":
                stack.append(tok)
            elif tok.type == "RBRACE" and stack:
                stack.pop()
    except UnexpectedInput:
        pass
    return stack[-1] if stack else None


def _expected(exc) -> set[str]:
    return set(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())


def _names(expected: set[str]) -> str:
    shown = sorted({_TOKEN_NAMES.get(e, e) for e in expected if not e.startswith("__")})
    return ", ".join(shown)


def _glued(word: str) -> str:
    """The hint for the keyword glued to a name (``workloadfoo``)."""
    rest = word[len("workload"):]
    if rest[0].isalpha() or rest[0] == "_":
        return glued_hint_text("workload", rest)
    return "put a space between `workload` and the workload's name (a name starts with a letter or '_')"


def _classify(exc: UnexpectedInput, text: str, path: str) -> Diagnostic:
    line, col = exc.line, exc.column
    if isinstance(exc, UnexpectedCharacters):
        ch = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        if ch == '"':
            rest = text[exc.pos_in_stream:].split("\n", 1)[0]
            return Diagnostic("E102", "unterminated string", Span.point(line, col, len(rest)), path,
                              'close the string with \'"\' on the same line (escape inner quotes as \\")')
        if ch == "'":
            return Diagnostic("E102", "strings use double quotes", Span.point(line, col), path,
                              'write "text" instead of \'text\'')
        return Diagnostic("E104", f"unexpected character {ch!r}", Span.point(line, col), path,
                          "names are letters, digits, '_', '-', '.'; strings need double quotes")
    expected = _expected(exc)
    if {"WORKLOAD", "NAME"} <= expected:
        # right after a '}' (one state ends a block and a workload) the lexer refuses a token before
        # the parser knows which '}' it was: the keyword is not offered, as a '}' is mostly a block's
        expected.discard("WORKLOAD")
    tok: Token | None = getattr(exc, "token", None)
    at_end = isinstance(exc, UnexpectedEOF) or (tok is not None and tok.type == "$END")
    if at_end:
        opened = _unclosed_brace(text)
        if opened is not None:
            return Diagnostic("E101", "missing '}': this block is never closed", _tspan(opened), path,
                              "add '}' to close the block opened here")
        return Diagnostic("E100", "unexpected end of file", Span.point(max(line, 1), max(col, 1)), path,
                          f"expected {_names(expected)}" if expected else "")
    assert tok is not None
    tspan = _tspan(tok)
    if tok.type == "RBRACE" and "WORKLOAD" in expected:
        return Diagnostic("E107", "unmatched '}'", tspan, path, "remove it, or open the block it closes")
    if "WORKLOAD" in expected and tok.type != "WORKLOAD":
        glued = tok.type == "NAME" and _GLUED.fullmatch(tok.value)
        return Diagnostic("E106", f"expected 'workload NAME {{' at top level, found {tok.value!r}", tspan, path,
                          _glued(tok.value) if glued else "every setting lives inside a 'workload name { ... }' block")
    if "EQUAL" in expected and tok.type in ("SIGNED_NUMBER", "STRING", "LSQB"):
        before = text.splitlines()[tok.line - 1][: tok.column - 1].split()
        key = before[-1] if before else "key"
        value = tok.value if tok.type != "LSQB" else "[...]"
        return Diagnostic("E103", "missing '=' between key and value", Span.point(tok.line, tok.column), path,
                          f"write '{key} = {value}'")
    if tok.type in ("RBRACE", "RPAR", "RSQB", "COMMA") and "STRING" in expected and "EQUAL" not in expected:
        return Diagnostic("E105", "missing value", tspan, path, "a value goes here: a number, string, name or call")
    if "RBRACE" in expected and tok.type == "WORKLOAD":
        opened = _unclosed_brace(text[: _offset(text, tok.line, tok.column)])
        span = _tspan(opened) if opened is not None else tspan
        return Diagnostic("E101", "missing '}' before the next workload", span, path,
                          "add '}' to close the block opened here")
    if tok.type == "UNIT":
        return Diagnostic("E108", f"unit {tok.value!r} without a number", tspan, path,
                          f"write a number before the unit, e.g. '1 {tok.value}'")
    kind = _TOKEN_NAMES.get(tok.type, "token").removeprefix("a ")
    what = f"stray {_TOKEN_NAMES[tok.type]}" if tok.type in _PUNCT else f"unexpected {kind} {tok.value!r}"
    if tok.type == "LPAR":  # ``modelvit(...)``: a statement's keyword glued to the call after it
        before = text.splitlines()[tok.line - 1][: tok.column - 1].split()
        glued = _GLUED_CALL.fullmatch(before[-1]) if before else None
        if glued:
            return Diagnostic("E100", what, tspan, path, glued_hint_text(glued[1], f"{glued[2]}(...)"))
    return Diagnostic("E100", what, tspan, path,
                      f"expected {_names(expected)}" if expected else "")


def _offset(text: str, line: int, column: int) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[: line - 1]) + column - 1
