"""``Value``: the base of accelctl's frozen value types (the spec types, the plan contract, the
catalogs): a frozen dataclass whose ``==``, hash and repr are written once here rather than
generated for each class.  Imports nothing of accelctl: any layer may use it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


class Value:
    """The base of the value types: the ``==``, ``hash`` and ``repr`` a frozen dataclass would
    generate, written once.  Python 3.11's dataclasses compile each generated method with its
    own ``exec`` (~1 M instructions a class for these three; issue 28: cold ``validate``), so the
    value types (``@value``) generate only ``__init__`` and the frozen ``__setattr__``/``__delattr__``.
    Same semantics as the generated ones: equal when of the same class with equal fields
    (``compare=False`` fields left out), compared and hashed as the tuple of those fields."""

    __slots__ = ()

    def _compared(self) -> tuple:
        return tuple([getattr(self, f.name) for f in dataclasses.fields(self) if f.compare])

    def __eq__(self, other):
        if other.__class__ is self.__class__:
            return self._compared() == other._compared()
        return NotImplemented

    def __hash__(self):
        return hash(self._compared())

    def __repr__(self) -> str:
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self) if f.repr)
        return f"{self.__class__.__qualname__}({shown})"


def value(cls):
    """``@dataclass(frozen=True)`` of a ``Value`` subclass, with ``Value``'s ``==``, hash and repr."""
    return dataclass(frozen=True, eq=False, repr=False)(cls)
