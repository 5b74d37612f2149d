"""accelctl's frozen value types (``accelctl.frozen.Value``: the spec types, the plan contract,
the catalogs) take ``==``, ``hash`` and ``repr`` from ``Value``, written once, rather than from a
frozen dataclass's generated methods (issue 28: Python 3.11 ``exec``s each generated method, ~1 M
instructions a class, on every cold command) -- and behave exactly as the generated ones would:
checked against ``dataclasses.make_dataclass`` twins holding the same field values, on every
spec and every plan of the shipped workloads."""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

from accelctl.api import load_selected
from accelctl.contract.hostfacts import HostFacts
from accelctl.errors import PlanError
from accelctl.frozen import Value
from accelctl.plan.compile import compile_plan
from accelctl.spec import types

ROOT = Path(__file__).resolve().parents[1]
HOST = HostFacts(cores=4, cpu_model="test cpu", flags=frozenset({"avx2"}), memory_bytes=64 * 2**30)


def _all_subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _all_subclasses(sub)


def _values(obj):
    """``obj`` and every value inside it (fields, tuples, lists, dicts)."""
    if isinstance(obj, Value):
        yield obj
        for f in dataclasses.fields(obj):
            yield from _values(getattr(obj, f.name))
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            yield from _values(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _values(x)


@functools.lru_cache(maxsize=None)
def _twin_class(cls):
    """A frozen dataclass as ``dataclass`` generates it: the same name and fields as ``cls``."""
    return dataclasses.make_dataclass(cls.__qualname__, [(f.name, f.type, dataclasses.field(
        compare=f.compare, repr=f.repr)) for f in dataclasses.fields(cls)], frozen=True)


def _twin(obj):
    """``obj``'s twin of ``_twin_class``, holding the same field values."""
    return _twin_class(type(obj))(**{f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})


@pytest.fixture(scope="module")
def specs():
    return [s for f in sorted((ROOT / "workloads").glob("*.wl")) for s in load_selected(f)]


@pytest.fixture(scope="module")
def plans(specs):
    planned = []
    for spec in specs:
        for target in spec.targets:
            try:
                planned.append(compile_plan(spec, target, host=HOST))
            except PlanError:
                pass
    return planned


def test_no_value_type_generates_eq_hash_or_repr(plans):  # plans: every planning module imported
    loaded = list(_all_subclasses(Value))
    assert set(loaded) >= {types.WorkloadSpec, types.TargetSpec} and len(loaded) >= 40
    for cls in loaded:
        assert {"__eq__", "__hash__", "__repr__"}.isdisjoint(vars(cls)), cls
        assert cls.__dataclass_params__.frozen, cls


def test_eq_hash_and_repr_are_what_a_frozen_dataclass_generates(specs, plans):
    seen = set()
    for v in (v for root in (*specs, *plans) for v in _values(root)):
        twin = _twin(v)
        assert repr(v) == repr(twin)
        same = dataclasses.replace(v)
        assert v == same and not (v != same) and v is not same
        try:
            expected = hash(twin)
        except TypeError:  # a dict or list field: unhashable, as with the generated __hash__
            with pytest.raises(TypeError):
                hash(v)
        else:
            assert hash(v) == expected == hash(same)
        seen.add(type(v))
    spec_types = {c for c in vars(types).values() if isinstance(c, type) and issubclass(c, Value) and c is not Value}
    assert spec_types <= seen  # the shipped workloads hold every spec type
    assert {"Plan", "Launch", "WorkerJob"} <= {c.__name__ for c in seen}


def test_a_field_that_differs_makes_them_differ_but_a_compare_false_field_does_not(specs):
    spec = specs[0]
    target = spec.targets[0]
    assert target != dataclasses.replace(target, nodes=target.nodes + 1)
    assert target != _twin(target)  # another class is never equal, as with the generated __eq__
    assert spec == dataclasses.replace(spec, origins={})  # origins: compare=False
    assert "origins" not in repr(spec)  # repr=False
    with pytest.raises(dataclasses.FrozenInstanceError):
        target.nodes = 2
