"""accelctl's frozen value types (``accelctl.frozen.Value``: the spec types, the plan contract,
the catalogs) take ``__init__``, the frozen ``__setattr__``/``__delattr__``, ``==``, ``hash`` and
``repr`` from ``Value``, written once, rather than from a frozen dataclass's generated methods
(issue 28: Python 3.11 ``exec``s each generated method, on every cold command) -- and behave
exactly as the generated ones would: checked against ``dataclasses.make_dataclass`` twins
holding the same field values, on every spec and every plan of the shipped workloads."""

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
from accelctl.workload import types

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
        default=f.default, default_factory=f.default_factory, compare=f.compare, repr=f.repr))
        for f in dataclasses.fields(cls)], frozen=True)


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


GENERATED = {"__init__", "__setattr__", "__delattr__", "__eq__", "__hash__", "__repr__"}


def test_no_value_type_generates_a_method(plans):  # plans: every planning module imported
    loaded = list(_all_subclasses(Value))
    assert set(loaded) >= {types.WorkloadSpec, types.TargetSpec} and len(loaded) >= 40
    for cls in loaded:
        assert GENERATED.isdisjoint(vars(cls)), cls
        assert dataclasses.is_dataclass(cls) and tuple(cls._value_template) == tuple(f.name for f in dataclasses.fields(cls))


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


def _both(cls, *args, **kwargs):
    """``cls(*args, **kwargs)`` and the same call of its generated twin: both made, or both a TypeError."""
    twin_cls = _twin_class(cls)
    try:
        expected = twin_cls(*args, **kwargs)
    except TypeError:
        with pytest.raises(TypeError):
            cls(*args, **kwargs)
        return None, None
    return cls(*args, **kwargs), expected


def test_init_binds_as_the_generated_init_does_on_every_value_of_the_shipped_workloads(specs, plans):
    seen = set()
    for v in (v for root in (*specs, *plans) for v in _values(root)):
        cls, fields = type(v), dataclasses.fields(v)
        values = [getattr(v, f.name) for f in fields]
        by_name = {f.name: getattr(v, f.name) for f in fields}
        for made in (cls(*values), cls(**by_name), cls(*values[:1], **dict(list(by_name.items())[1:]))):
            assert made == v and repr(made) == repr(v) and list(vars(made)) == [f.name for f in fields]
        if type(v) in seen:
            continue
        seen.add(type(v))
        required = [f.name for f in fields if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING]
        # only the required fields: the others take their defaults, as in the twin
        made, twin = _both(cls, **{n: by_name[n] for n in required})
        assert repr(made) == repr(twin).replace(_twin_class(cls).__qualname__, cls.__qualname__)
        # a missing, an unknown, a repeated and one positional argument too many: TypeError, as in the twin
        if required:
            assert _both(cls, **{n: by_name[n] for n in required[1:]}) == (None, None)
        assert _both(cls, *values, no_such_field=1) == (None, None)
        assert _both(cls, *values[:1], **{fields[0].name: values[0]}) == (None, None)
        assert _both(cls, *values, 0) == (None, None)
    assert len(seen) >= 20


def test_init_of_every_value_type_binds_as_the_generated_init_does(plans):  # plans: all imported
    for cls in _all_subclasses(Value):
        fields = dataclasses.fields(cls)
        required = [f.name for f in fields if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING]
        made, twin = _both(cls, **{n: None for n in required})
        assert [getattr(made, f.name) for f in fields] == [getattr(twin, f.name) for f in fields], cls
        everything = [None] * len(fields)
        assert _both(cls, *everything) != (None, None)
        assert _both(cls, *everything, None) == (None, None)
        assert _both(cls, *everything, unknown=None) == (None, None)
        if required:
            assert _both(cls, **{n: None for n in required[1:]}) == (None, None)


def test_a_default_factory_gives_each_instance_its_own_and_nothing_can_be_set_or_deleted(specs):
    a, b = types.ModelSpec(source="arch", family="gpt2"), types.ModelSpec(source="arch", family="gpt2")
    assert a.stand_in == {} and a.stand_in is not b.stand_in
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.family = "bert"
    with pytest.raises(dataclasses.FrozenInstanceError):
        del a.family
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.not_a_field = 1
    assert a == b and hash(types.TaskSpec("pretrain")) == hash(types.TaskSpec(kind="pretrain"))


def test_a_jobs_dict_is_what_asdict_makes_of_it(plans):
    """``codec.to_dict`` (the job's dict, in ``job.json`` and AWS Batch's node) walks the
    fields without ``asdict``'s deep copies: the same dict, key order included."""
    from accelctl.contract import codec

    jobs = [p.job for p in plans]
    assert len(jobs) >= 60
    for job in jobs:
        mine, theirs = codec.to_dict(job), dataclasses.asdict(job)
        assert mine == theirs and repr(mine) == repr(theirs)
        assert job.to_json() == job.to_json()  # and from the same dict, the same text
    odd = {"a": [types.TaskSpec("pretrain")], "b": {1, 2}, "c": (1.5, None, True)}
    assert codec._plain(odd) == dataclasses.asdict(types.BatchSpec(odd, 1, 1))["micro"]
    assert codec._plain(odd)["b"] is not odd["b"]  # any other leaf is still copied
    assert codec._plain({"cls": types.TaskSpec}) == dataclasses.asdict(types.BatchSpec({"cls": types.TaskSpec}, 1, 1))["micro"]


def test_every_value_type_has_a_docstring_its_own_or_its_fields(plans):
    """As dataclass writes one for an undocumented class: its name and fields."""
    for cls in _all_subclasses(Value):
        assert cls.__doc__ or "__dataclass_params__" not in vars(cls), cls  # a subclass adding only methods
    assert types.TaskSpec.__doc__ == "TaskSpec(" + ", ".join(f.name for f in dataclasses.fields(types.TaskSpec)) + ")"
    assert types.OptimizeSpec.__doc__.startswith("``optimize {")


def test_a_value_survives_pickle_and_deepcopy_equal_and_still_frozen(specs, plans):
    import copy
    import pickle

    for v in (*specs, *plans):
        for back in (pickle.loads(pickle.dumps(v)), copy.deepcopy(v), copy.copy(v)):
            assert back == v and hash(repr(back)) == hash(repr(v)) and type(back) is type(v)
            with pytest.raises(dataclasses.FrozenInstanceError):
                back.name = "x"
