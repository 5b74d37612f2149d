"""``Value``: the base of accelctl's frozen value types (the spec types, the plan contract, the
catalogs), a frozen ``msgspec.Struct``.  Imports nothing of accelctl: any layer may use it.

Why msgspec rather than ``dataclasses``: a Struct class is made in C, its ``__init__``
(positional or by name), ``==``, hash, repr and frozen attributes included, where Python 3.11's
``dataclass`` compiles each generated method with its own ``exec`` (~1 ms a class; cold
``validate`` loads ~60 of them).  A value type is ``class Name(Value):`` with annotated fields;
``field`` and ``fields`` are msgspec's, given here so value code has one import; ``replace``
and ``to_dict`` are ``dataclasses``' for values and dataclasses alike.
"""

from __future__ import annotations

import copy
from typing import Any

import msgspec
from msgspec import field
from msgspec.structs import fields

__all__ = ["Value", "field", "fields", "replace", "to_dict", "uncompared"]


class Value(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A frozen value: built by position or by name, equal when of the same class with equal
    fields, hashed as them, and never changed (``replace`` makes a changed copy); converted
    from data (``msgspec.convert``), a key it has no field for is refused."""


def uncompared(*names: str):
    """A class decorator: the value type's ``==`` and hash leave its fields ``names`` out (where
    a value was written, the source line of a message: not what the value is)."""
    def make(cls):
        kept = tuple(n for n in cls.__struct_fields__ if n not in names)
        if len(kept) + len(names) != len(cls.__struct_fields__):
            raise TypeError(f"{cls.__name__} has no field {set(names) - set(cls.__struct_fields__)}")

        def compared(self) -> tuple:
            return tuple([getattr(self, n) for n in kept])

        def __eq__(self, other):
            return compared(self) == compared(other) if other.__class__ is self.__class__ else NotImplemented

        def __hash__(self):
            return hash(compared(self))

        cls.__eq__, cls.__hash__ = __eq__, __hash__
        return cls
    return make


_IMMUTABLE = (str, int, float, bool, type(None))


def to_dict(obj: Any) -> Any:
    """``obj`` as plain data, as ``dataclasses.asdict`` makes of a dataclass: a value (and a
    dataclass instance) becomes a dict of its fields, lists, tuples and dicts are rebuilt, str,
    int, float, bool and None stay, and any other leaf is copied."""
    kind = type(obj)
    if kind in _IMMUTABLE:
        return obj
    if isinstance(obj, Value):
        return {name: to_dict(getattr(obj, name)) for name in kind.__struct_fields__}
    if hasattr(kind, "__dataclass_fields__"):
        import dataclasses

        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if kind is list or kind is tuple:
        return kind([to_dict(v) for v in obj])
    if kind is dict:
        return {to_dict(k): to_dict(v) for k, v in obj.items()}
    return copy.deepcopy(obj)


def replace(obj: Any, **changes: Any) -> Any:
    """A copy of the value (or dataclass instance) ``obj`` with ``changes``."""
    if isinstance(obj, Value):
        return msgspec.structs.replace(obj, **changes)
    import dataclasses

    return dataclasses.replace(obj, **changes)
