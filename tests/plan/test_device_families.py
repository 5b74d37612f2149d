"""Each device family owns its slice: detection, doctor probes, comm backend, host-ness,
OpenMP's idle policy and its worker adapter -- one row of ``accelctl.families``."""

from __future__ import annotations

import os
import stat

import pytest

from accelctl.api import check, check_all, parse, plan
from accelctl.backends.base import process_env
from accelctl.families import FAMILIES, PROBES, Detection, present_adapters
from accelctl.contract.job import DeviceJob
from accelctl.catalog import DEVICES
from accelctl.frozen import replace


def test_every_catalogued_device_has_a_family_and_agrees_on_host_ness():
    for d in DEVICES.values():
        assert d.adapter in FAMILIES, d.name
        assert d.host == FAMILIES[d.adapter].host, d.name
    assert [f.name for f in FAMILIES.values() if f.host] == ["cpu"]


def test_the_worker_builds_the_adapter_the_host_family_names():
    from accelctl.worker.devices import adapter_for

    adapter = adapter_for(DeviceJob(kind="cpu", adapter="cpu", comm="gloo"), 0)
    assert adapter.name == "cpu" and adapter.dist_backend == "gloo" and adapter.device.type == "cpu"


def test_every_family_names_an_importable_adapter_class():
    import importlib

    for fam in FAMILIES.values():
        module, cls = fam.worker_adapter.split(":")
        assert getattr(importlib.import_module(module), cls).name == fam.name


def test_an_unknown_family_has_no_adapter():
    from accelctl.worker.devices import adapter_for

    with pytest.raises(ValueError, match="'tpu' has no worker adapter; known: cpu, cuda, rocm, hpu, xla"):
        adapter_for(DeviceJob(adapter="tpu"), 0)


def test_detection_reports_the_first_device_file_then_a_tool_on_path(tmp_path, monkeypatch):
    (tmp_path / "accel1").touch()
    (tmp_path / "accel0").touch()
    assert Detection(device_files=(str(tmp_path / "accel*"),)).found() == str(tmp_path / "accel0")
    assert Detection(device_files=(str(tmp_path / "none*"),)).found() is None
    tool = tmp_path / "bin" / "vendor-smi"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(tool.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", str(tool.parent) + os.pathsep + os.environ.get("PATH", ""))
    assert Detection(device_files=(str(tmp_path / "none*"),), tools=("vendor-smi",)).found() == "vendor-smi on PATH"


def test_the_host_is_always_present():
    assert present_adapters()["cpu"] == "always"


def test_doctor_runs_the_probes_the_plug_ins_name_once_each():
    from accelctl.doctor import all_probes

    table = all_probes()
    for fam in FAMILIES.values():
        for name in fam.probes:
            assert table[name] == PROBES[name]
    assert {"deepspeed", "transformer_engine"} <= set(table)
    assert list(table)[:5] == ["torch", "torch_rocm", "habana", "torch_xla", "neuron"]


@pytest.mark.parametrize("family", list(FAMILIES))
def test_openmp_idle_threads_sleep_where_the_family_says(family):
    (spec,) = check(parse("workload w { task pretrain  model bert(layers = 1, hidden = 32, heads = 2) }", "w.wl"))
    job = replace(plan(spec, "cpu").job, device=DeviceJob(adapter=family, comm=FAMILIES[family].comm), threads=2)
    env = process_env(job)
    assert env["OMP_NUM_THREADS"] == "2"
    assert ("OMP_WAIT_POLICY" in env) == FAMILIES[family].idle_threads_sleep
    assert env.get("OMP_WAIT_POLICY", "PASSIVE") == "PASSIVE"


#: a value each family-only target option accepts (a new option in a row must be added here)
OPTION_VALUES = {"hpu_graphs": "on", "lazy_mode": "on", "te_layers": "on", "pin_memory": "on",
                 "neuron_parallel_compile": "on", "xla_use_bf16": "on", "te_version": '"2.20"'}


@pytest.mark.parametrize("family", [f for f in FAMILIES.values() if f.options], ids=lambda f: f.name)
def test_a_familys_options_are_refused_on_any_other_familys_device_from_its_row(family):
    """The check reads each family's options from its row: on the device of a family whose row
    lacks it each is E505 naming the families that take it; on its own, not."""
    assert set(family.options) <= set(OPTION_VALUES), "give the new option a value in OPTION_VALUES"
    own = next(d.name for d in DEVICES.values() if d.adapter == family.name)
    for opt in family.options:
        takers = [f.name for f in FAMILIES.values() if opt in f.options]
        other = next(d.name for d in DEVICES.values() if d.adapter not in takers and not d.host)
        extra = "  precision = bf16" if opt == "xla_use_bf16" else ""
        for device, refused in ((own, False), (other, True)):
            text = (f"workload w {{ task pretrain  model gpt2(layers = 2, hidden = 64, heads = 2)\n"
                    f"  target t {{ device = {device}  {opt} = {OPTION_VALUES[opt]}{extra} }} }}")
            found = [d for d in check_all(parse(text, "<f>"))[1] if d.code == "E505"]
            assert bool(found) == refused, (opt, device, found)
            if refused:
                assert found[0].message == f"{opt} is for {' and '.join(takers)} devices, not {device}"


def test_the_sdks_a_stack_may_pin_are_the_families():
    from accelctl.language.stack import SDKS

    assert SDKS == {f.sdk: (f.sdk_title, f.name) for f in FAMILIES.values() if f.sdk}
    assert set(SDKS) == {"cuda", "rocm", "synapseai", "neuron"}
