"""Value types (``accelctl.frozen``) to and from JSON-ready dicts, by msgspec's typed conversion.

One function each way serves every contract type (the job and the spec types it embeds), so a
new field is a new field: no per-class ``from_dict`` to keep in step.  ``problem`` words
msgspec's refusal as the store's readers word every other shape error: the field's path, what it
must be and what it holds.
"""

from __future__ import annotations

import math
import re
from typing import Any, TypeVar

import msgspec

from accelctl import frozen

T = TypeVar("T")

#: the largest integer a stored field may hold (a pid, a byte count, a step)
MAX_INT = 2**63 - 1
#: msgspec's names of JSON types, as the store's messages say them
_WHAT = {"array": "a list", "object": "an object", "str": "a string", "int": "an integer", "float": "a finite number",
         "bool": "true or false", "null": "null"}
_EXPECTED = re.compile(r"Expected `(?P<what>[^`]+)`, got `[^`]+`(?: - at `\$(?P<at>[^`]*)`)?$")
_FIELD = re.compile(r"Object (?P<how>contains unknown|missing required) field `(?P<name>[^`]*)`(?: - at `\$(?P<at>[^`]*)`)?$")
_AT = re.compile(r"(?P<text>.*?) - at `\$(?P<at>[^`]*)`$")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def from_dict(cls: type[T], data: dict[str, Any]) -> T:
    """``cls`` built from ``data``, every nested value type, optional, tuple and literal checked.

    Unknown keys are an error (a job written by another accelctl version is refused, not
    half-read); missing keys take the field's default.  A refusal is a ``ValueError`` naming the
    field (``problem``).
    """
    try:
        return msgspec.convert(data, cls)
    except msgspec.ValidationError as exc:
        raise ValueError(f"{cls.__name__}: {problem(exc, data)}") from None


def to_dict(obj: Any) -> dict[str, Any]:
    """``obj`` as nested dicts, lists and tuples (``frozen.to_dict``)."""
    return frozen.to_dict(obj)


def described(value: Any) -> str:
    """What ``value`` is, for a message: its JSON kind, or itself when short."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) and abs(value) > MAX_INT:
        return f"an integer of {len(str(abs(value)))} digits"
    return repr(value)[:40]


def problem(exc: msgspec.ValidationError, data: Any, where: str = "") -> str:
    """msgspec's refusal of ``data`` in the store's words: ``PATH must be WHAT (got VALUE)``,
    ``PATH is missing``, ``PATH has an unknown field NAME``; ``where`` names the top."""
    said = str(exc)
    if m := _EXPECTED.match(said):
        at = m["at"] or ""
        arms = [_WHAT.get(a.strip(), f"`{a.strip()}`") for a in m["what"].split("|") if a.strip() != "null"]
        return f"{_path(where, at) or 'the file'} must be {' or '.join(arms)} (got {described(_value(data, at))})"
    if m := _FIELD.match(said):
        at = _path(where, m["at"] or "")
        if m["how"] == "missing required":
            return f"{_path(at, '.' + m['name'])} is missing"
        return f"{at or 'the file'} has an unknown field {m['name']!r}"
    if m := _AT.match(said):
        at = m["at"]
        return f"{_path(where, at) or 'the file'}: {m['text'][0].lower()}{m['text'][1:]} (got {described(_value(data, at))})"
    return said


def _path(where: str, at: str) -> str:
    """``where`` followed by msgspec's ``$``-less path ``at`` (``.a[0].b``), without a leading dot."""
    return (where + at).lstrip(".")


def _value(data: Any, at: str) -> Any:
    for name, index in _STEP.findall(at):
        try:
            data = data[int(index)] if index else data[name]
        except (KeyError, IndexError, TypeError):
            return None
    return data
