"""AST of the workload language: plain frozen dataclasses, each with its source span.

The parser (``accelctl.dsl.parser``) builds these from lark's tree.  Values stay
untyped here (a ``Word`` is just a name); giving them meaning is the check pass's job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from accelctl.errors import Span


@dataclass(frozen=True)
class Str:
    value: str
    span: Span


@dataclass(frozen=True)
class Num:
    value: int | float
    #: the literal as written (``65_000``, ``1e-3``)
    text: str
    span: Span


@dataclass(frozen=True)
class Quantity:
    value: int | float
    unit: str
    span: Span


@dataclass(frozen=True)
class Word:
    """A bare name used as a value: ``greedy``, ``on``, ``bf16``, ``c10d``."""

    name: str
    span: Span


@dataclass(frozen=True)
class KwArg:
    name: str
    value: "Value"
    span: Span


@dataclass(frozen=True)
class Call:
    """``name(arg, key = value)``: a constructor-like value, never executed."""

    name: str
    args: tuple["Value", ...]
    kwargs: tuple[KwArg, ...]
    span: Span
    name_span: Span


@dataclass(frozen=True)
class ListV:
    items: tuple["Value", ...]
    span: Span


Value = Union[Str, Num, Quantity, Word, Call, ListV]


@dataclass(frozen=True)
class Entry:
    """``key = value``"""

    key: str
    value: Value
    span: Span
    key_span: Span


@dataclass(frozen=True)
class Statement:
    """``key value`` with a name or call as value: ``precision bf16``."""

    key: str
    value: Value
    span: Span
    key_span: Span


@dataclass(frozen=True)
class Block:
    """``kind [header] { items }``"""

    kind: str
    header: Value | None
    items: tuple["Item", ...]
    span: Span
    kind_span: Span


Item = Union[Entry, Statement, Block]


@dataclass(frozen=True)
class Workload:
    name: str
    items: tuple[Item, ...]
    span: Span
    name_span: Span


@dataclass(frozen=True)
class File:
    path: str
    text: str
    workloads: tuple[Workload, ...]


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
