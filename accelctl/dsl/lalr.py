"""lark's LALR parser over ``grammar/workload.lark``: it explains what the fast path refuses.

``accelctl.dsl.parser.parse`` reads a text with the recursive-descent parser of
``accelctl.dsl.descent``; only a text that parser cannot take comes here (``parse_refused``),
where lark's LALR parser (contextual lexer) either takes it too (then its tree becomes the
AST through ``_ToAst``) or fails, and its failure is classified into a positioned
diagnostic (missing brace, missing ``=``, bad string, stray token...).  The TUI's
highlighter (``accelctl.tui.highlight``) lexes and parses with the same instance
(``lark_parser``).  A valid file therefore never imports lark.

The parser is built with lark's ``cache``: its tables are pickled once into
``cache_file()`` (``$XDG_CACHE_HOME/accelctl/``, else ``~/.cache/accelctl/``, one file per
grammar text and lark version; lark checks the hash stored in the file before using it),
so a later process loads them instead of analysing the grammar.  Where that folder cannot
be created or written, the parser is built without a cache.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import lark
from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, VisitError

from accelctl.dsl import ast
from accelctl.dsl.descent import Unparsed, number_value, unescape
from accelctl.errors import Diagnostic, Span, WorkloadError, attach_source

_TOKEN_NAMES = {
    "LBRACE": "'{'", "RBRACE": "'}'", "EQUAL": "'='", "LPAR": "'('", "RPAR": "')'",
    "COMMA": "','", "LSQB": "'['", "RSQB": "']'", "WORKLOAD": "'workload'", "NAME": "a name",
    "STRING": "a string", "SIGNED_NUMBER": "a number", "UNIT": "a unit", "$END": "end of file",
}

#: lark's terminals that are punctuation ("stray '}'")
_PUNCT = {"LBRACE", "RBRACE", "EQUAL", "LPAR", "RPAR", "COMMA", "LSQB", "RSQB"}


@functools.lru_cache(maxsize=1)
def _grammar_text() -> str:
    from accelctl.dsl.parser import grammar_path

    return grammar_path().read_text(encoding="utf-8")


def cache_dir() -> Path:
    """Where the parser tables are cached: ``$XDG_CACHE_HOME/accelctl``, else ``~/.cache/accelctl``."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "accelctl"


def cache_file() -> str | bool:
    """The cache file for this grammar text and lark version, or ``False`` (no cache) when
    its folder cannot be created or written."""
    folder = cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    digest = hashlib.sha256(_grammar_text().encode("utf-8")).hexdigest()[:16]
    return str(folder / f"workload-grammar-{digest}-lark{lark.__version__}.cache")


@functools.lru_cache(maxsize=1)
def _parser() -> Lark:
    return _lark()


@functools.lru_cache(maxsize=1)
def _refusal_finder() -> Lark:
    """The same parser building nothing (``_Nothing``): where and why a text is refused, in
    memory that does not grow with the text."""
    return _lark(transformer=_Nothing())


def _lark(**options) -> Lark:
    return Lark(
        _grammar_text(),
        parser="lalr",
        lexer="contextual",
        propagate_positions=True,
        maybe_placeholders=False,
        cache=cache_file(),
        **options,
    )


class _Nothing:
    """An inline transformer that keeps nothing: each rule reduces to None, so the parser's stack
    holds no tokens or subtrees.  A tree of a 1 MiB list (a million lark tokens with positions,
    a node per value) took 550 MB only to report its syntax error at the end."""

    def __default__(self, data, children, meta):
        # a rule lark made of a repetition (``__list_star_0``) is spliced into its parent as a tree's
        # children: an empty one; every other rule is nothing
        return _NO_CHILDREN if data.startswith("_") else None


_NO_CHILDREN = lark.Tree("_", [])


def _span(meta) -> Span:
    return Span(meta.line, meta.column, meta.end_line, meta.end_column)


def _tspan(tok: Token) -> Span:
    return Span(tok.line, tok.column, tok.end_line or tok.line, tok.end_column or tok.column + len(tok))


@v_args(meta=True)
class _ToAst(Transformer):
    def start(self, meta, items):
        return tuple(items)

    def workload(self, meta, items):
        name, body = items
        return ast.Workload(str(name), body, _span(meta), _tspan(name))

    def body(self, meta, items):
        return tuple(items)

    def block(self, meta, items):
        kind = items[0]
        header = items[1] if len(items) == 3 else None
        if isinstance(header, Token):
            header = ast.Word(str(header), _tspan(header))
        return ast.Block(str(kind), header, items[-1], _span(meta), _tspan(kind))

    def entry(self, meta, items):
        key, value = items
        return ast.Entry(str(key), value, _span(meta), _tspan(key))

    def statement(self, meta, items):
        key, value = items
        if isinstance(value, Token):
            value = ast.Word(str(value), _tspan(value))
        return ast.Statement(str(key), value, _span(meta), _tspan(key))

    def word(self, meta, items):
        (tok,) = items
        return ast.Word(str(tok), _tspan(tok))

    def __init__(self, path: str):
        super().__init__()
        self.path = path

    def string(self, meta, items):
        (tok,) = items
        return ast.Str(unescape(str(tok)), _tspan(tok))

    def number(self, meta, items):
        (tok,) = items
        return ast.Num(number_value(str(tok), _tspan(tok), self.path), str(tok), _tspan(tok))

    def quantity(self, meta, items):
        num, unit = items
        return ast.Quantity(num.value, str(unit), _span(meta))

    def call(self, meta, items):
        name, *rest = items
        args = tuple(a for a in rest if not isinstance(a, ast.KwArg))
        kwargs = tuple(a for a in rest if isinstance(a, ast.KwArg))
        return ast.Call(str(name), args, kwargs, _span(meta), _tspan(name))

    def kwarg(self, meta, items):
        name, value = items
        if isinstance(value, Token):
            value = ast.Word(str(value), _tspan(value))
        return ast.KwArg(str(name), value, _span(meta))

    def list(self, meta, items):
        return ast.ListV(tuple(items), _span(meta))


def lark_parser() -> Lark:
    """The grammar's LALR parser (contextual lexer), built once: ``parse_refused`` and the
    TUI's highlighter (``accelctl.tui.highlight``) lex and parse with this same instance."""
    return _parser()


def parse_refused(text: str, where: Unparsed, path: str) -> ast.File:
    """The AST of a text the fast parser refused at ``where`` if lark takes it, else raise
    ``WorkloadError`` with the classified syntax error.

    lark reads from the top-level workload that holds the problem (those before it parsed),
    with the text before it blanked, so that its positions are the file's and its cost that
    workload's, not the file's."""
    tail = "\n" * (where.line - 1) + " " * (where.column - 1) + text[where.offset:]
    try:
        _refusal_finder().parse(tail)  # where and why, building nothing
        tree = _parser().parse(text)  # lark took what the fast parser refused (never seen; the fuzz
    except UnexpectedInput as exc:  # test compares them): then the whole file is lark's
        diag = _classify(exc, tail, path)
        raise WorkloadError(diagnostics=attach_source([diag], text)) from None
    try:
        workloads = _ToAst(path).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, WorkloadError):
            raise WorkloadError(diagnostics=attach_source(exc.orig_exc.diagnostics, text)) from None
        raise
    return ast.File(path, text, workloads)


# ----------------------------------------------------------------- syntax error classification

def _unclosed_brace(text: str) -> Token | None:
    """The innermost '{' left open at the end of the text (lexing only)."""
    stack: list[Token] = []
    try:
        for tok in _parser().lex(text):
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
        return Diagnostic("E106", f"expected 'workload NAME {{' at top level, found {tok.value!r}", tspan, path,
                          "every setting lives inside a 'workload name { ... }' block")
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
    return Diagnostic("E100", what, tspan, path,
                      f"expected {_names(expected)}" if expected else "")


def _offset(text: str, line: int, column: int) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[: line - 1]) + column - 1
