"""``Value``: the base of accelctl's frozen value types (the spec types, the plan contract, the
catalogs): a frozen dataclass whose ``__init__``, frozen ``__setattr__``/``__delattr__``, ``==``,
hash and repr are written once here rather than generated for each class.  Imports nothing of
accelctl: any layer may use it.

Why: Python 3.11's ``dataclass`` compiles each method it generates with its own ``exec``
(cold ``validate`` loads ~50 of these classes).  ``@value`` keeps the dataclass
machinery (``dataclasses.fields``, ``replace``, ``asdict``, defaults and ``default_factory``)
and asks it to generate nothing; the methods below do what the generated ones do.
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, FrozenInstanceError, dataclass


#: a field's default that its ``default_factory`` makes for each instance
_MAKE = object()


class Value:
    """The base of the value types: the methods a frozen dataclass would generate, written once.

    Same semantics as the generated ones:

    - ``__init__``: the fields in order, positionally or by name; a field without a default is
      required; a ``default_factory`` is called for each instance; too many, unknown, repeated
      or missing arguments are a ``TypeError``;
    - assigning or deleting an attribute raises ``dataclasses.FrozenInstanceError``;
    - equal when of the same class with equal fields (``compare=False`` fields left out),
      compared and hashed as the tuple of those fields; the repr shows the ``repr=True`` fields.
    """

    __slots__ = ()
    #: set by ``@value``: the fields' names in order; each field's default in that order (``MISSING``
    #: when required, ``_MAKE`` when a factory makes it); the required names; (name, factory) pairs
    _value_names: tuple[str, ...] = ()
    _value_template: dict = {}
    _value_required: tuple[str, ...] = ()
    _value_factories: tuple = ()

    def __init__(self, *args, **kwargs):
        cls = self.__class__
        given = cls._value_template.copy()  # every field, in order: the dict is the instance's own
        if args:
            if len(args) > len(given):
                raise TypeError(f"{cls.__qualname__}.__init__() takes {len(given) + 1} positional arguments "
                                f"but {len(args) + 1} were given")
            named = cls._value_names[:len(args)]
            if kwargs and not kwargs.keys().isdisjoint(named):
                twice = next(n for n in named if n in kwargs)
                raise TypeError(f"{cls.__qualname__}.__init__() got multiple values for argument {twice!r}")
            given.update(zip(named, args))
        if kwargs:
            given.update(kwargs)
            if len(given) != len(cls._value_names):
                unknown = next(n for n in kwargs if n not in cls._value_template)
                raise TypeError(f"{cls.__qualname__}.__init__() got an unexpected keyword argument {unknown!r}")
        for name in cls._value_required:
            if given[name] is MISSING:
                missing = [n for n in cls._value_required if given[n] is MISSING]
                raise TypeError(f"{cls.__qualname__}.__init__() missing {len(missing)} required argument(s): "
                                + ", ".join(repr(n) for n in missing))
        for name, factory in cls._value_factories:
            if given[name] is _MAKE:
                given[name] = factory()
        object.__setattr__(self, "__dict__", given)

    def __setattr__(self, name, _value):
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name):
        raise FrozenInstanceError(f"cannot delete field {name!r}")

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
    """A frozen dataclass of a ``Value`` subclass whose methods are ``Value``'s: the dataclass
    machinery reads the fields and generates nothing."""
    documented = bool(cls.__dict__.get("__doc__"))
    if not documented:  # what dataclass would write (the name and fields), without its inspect.signature
        cls.__doc__ = cls.__name__
    cls = dataclass(init=False, eq=False, repr=False)(cls)
    fields = dataclasses.fields(cls)
    if not documented:
        cls.__doc__ = f"{cls.__name__}({', '.join(f.name for f in fields)})"
    cls._value_names = tuple(f.name for f in fields)
    cls._value_template = {f.name: f.default if f.default_factory is MISSING else _MAKE for f in fields}
    cls._value_required = tuple(f.name for f in fields if f.default is MISSING and f.default_factory is MISSING)
    cls._value_factories = tuple((f.name, f.default_factory) for f in fields if f.default_factory is not MISSING)
    return cls
