"""The one selection rule: the named workload/target, else the first target whose device
is present here, else cpu — and the sentence that says why."""

from __future__ import annotations

import pytest

from accelctl.api import (
    AccelctlError,
    PlanError,
    check,
    parse,
    pick_target,
    plan,
    select_workloads,
)
from accelctl.families import present_adapters

WL = """
workload tiny {
  task pretrain
  model bert(layers = 2, hidden = 32, heads = 2)
  target a100 { devices = 1 }
  target g2   { device = gaudi2  devices = 1 }
  target trn  { device = trn1  devices = 2 }
  target cpu  { devices = 1 }
}
workload accel_only {
  task pretrain
  model bert(layers = 2, hidden = 32, heads = 2)
  target g2 { device = gaudi2  devices = 1 }
}
workload cpu_only {
  task pretrain
  model bert(layers = 2, hidden = 32, heads = 2)
  target here { device = cpu  devices = 1 }
}
"""

CPU_ONLY = {"cpu": "always"}


@pytest.fixture(scope="module")
def specs():
    return {s.name: s for s in check(parse(WL, "tiny.wl"))}


def test_a_named_target_is_taken_whatever_the_machine(specs):
    t, why = pick_target(specs["tiny"], "trn", present=CPU_ONLY)
    assert t.name == "trn" and why == "--target trn"


def test_an_unknown_named_target_lists_the_targets(specs):
    with pytest.raises(PlanError, match=r"^workload tiny has no target 'nope' \(targets: a100, g2, trn, cpu\)$"):
        pick_target(specs["tiny"], "nope")


def test_the_first_target_whose_device_is_present_wins(specs):
    present = {"cpu": "always", "xla": "/dev/neuron0", "hpu": "/dev/accel/accel0"}
    t, why = pick_target(specs["tiny"], present=present)
    assert t.name == "g2"  # listed before trn: the workload's order, not the machine's
    assert why == "first target whose device is present here (hpu: /dev/accel/accel0)"
    t, why = pick_target(specs["tiny"], present={"cpu": "always", "cuda": "nvidia-smi on PATH"})
    assert t.name == "a100" and why == "first target whose device is present here (cuda: nvidia-smi on PATH)"


def test_no_accelerator_here_falls_back_to_the_cpu_target_and_says_so(specs):
    t, why = pick_target(specs["tiny"], present=CPU_ONLY)
    assert t.name == "cpu"
    assert why == "no accelerator found on this machine for targets a100, g2, trn; using the cpu target"
    t, why = pick_target(specs["cpu_only"], present=CPU_ONLY)
    assert t.name == "here" and why == "no accelerator found on this machine; using the cpu target"


def test_no_present_device_and_no_cpu_target_is_an_error(specs):
    with pytest.raises(PlanError, match="no target of workload accel_only can run on this machine"):
        pick_target(specs["accel_only"], present={"cpu": "always", "cuda": "/dev/nvidia0"})


def test_by_default_the_rule_asks_this_machine(specs):
    assert pick_target(specs["tiny"]) == pick_target(specs["tiny"], present=present_adapters())


def test_the_planner_names_an_unknown_target_the_same_way(specs):
    with pytest.raises(PlanError) as planned:
        plan(specs["tiny"], "nope")
    with pytest.raises(PlanError) as picked:
        pick_target(specs["tiny"], "nope")
    assert str(planned.value) == str(picked.value)


def test_select_workloads(specs):
    every = list(specs.values())
    assert select_workloads(every, "tiny.wl") == every
    assert [s.name for s in select_workloads(every, "tiny.wl", "cpu_only")] == ["cpu_only"]
    with pytest.raises(AccelctlError, match=r"^tiny.wl has no workload 'x' \(workloads: tiny, accel_only, cpu_only\)$"):
        select_workloads(every, "tiny.wl", "x")
