"""What a name, a number, a unit and a string of the language can be, checked on the values.

The parser only ever builds names that are NAME tokens, finite numbers and strings of UTF-8
text; an AST from anywhere else (a parse-cache entry, a program that builds one) may hold
anything.  ``value_problems`` finds what no workload text could have produced, so the checker
refuses it at its place instead of taking a NaN learning rate for a positive one or a newline
in a workload's name into a shell script; the parse cache checks each value it rebuilds with
the same predicates.  NAME and the units are the grammar's terminals (``grammar/workload.lark``;
a test holds them equal).
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from accelctl.dsl import ast
from accelctl.errors import Span

#: a NAME token, as the grammar writes it; checked below without this pattern (``all_names``)
NAME = r"[A-Za-z_][A-Za-z0-9_\-\.]*"
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
#: str.translate's table removing every character a NAME holds: of names joined a line each,
#: only the newlines are left
_DROP = str.maketrans("", "", _LETTERS + "0123456789_-.")
#: what no name starts with (a newline after a newline: an empty name)
_BAD_STARTS = tuple("\n" + c for c in "0123456789-.\n")
UNITS = frozenset(("usd/h", "usd/hr", "$/h", "usd", "steps", "step", "tokens", "token", "samples", "sample",
                   "sequences", "images", "epochs", "epoch", "TiB", "GiB", "MiB", "KiB", "TB", "GB", "MB", "KB",
                   "Tbps", "Gbps", "Mbps", "PFLOPS", "TFLOPS", "GFLOPS", "min", "ms", "us", "s", "h", "B"))
#: Python's limit on int(str) digits (sys.get_int_max_str_digits): the parser refuses longer
#: integer literals (E003); as bits, what an int of that many digits needs at most
MAX_INT_DIGITS = 4300
MAX_INT_BITS = math.ceil(MAX_INT_DIGITS * math.log2(10))


def is_name(x: object) -> bool:
    return type(x) is str and all_names([x])


def all_names(names: list[str]) -> bool:
    """Every one of ``names`` is a NAME token, found over all of them joined a line each with a
    few C string calls (a parse-cache hit checks ~1,600 names; a regular expression call, or a
    match, a name cost more than the rest of its rebuild)."""
    if not names:
        return True
    try:
        joined = "\n".join(names)  # a TypeError for anything but str
    except TypeError:
        return False
    if not joined.isascii() or joined.translate(_DROP) != "\n" * (len(names) - 1):
        return False  # a character no name holds, or a newline inside a name
    marked = "\n" + joined + "\n"
    return not any(bad in marked for bad in _BAD_STARTS)


def is_text(x: object) -> bool:
    """A str that is UTF-8 text (no lone surrogate)."""
    if type(x) is not str:
        return False
    if x.isascii():
        return True
    try:
        x.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def number_problem(x: object) -> str:
    """Why ``x`` is not a number the language can write ("" when it is)."""
    if type(x) is float:
        return "" if math.isfinite(x) else f"number {x!r} is not finite"
    if type(x) is int:
        return "" if x.bit_length() <= MAX_INT_BITS else f"number with over {MAX_INT_DIGITS:,} digits"
    return f"{type(x).__name__} {ascii(x)[:40]} is not a number"


def value_problems(workloads: tuple[ast.Workload, ...]) -> list[tuple[str, str, Span | None]]:
    """(code, message, span) for every name, number, unit or string of ``workloads`` that no
    workload text can hold: E003 a number that is not finite, E109 anything else."""
    return list(_problems(workloads))


def _problems(workloads) -> Iterator[tuple[str, str, Span | None]]:
    for w in workloads:
        if not is_name(w.name):
            yield "E109", f"workload name {_shown(w.name)} is not a name", _span(w, "name_span")
        for item in w.items:
            yield from _item(item)


def _item(node) -> Iterator[tuple[str, str, Span | None]]:
    kind = type(node)
    if kind is ast.Block:
        if not is_name(node.kind):
            yield "E109", f"block kind {_shown(node.kind)} is not a name", _span(node, "kind_span")
        if node.header is not None:
            yield from _value(node.header)
        for item in node.items:
            yield from _item(item)
    elif kind is ast.Entry or kind is ast.Statement:
        if not is_name(node.key):
            yield "E109", f"key {_shown(node.key)} is not a name", _span(node, "key_span")
        yield from _value(node.value)
    else:
        yield "E109", f"{kind.__name__} where a block, entry or statement goes", _span(node, "span")


def _value(node) -> Iterator[tuple[str, str, Span | None]]:
    kind = type(node)
    where = _span(node, "span")
    if kind is ast.Word:
        if not is_name(node.name):
            yield "E109", f"{_shown(node.name)} is not a name", where
    elif kind is ast.Str:
        if not is_text(node.value):
            yield "E109", "a string that is not UTF-8 text", where
    elif kind is ast.Num or kind is ast.Quantity:
        why = number_problem(node.value)
        if why:
            yield ("E003" if type(node.value) is float else "E109"), why, where
        if kind is ast.Quantity and node.unit not in UNITS:
            yield "E109", f"unit {_shown(node.unit)} is not a unit of the language", where
    elif kind is ast.Call:
        if not is_name(node.name):
            yield "E109", f"call name {_shown(node.name)} is not a name", _span(node, "name_span")
        for arg in node.args:
            yield from _value(arg)
        for kw in node.kwargs:
            if type(kw) is not ast.KwArg or not is_name(kw.name):
                yield "E109", "a keyword argument whose name is not a name", _span(kw, "span")
            else:
                yield from _value(kw.value)
    elif kind is ast.ListV:
        for v in node.items:
            yield from _value(v)
    else:
        yield "E109", f"{kind.__name__} where a value goes", where


def _span(node, field: str) -> Span | None:
    span = getattr(node, field, None)
    return span if type(span) is Span else None


def _shown(x: object) -> str:
    """``x`` for a message: its repr, ASCII only and cut short (it may hold anything)."""
    return ascii(x)[:60]
