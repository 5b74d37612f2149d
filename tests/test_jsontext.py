"""``accelctl.contract.jsontext.dumps`` writes what ``json.dumps(obj, indent=2)`` writes, byte for
byte, for any value: plain JSON data by its own writer, anything else handed to ``json.dumps``
(the plan goldens check the files of every shipped plan as well)."""

from __future__ import annotations

import json
import math
import re
from collections import OrderedDict
from enum import IntEnum

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelctl.contract import jsontext

SCALARS = (st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
KEYS = st.text(max_size=8) | st.integers(-5, 5) | st.booleans() | st.none() | st.floats(-2, 2)
JSONISH = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner)
                       | st.dictionaries(st.text(max_size=8), inner, max_size=5), max_leaves=40)
MIXED_KEYS = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4)
                          | st.dictionaries(KEYS, inner, max_size=4), max_leaves=20)


JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
LAYOUTS = [{}, {"indent": None}, {"indent": None, "separators": (",", ":")}, {"indent": 4},
           {"indent": 2, "separators": (",", ": ")}]


def _same(obj, **kw):
    """jsontext.dumps against json.dumps (indent=2 unless given), and with braces escaped against
    json.dumps's text with each string token's ``{`` replaced: the text, or the exception."""
    kw = {"indent": 2, **kw}
    try:
        expected = json.dumps(obj, **kw)
    except Exception as exc:  # noqa: BLE001 -- the same exception, then
        with pytest.raises(type(exc)):
            jsontext.dumps(obj, **kw)
        with pytest.raises(type(exc)):
            jsontext.dumps(obj, braces_escaped=True, **kw)
        return
    assert jsontext.dumps(obj, **kw) == expected
    escaped = JSON_STRING.sub(lambda m: m.group(0).replace("{", "\\u007b"), expected)
    assert jsontext.dumps(obj, braces_escaped=True, **kw) == escaped
    assert json.dumps(json.loads(escaped)) == json.dumps(json.loads(expected))  # the same data to a reader


@settings(max_examples=150, deadline=None, database=None)
@given(JSONISH, st.booleans(), st.booleans(), st.sampled_from(LAYOUTS))
def test_any_json_data_is_written_as_json_dumps_writes_it(obj, sort_keys, ensure_ascii, layout):
    _same(obj, sort_keys=sort_keys, ensure_ascii=ensure_ascii, **layout)


@settings(max_examples=100, deadline=None, database=None)
@given(MIXED_KEYS, st.booleans())
def test_keys_that_are_not_str_are_left_to_json_dumps(obj, sort_keys):
    _same(obj, sort_keys=sort_keys)


class Level(IntEnum):
    LOW = 1


class Text(str):
    pass


@pytest.mark.parametrize("obj", [
    {}, [], (), "", {"a": {}}, {"a": []}, [[[]]], {"é": "ü\u2028\x00\"\\"}, 1e300, -0.0, 5e-324, 2**100,
    float("nan"), [float("inf")], {"x": -math.inf}, [Level.LOW], {"k": Text("t")}, OrderedDict(b=1, a=2),
    {1: "int key"}, {"b": 1, "a": {"d": [1, 2.5, None, True, False], "c": "x"}}, {"s": {1, 2}}, [object()],
    {"{run_dir}": "{free_port} and \\{ and \"{\""}, ["{", "}{", {"k{": ["{x}"]}], {1: "{int key}"},
])
@pytest.mark.parametrize("sort_keys", [False, True])
def test_edges_and_other_types(obj, sort_keys):
    for layout in LAYOUTS:
        _same(obj, sort_keys=sort_keys, **layout)
        _same(obj, sort_keys=sort_keys, ensure_ascii=False, **layout)


def test_a_cycle_is_refused_as_json_dumps_refuses_it():
    loop: list = []
    loop.append(loop)
    _same(loop)
    _same({"a": loop})
