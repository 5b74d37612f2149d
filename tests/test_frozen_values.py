"""accelctl's frozen value types (``accelctl.frozen.Value``: the spec types, the plan contract,
the catalogs) are frozen ``msgspec.Struct`` classes: what they must do for the code that holds
them, checked on every spec and every plan of the shipped workloads -- equality and hash by
their fields (the ``uncompared`` ones left out), no change after construction, a default
factory per instance, the plain data of ``to_dict`` as msgspec itself makes it, and a round
trip through the codec, pickle and copies."""

from __future__ import annotations

import copy
import json
import pickle
from pathlib import Path

import msgspec
import pytest

from accelctl.api import load_selected
from accelctl.contract import codec
from accelctl.contract.hostfacts import HostFacts
from accelctl.contract.job import WorkerJob
from accelctl.errors import Diagnostic, PlanError, Span
from accelctl.frozen import Value, replace, to_dict
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
        for name in obj.__struct_fields__:
            yield from _values(getattr(obj, name))
    elif isinstance(obj, (tuple, list)):
        for x in obj:
            yield from _values(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _values(x)


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


def test_every_value_type_is_a_frozen_struct(plans):  # plans: every planning module imported
    classes = list(_all_subclasses(Value))
    assert len(classes) >= 50
    for cls in classes:
        assert issubclass(cls, msgspec.Struct) and cls.__struct_config__.frozen, cls


def test_equal_fields_are_equal_values_with_equal_hashes(specs, plans):
    seen = set()
    for v in {id(v): v for p in (*specs, *plans) for v in _values(p)}.values():
        same = type(v)(**{n: getattr(v, n) for n in v.__struct_fields__})
        assert same == v and same is not v
        try:
            assert hash(same) == hash(v)
        except TypeError:  # a dict or list field: unhashable, as a frozen dataclass holding one is
            pass
        seen.add(type(v))
    spec_types = {c for c in vars(types).values() if isinstance(c, type) and issubclass(c, Value) and c is not Value}
    assert spec_types <= seen  # the shipped workloads hold every spec type
    assert {"Plan", "Launch", "WorkerJob"} <= {c.__name__ for c in seen}


def test_a_field_that_differs_makes_them_differ_but_an_uncompared_one_does_not(specs):
    spec = specs[0]
    target = spec.targets[0]
    assert target != replace(target, nodes=target.nodes + 1)
    assert spec == replace(spec, origins={})
    d = Diagnostic("E1", "m", Span.point(1, 1))
    assert d == replace(d, source_line="x = 1") and d != replace(d, hint="h")
    assert len({d, replace(d, source_line="y")}) == 1
    assert types.TaskSpec("pretrain") != types.ModelSpec(source="arch", family="gpt2")  # another class: never equal


def test_nothing_can_be_set_or_deleted_and_a_default_factory_is_each_instances_own():
    a, b = types.ModelSpec(source="arch", family="gpt2"), types.ModelSpec(source="arch", family="gpt2")
    assert a.stand_in == {} and a.stand_in is not b.stand_in
    for change in (lambda: setattr(a, "family", "bert"), lambda: delattr(a, "family"),
                   lambda: setattr(a, "not_a_field", 1)):
        with pytest.raises(AttributeError):
            change()
    assert a == b and hash(types.TaskSpec("pretrain")) == hash(types.TaskSpec(kind="pretrain"))
    with pytest.raises(TypeError):
        types.TaskSpec("pretrain", kind="generate")  # a field given twice
    with pytest.raises(TypeError):
        types.TaskSpec(nope=1)


def test_to_dict_is_the_plain_data_msgspec_makes_and_the_codec_rebuilds_the_job(plans):
    jobs = [p.job for p in plans]
    assert len(jobs) >= 60
    for job in jobs:
        mine = to_dict(job)
        assert json.dumps(mine, sort_keys=True) == json.dumps(msgspec.to_builtins(job), sort_keys=True)
        assert codec.from_dict(WorkerJob, json.loads(job.to_json())) == job
    odd = {"a": [types.TaskSpec("pretrain")], "c": (1.5, None, True), "s": {1, 2}}
    plain = to_dict(odd)
    assert plain == {"a": [to_dict(types.TaskSpec("pretrain"))], "c": (1.5, None, True), "s": {1, 2}}
    assert plain["s"] is not odd["s"]  # any other leaf is copied, as dataclasses.asdict does


def test_replace_serves_values_and_dataclasses():
    from accelctl.backends.base import Built

    t = types.TaskSpec("pretrain")
    assert replace(t, train_steps=3).train_steps == 3 and t.train_steps != 3
    built = Built([], [], [])
    assert replace(built, notes=["n"]).notes == ["n"]


def test_a_value_survives_pickle_and_copies_equal_and_still_frozen(specs, plans):
    for v in (*specs, *plans):
        for back in (pickle.loads(pickle.dumps(v)), copy.deepcopy(v), copy.copy(v)):
            assert back == v and repr(back) == repr(v) and type(back) is type(v)
            with pytest.raises(AttributeError):
                back.name = "x"


def test_the_codec_checks_every_field_it_rebuilds_and_names_the_one_that_is_wrong(plans):
    """``codec.from_dict`` is msgspec's typed conversion: a job of the wrong shape is refused
    with the field's path, what it must be and what it holds -- never built half-typed."""
    job = json.loads(plans[0].job.to_json())
    cases = {
        "measure.steps must be an integer (got a string)": lambda d: d["measure"].update(steps="12"),
        "measure.steps must be an integer (got a boolean)": lambda d: d["measure"].update(steps=True),
        "measure has an unknown field 'speed'": lambda d: d["measure"].update(speed=1),
        "the file has an unknown field 'from_elsewhere'": lambda d: d.update(from_elsewhere=1),
        "checkpoint must be an object (got 1)": lambda d: d.update(checkpoint=1),
        "task is missing": lambda d: d.pop("task"),
        "optimizer.lr must be a finite number (got a string)": lambda d: d["optimizer"].update(lr="fast"),
    }
    for said, change in cases.items():
        data = copy.deepcopy(job)
        change(data)
        with pytest.raises(ValueError) as refused:
            codec.from_dict(WorkerJob, data)
        assert str(refused.value) == f"WorkerJob: {said}", (said, str(refused.value))
    assert codec.from_dict(WorkerJob, job) == plans[0].job
