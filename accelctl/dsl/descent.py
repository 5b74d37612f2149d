"""The fast path of ``parse``: a recursive-descent parser of ``grammar/workload.lark``.

lark's LALR parser (with its contextual lexer, its tree and the transformer over it)
reads about 0.3 MB of workload text a second here; this module reads the same
language into the same ``ast`` nodes, spans included, about ten times faster, so that
validation stays linear and quick at any size.  It only knows the happy path: on the
first token it cannot take it raises ``Unparsed`` and ``parser.parse`` asks lark, whose
failure says precisely what is wrong (E100-E108).  ``tests/dsl/test_fuzz.py`` checks the
two agree (the same AST, or both refuse) on every fuzzed input.

What lark's contextual lexer does and this mirrors: a unit (``2 steps``) is a token only
right after a number; the keyword ``workload`` is only a keyword at the top level,
and the first one of a file is matched as a prefix (``workloadfoo {`` is workload
``foo``, as in lark; after a workload, ``workloadfoo`` is a name and an error), and
right after a ``}`` the word ``workload`` is the keyword even inside a block.

Two limits lark does not have, each a positioned diagnostic:

* E005: brackets, calls and blocks nested deeper than ``MAX_NESTING``;
* E003: a number that cannot be represented: a literal over Python's 4,300-digit
  integer limit, or a float literal beyond the double range (``1e309``).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import re
from array import array

from accelctl.dsl import ast
from accelctl.errors import Diagnostic, Span, WorkloadError

#: deeper nesting of [..], f(..) and blocks is E005 (real workloads nest 3 or 4 deep)
MAX_NESTING = 100
#: Python's limit on int(str) (sys.get_int_max_str_digits), below which int() is safe
MAX_INT_DIGITS = 4300

_WS = re.compile(r"(?:[ \t\f\r\n]+|#[^\n]*|//[^\n]*)+")
#: grammar/workload.lark's STRING: runs of plain characters between escapes, possessive (no
#: backtracking state per character: the alternation it replaces kept ~290 bytes per character)
_STRING = re.compile(r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"')
_NUMBER = re.compile(r"[+-]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_\-\.]*")
_UNIT = re.compile(r"(usd\/h|usd\/hr|\$\/h|usd|steps|step|tokens|token|samples|sample|sequences|images|epochs"
                   r"|epoch|TiB|GiB|MiB|KiB|TB|GB|MB|KB|Tbps|Gbps|Mbps|PFLOPS|TFLOPS|GFLOPS|min|ms|us|s|h|B)"
                   r"(?![A-Za-z0-9_])(?!\s*=)")


def _uncaptured(terminal: re.Pattern) -> str:
    """The terminal's pattern with its groups made non-capturing: fewer marks for the regex
    engine to save and restore on every match of ``_TOKEN``."""
    return re.sub(r"(?<!\\)\((?!\?)", "(?:", terminal.pattern)


#: ``_WS`` without the newline: blanks and comments within a line -- blanks, then at most one
#: comment, which runs to the newline (a loop over the three, as ``_WS`` is written, matches
#: the same and cost the regex engine a sixth of its time)
_SKIP = r"[ \t\f\r]*+(?:(?:#|//)[^\n]*+)?+"
#: one token per match, the blanks before it skipped, named by ``lastgroup``: a newline
#: (counted, not a token), punctuation, a name, a number with the unit that may follow it
#: (blanks, newlines and comments between; the number and the blanks are atomic groups,
#: as the separate matches they replace: a unit never takes a number's tail, nor is found
#: inside a comment), a string, any other character (ERROR), or the end.  The alternatives
#: start with disjoint characters: this is the per-character dispatch it replaced, in C.
_TOKEN = re.compile(
    "(?>" + _SKIP + r")(?:(?P<NL>\n)"
    r"|(?P<P>[{}=()\[\],])"
    r"|(?P<NAME>" + _uncaptured(_NAME) + ")"
    r"|(?P<NUMBER>(?>" + _uncaptured(_NUMBER) + "))(?:(?>(?:" + _WS.pattern + ")?)(?P<UNIT>" + _uncaptured(_UNIT)
    + "))?"
    r"|(?P<STRING>" + _uncaptured(_STRING) + ")"
    r"|(?P<ERROR>.)"
    r"|(?P<END>\Z))")
_GROUP_NL, _GROUP_PUNCT, _GROUP_NUMBER, _GROUP_UNIT, _GROUP_ERROR, _GROUP_END = (
    _TOKEN.groupindex[k] for k in ("NL", "P", "NUMBER", "UNIT", "ERROR", "END"))
_KIND_OF_GROUP = {n: k for k, n in _TOKEN.groupindex.items()}
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\"}
_ESCAPE = re.compile(r"\\(.)", re.S)

# token kinds
NAME, STRING, NUMBER, UNIT, END, ERROR = "NAME", "STRING", "NUMBER", "UNIT", "$END", "ERROR"


#: ``_Span((line, column, end_line, end_column))``, ``_Entry((key, value, span, key_span))``...:
#: the named tuples ``Span`` and ``ast.*`` made in C, with no Python frame (their own
#: ``__new__`` is a Python function): about one of each per token of files of megabytes
_Span, _Str, _Num, _Quantity, _Word, _KwArg, _Call, _ListV, _Entry, _Statement, _Block, _Workload = (
    functools.partial(tuple.__new__, c) for c in (Span, ast.Str, ast.Num, ast.Quantity, ast.Word, ast.KwArg, ast.Call,
                                                   ast.ListV, ast.Entry, ast.Statement, ast.Block, ast.Workload))


class Unparsed(Exception):
    """This parser cannot take the text: lark says why.  ``offset``, ``line``, ``column``:
    where the top-level workload holding the problem starts (lark need only read from
    there: everything before it parsed)."""

    def __init__(self, offset: int = 0, line: int = 1, column: int = 1):
        super().__init__(offset, line, column)
        self.offset, self.line, self.column = offset, line, column


def unescape(raw: str) -> str:
    """The value of a string token (``"a\\"b"`` -> ``a"b``); unknown escapes keep the character."""
    body = raw[1:-1]
    if "\\" not in body:
        return body
    return _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(1)), body)


def number_value(text: str, span: Span, path: str) -> int | float:
    """A number literal's value; E003 when it cannot be represented."""
    clean = text.replace("_", "")
    if any(c in clean for c in ".eE"):
        value = float(clean)
        if not math.isfinite(value):
            raise WorkloadError(diagnostics=[Diagnostic(
                "E003", f"number {text} is beyond the range of a number here (about ±1.8e308)", span, path,
                "write a number in the setting's range (each setting's range is in docs/language.md)")])
        return value
    digits = len(clean.lstrip("+-"))
    if digits > MAX_INT_DIGITS:
        raise WorkloadError(diagnostics=[Diagnostic(
            "E003", f"number with {digits:,} digits is too long (at most {MAX_INT_DIGITS:,})", span, path,
            "write a number in the setting's range (each setting's range is in docs/language.md)")])
    return int(clean)


def tokenize(text: str) -> tuple[list, list, array, list, array]:
    """Parallel sequences (kinds, values, start offsets, lines, columns) of the text's tokens,
    ``$END`` last; an ``ERROR`` token (then ``$END``) at a character no token starts with.
    One ``_TOKEN`` match per token (or newline): this loop runs once per token of files
    of megabytes, so it appends through bound methods, dispatches on the number of the
    matched group (``lastindex``: the named groups are the outermost ones) and tests the
    commonest kinds first."""
    kinds: list[str] = []
    values: list[str] = []
    lines: list[int] = []  # a list: the tokens of a line, and the spans made of them, share its int
    # offsets and columns as machine integers: 8 bytes a token each, where a list of Python ints
    # took 36 (a pointer and, past 256, an int object): 1 MiB of `[1,1,...]` is a million tokens
    starts, cols = array("q"), array("q")
    add_kind, add_value, add_start, add_line, add_col = (
        kinds.append, values.append, starts.append, lines.append, cols.append)
    line, line_start = 1, 0
    g_punct, g_newline, g_number, g_unit, g_error, g_end = _GROUP_PUNCT, _GROUP_NL, _GROUP_NUMBER, _GROUP_UNIT, \
        _GROUP_ERROR, _GROUP_END
    kind_of = _KIND_OF_GROUP
    for m in _TOKEN.finditer(text):
        g = m.lastindex  # the group's number: no lookup of its name
        if g == g_punct:
            value = m[g]
            start = m.end() - 1
            add_kind(value)
        elif g == g_newline:
            line += 1
            line_start = m.end()
            continue
        elif g == g_unit:  # a number, then its unit (maybe lines below)
            start = m.start(g_number)
            add_kind(NUMBER)
            add_value(m[g_number])
            add_start(start)
            add_line(line)
            add_col(start - line_start + 1)
            value = m[g]
            unit_start = m.start(g)
            newlines = text.count("\n", start, unit_start)
            if newlines:
                line += newlines
                line_start = text.rindex("\n", start, unit_start) + 1
            start = unit_start
            add_kind(UNIT)
        elif g == g_end:
            break
        else:  # NAME, NUMBER, STRING, ERROR
            value = m[g]
            start = m.start(g)
            add_kind(kind_of[g])
        add_value(value)
        add_start(start)
        add_line(line)
        add_col(start - line_start + 1)
        if g == g_error:  # no token starts here: the parser stops at it (and says which workload)
            break
    n = len(text)
    add_kind(END)
    add_value("")
    add_start(n)
    add_line(line)
    add_col(n - line_start + 1)
    return kinds, values, starts, lines, cols


class _Parser:
    """Recursive descent over the token lists; every node's span as lark's propagate_positions
    (a node spans its first token to its last, brackets included).  Hot paths read the
    lists through locals: this runs once per token of files of megabytes."""

    def __init__(self, text: str, path: str):
        self.path = path
        self.kinds, self.values, self.starts, self.lines, self.cols = tokenize(text)
        self.i = 0
        self.depth = 0
        self.workload_start = 0  # token index of the top-level workload being read

    def parse(self) -> tuple[ast.Workload, ...]:
        try:
            return self.file()
        except Unparsed:
            w = self.workload_start
        # raised outside the handler: the refused one's traceback (its frames hold the AST read
        # so far) is not kept as this one's context while lark reads the text again
        raise Unparsed(self.starts[w], self.lines[w], self.cols[w])

    def _span(self, i: int) -> Span:
        line = self.lines[i]
        col = self.cols[i]
        return _Span((line, col, line, col + len(self.values[i])))

    def _enter(self, i: int) -> None:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise WorkloadError(diagnostics=[Diagnostic(
                "E005", f"nesting deeper than {MAX_NESTING} levels", self._span(i), self.path,
                "flatten it: workloads nest blocks, calls and lists a few levels deep")])

    # -- rules
    def file(self) -> tuple[ast.Workload, ...]:
        out = []
        kinds, values = self.kinds, self.values
        while kinds[self.i] != END:
            i = self.i
            word = values[i]
            if kinds[i] != NAME or not word.startswith("workload"):
                raise Unparsed
            rest = word[len("workload"):]
            if rest:
                # lark's lexer at the start of a file knows only the keyword, and matches it as a
                # prefix (workloadfoo = workload foo); after a workload it knows names too (the
                # state after a body's '}' is shared with blocks), so workloadfoo is a name there
                if out or not (rest[0].isalpha() or rest[0] == "_"):
                    raise Unparsed
                line, col = self.lines[i], self.cols[i] + len("workload")
                name, name_span = rest, _Span((line, col, line, col + len(rest)))
                self.i = i + 1
            else:
                if kinds[i + 1] != NAME:
                    raise Unparsed
                self.i = i + 2
                name, name_span = values[i + 1], self._span(i + 1)
            # from here a failure is this workload's; before (no keyword, no name) it is read
            # from the previous one, as lark's state after a workload depends on what follows
            self.workload_start = i
            items, end_line, end_col = self.body()
            out.append(_Workload((name, items, _Span((self.lines[i], self.cols[i], end_line, end_col)), name_span)))
        return tuple(out)

    def body(self) -> tuple[tuple, int, int]:
        """``{ item* }``: the items and where the closing brace ends."""
        kinds = self.kinds
        open_i = self.i
        if kinds[open_i] != "{":
            raise Unparsed
        self.i = open_i + 1
        self._enter(open_i)
        items = []
        item = self.item
        while kinds[self.i] != "}":
            items.append(item())
        close = self.i
        self.i = close + 1
        self.depth -= 1
        return tuple(items), self.lines[close], self.cols[close] + 1

    def item(self):
        kinds, values, lines, cols = self.kinds, self.values, self.lines, self.cols
        k = self.i
        if kinds[k] != NAME:
            raise Unparsed
        key = values[k]
        if key == "workload" and kinds[k - 1] == "}":
            # right after a '}' lark's lexer knows the keyword (that state may end a workload):
            # 'workload' there is the next workload, so a '}' is missing (E101)
            raise Unparsed
        line, col = lines[k], cols[k]
        key_span = _Span((line, col, line, col + len(key)))
        nxt = kinds[k + 1]
        if nxt == "=":
            self.i = k + 2
            value = self.value()
            vs = value.span
            return _Entry((key, value, _Span((line, col, vs.end_line, vs.end_column)), key_span))
        self.i = k + 1
        if nxt == "{":
            items, end_line, end_col = self.body()
            return _Block((key, None, items, _Span((line, col, end_line, end_col)), key_span))
        if nxt != NAME:
            raise Unparsed
        if kinds[k + 2] == "(":
            header = self.call()
        else:
            self.i = k + 2
            word, wline, wcol = values[k + 1], lines[k + 1], cols[k + 1]
            header = _Word((word, _Span((wline, wcol, wline, wcol + len(word)))))
        if kinds[self.i] == "{":
            items, end_line, end_col = self.body()
            return _Block((key, header, items, _Span((line, col, end_line, end_col)), key_span))
        hs = header.span
        return _Statement((key, header, _Span((line, col, hs.end_line, hs.end_column)), key_span))

    def value(self):
        i = self.i
        kinds = self.kinds
        kind = kinds[i]
        if kind == NUMBER:
            text = self.values[i]
            line, col = self.lines[i], self.cols[i]
            span = _Span((line, col, line, col + len(text)))
            num = int(text) if text.isdigit() and len(text) <= MAX_INT_DIGITS else number_value(text, span, self.path)
            if kinds[i + 1] == UNIT:
                self.i = i + 2
                u = self.values[i + 1]
                ucol = self.cols[i + 1]
                return _Quantity((num, u, _Span((line, col, self.lines[i + 1], ucol + len(u)))))
            self.i = i + 1
            return _Num((num, text, span))
        if kind == NAME:
            if kinds[i + 1] == "(":
                return self.call()
            self.i = i + 1
            word, line, col = self.values[i], self.lines[i], self.cols[i]
            return _Word((word, _Span((line, col, line, col + len(word)))))
        if kind == STRING:
            self.i = i + 1
            raw, line, col = self.values[i], self.lines[i], self.cols[i]
            return _Str((unescape(raw), _Span((line, col, line, col + len(raw)))))
        if kind == "[":
            return self.list()
        raise Unparsed

    def call(self) -> ast.Call:
        kinds, values = self.kinds, self.values
        n = self.i  # NAME, then "(" (the callers looked)
        self.i = n + 2
        self._enter(n)
        args, kwargs = [], []
        value = self.value
        while kinds[self.i] != ")":
            k = self.i
            if kinds[k] == NAME and kinds[k + 1] == "=":
                self.i = k + 2
                v = value()
                line, col = self.lines[k], self.cols[k]
                kwargs.append(_KwArg((values[k], v, _Span((line, col, v.span.end_line, v.span.end_column)))))
            else:
                args.append(value())
            if kinds[self.i] == ",":
                self.i += 1
            elif kinds[self.i] != ")":
                raise Unparsed
        close = self.i
        self.i = close + 1
        self.depth -= 1
        name_span = self._span(n)
        return _Call((values[n], tuple(args), tuple(kwargs),
                     _Span((name_span.line, name_span.column, self.lines[close], self.cols[close] + 1)), name_span))

    def list(self) -> ast.ListV:
        kinds = self.kinds
        open_i = self.i
        self.i = open_i + 1
        self._enter(open_i)
        items = []
        value = self.value
        while kinds[self.i] != "]":
            items.append(value())
            if kinds[self.i] == ",":
                self.i += 1
            elif kinds[self.i] != "]":
                raise Unparsed
        close = self.i
        self.i = close + 1
        self.depth -= 1
        span = _Span((self.lines[open_i], self.cols[open_i], self.lines[close], self.cols[close] + 1))
        return _ListV((tuple(items), span))


def _join(a: Span, b: Span) -> Span:
    return _Span((a.line, a.column, b.end_line, b.end_column))


@contextlib.contextmanager
def gc_paused():
    """No cyclic garbage collection inside: parsing and checking build hundreds of
    thousands of small acyclic objects, and the collections they trigger (each full one
    walks every object alive) took 60 % of the time of a 1 MB file and grew faster than
    the file.  Reference counting still frees everything; the collector resumes after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def parse_fast(text: str, path: str) -> ast.File:
    """The file's AST; ``Unparsed`` when the text is not in the language (lark explains),
    ``WorkloadError`` for E003/E005."""
    with gc_paused():
        return ast.File(path, text, _Parser(text, path).parse())
