"""Workload text never lands in a flag position of any backend's argv (issue 11 #2c).

A prompt of ``--trust_remote_code`` in the Gaudi example plan became
``--prompt --trust_remote_code``: the script read two flags and ran with
``trust_remote_code=True``.  Every backend now passes workload text through
``accelctl.backends.base.option`` (``--flag=value`` when the value starts with '-').
Here every shipped workload's every target is planned with a hostile value in each text
field that reaches a command line (prompt, model id, dataset id, config, column, path),
and no argv word may start with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl.api import load, plan, validate_text
from accelctl.errors import AccelctlError
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "--trust_remote_code"


def _variants(spec):
    """The spec with HOSTILE in each text field that may reach a command line (as if it got
    past the check, which refuses it where it can: Hub ids and paths, E216)."""
    r = replace
    yield "prompt", r(spec, task=r(spec.task, prompt=HOSTILE))
    yield "model.ref", r(spec, model=r(spec.model, ref=HOSTILE))
    d = spec.dataset
    yield "dataset.ref", r(spec, dataset=r(d, ref=HOSTILE))
    yield "dataset.config", r(spec, dataset=r(d, config=HOSTILE))
    yield "dataset.column", r(spec, dataset=r(d, column=HOSTILE))
    yield "dataset.target_column", r(spec, dataset=r(d, target_column=HOSTILE))
    yield "dataset.split", r(spec, dataset=r(d, split=HOSTILE))


def _scan():
    reached, in_flag_position, planned = set(), [], 0
    for wl in sorted((ROOT / "workloads").glob("*.wl")):
        for spec in load(wl):
            for field, variant in _variants(spec):
                for t in variant.targets:
                    try:
                        p = plan(variant, t)
                    except (AccelctlError, KeyError, ValueError):
                        continue  # a field this plan refuses or never reads
                    planned += 1
                    for launch in p.launches:
                        for word in launch.argv:
                            if word.startswith(HOSTILE):
                                in_flag_position.append((spec.name, t.name, field, launch.name, launch.argv))
                            elif HOSTILE in word:
                                reached.add((p.backend, field))
    return planned, reached, in_flag_position


def test_no_backend_puts_workload_text_in_a_flag_position():
    planned, reached, bad = _scan()
    assert planned >= 50
    assert bad == []
    # the scan means something: hostile text did reach argv words, each as --flag=value
    assert {f for _, f in reached} >= {"prompt", "model.ref", "dataset.ref"}


def test_the_gaudi_example_prompt_from_the_issue():
    text = (ROOT / "workloads" / "bloomz.wl").read_text()
    text = text.replace('prompt         = "DeepSpeed is a machine learning framework"', f'prompt = "{HOSTILE}"')
    specs, diags = validate_text(text, ROOT / "workloads" / "bloomz.wl")
    assert not [d for d in diags if d.severity == "error"]
    plans = []
    for spec in specs:
        for t in spec.targets:
            if t.options.script == "example" and spec.task.prompt == HOSTILE:
                plans.append(plan(spec, t))
    assert plans, "no Gaudi example plan with the prompt"
    for p in plans:
        argv = [w for launch in p.launches for w in launch.argv]
        assert f"--prompt={HOSTILE}" in argv and HOSTILE not in argv


@pytest.mark.parametrize("value,words", [("x", ["--f", "x"]), ("-x", ["--f=-x"]), ("--a b", ["--f=--a b"]),
                                         ("", ["--f", ""]), ("a=-b", ["--f", "a=-b"])])
def test_option(value, words):
    from accelctl.backends.base import option

    assert option("--f", value) == words
