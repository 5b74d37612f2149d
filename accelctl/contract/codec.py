"""Frozen dataclasses to and from JSON-ready dicts, driven by their type hints.

One function each way serves every contract type (the job and the spec types it embeds),
so a new field is a new field: no per-class ``from_dict`` to keep in step.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from functools import lru_cache
from typing import Any, TypeVar

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
    if dataclasses.is_dataclass(tp) and isinstance(value, dict):
        return from_dict(tp, value)
    if origin is tuple and isinstance(value, list):
        args = typing.get_args(tp)
        inner = args[0] if args else Any
        return tuple(_build(inner, v) for v in value)
    return value


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """``cls`` built from ``data`` (nested dataclasses, optionals and tuples rebuilt).

    Unknown keys are an error (a job written by another accelctl version is refused, not
    half-read); missing keys take the field's default.
    """
    hints = _hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}")
    return cls(**{k: _build(hints[k], v) for k, v in data.items()})


def to_dict(obj: Any) -> dict[str, Any]:
    """``dataclasses.asdict(obj)``: the same dict, built without its deep copies of the
    leaves (a job's are str, int, float, bool and None, which a copy returns as they are;
    any other leaf is still copied)."""
    return _plain(obj)


_IMMUTABLE = (str, int, float, bool, type(None))


def _plain(x: Any) -> Any:
    kind = type(x)
    if kind in _IMMUTABLE:
        return x
    if hasattr(kind, "__dataclass_fields__"):  # as asdict: a dataclass instance becomes a dict
        return {f.name: _plain(getattr(x, f.name)) for f in dataclasses.fields(x)}
    if kind is list or kind is tuple:
        return kind([_plain(v) for v in x])
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in x.items()}
    return copy.deepcopy(x)  # as asdict does with a leaf (a dataclass class included: it is no instance)
