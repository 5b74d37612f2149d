"""Value types (``accelctl.frozen``) to and from JSON-ready dicts, driven by their type hints.

One function each way serves every contract type (the job and the spec types it embeds),
so a new field is a new field: no per-class ``from_dict`` to keep in step.
"""

from __future__ import annotations

import types
import typing
from functools import lru_cache
from typing import Any, TypeVar

from accelctl import frozen
from accelctl.frozen import Value

T = TypeVar("T")


@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _build(tp: Any, value: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        for arm in typing.get_args(tp):
            if arm is type(None):
                continue
            return _build(arm, value)
    if isinstance(tp, type) and issubclass(tp, Value) and isinstance(value, dict):
        return from_dict(tp, value)
    if origin is tuple and isinstance(value, list):
        args = typing.get_args(tp)
        inner = args[0] if args else Any
        return tuple(_build(inner, v) for v in value)
    return value


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """``cls`` built from ``data`` (nested value types, optionals and tuples rebuilt).

    Unknown keys are an error (a job written by another accelctl version is refused, not
    half-read); missing keys take the field's default.
    """
    hints = _hints(cls)
    names = set(cls.__struct_fields__)
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}")
    return cls(**{k: _build(hints[k], v) for k, v in data.items()})


def to_dict(obj: Any) -> dict[str, Any]:
    """``obj`` as nested dicts, lists and tuples (``frozen.to_dict``)."""
    return frozen.to_dict(obj)
