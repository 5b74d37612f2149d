"""AST of the workload language: plain named tuples, each with its source span.

The parser (``accelctl.dsl.parser``, lark with the inline transformer of
``accelctl.dsl.lalr``) builds these as it reduces the grammar's rules.  Values stay
untyped here (a ``Word`` is just a name); giving them meaning is the check pass's job.
"""

from typing import NamedTuple, Union

from accelctl import frozen
from accelctl.errors import Span


class Str(NamedTuple):
    value: str
    span: Span


class Num(NamedTuple):
    value: int | float
    #: the literal as written (``65_000``, ``1e-3``)
    text: str
    span: Span


class Quantity(NamedTuple):
    value: int | float
    unit: str
    span: Span


class Word(NamedTuple):
    """A bare name used as a value: ``greedy``, ``on``, ``bf16``, ``c10d``."""

    name: str
    span: Span


class KwArg(NamedTuple):
    name: str
    value: "Value"
    span: Span


class Call(NamedTuple):
    """``name(arg, key = value)``: a constructor-like value, never executed."""

    name: str
    args: tuple["Value", ...]
    kwargs: tuple[KwArg, ...]
    span: Span
    name_span: Span


class ListV(NamedTuple):
    items: tuple["Value", ...]
    span: Span


Value = Union[Str, Num, Quantity, Word, Call, ListV]


class Entry(NamedTuple):
    """``key = value``"""

    key: str
    value: Value
    span: Span
    key_span: Span


class Statement(NamedTuple):
    """``key value`` with a name or call as value: ``precision bf16``."""

    key: str
    value: Value
    span: Span
    key_span: Span


class Block(NamedTuple):
    """``kind [header] { items }``"""

    kind: str
    header: Value | None
    items: tuple["Item", ...]
    span: Span
    kind_span: Span


Item = Union[Entry, Statement, Block]


class Workload(NamedTuple):
    name: str
    items: tuple[Item, ...]
    span: Span
    name_span: Span


@frozen.uncompared("lexed")
class File(frozen.Value):  # frozen.Value: this module's Value is a value of the language
    path: str
    text: str
    workloads: tuple[Workload, ...]
    #: every name, number, unit and string came from lexing ``text`` (the parser, or a parse-cache
    #: entry checked against it): the checker need not look at them again (``dsl.lexemes``)
    lexed: bool = False


def number_text(x: int | float) -> str:
    """A number for messages: ints in full (``{:g}`` of an int past 1e308 overflows), floats ``{:g}``."""
    return str(x) if isinstance(x, int) else f"{x:g}"


def value_text(v: Value) -> str:
    """The value as it would be written in a workload file (for messages)."""
    if isinstance(v, Str):
        escaped = v.value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
        return '"' + escaped + '"'
    if isinstance(v, Num):
        return v.text
    if isinstance(v, Quantity):
        return f"{number_text(v.value)} {v.unit}"
    if isinstance(v, Word):
        return v.name
    if isinstance(v, Call):
        parts = [value_text(a) for a in v.args] + [f"{k.name} = {value_text(k.value)}" for k in v.kwargs]
        return f"{v.name}({', '.join(parts)})"
    if isinstance(v, ListV):
        return "[" + ", ".join(value_text(i) for i in v.items) + "]"
    raise TypeError(type(v))
