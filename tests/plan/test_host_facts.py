"""Plans are pure (issue 28 item 2): the machine's facts -- cores, CPU flags, available memory,
stored calibration -- enter the plan compiler only as its ``host`` input
(``accelctl.contract.hostfacts``).  Compiled for one host, every plan and rehearsal of
workloads/ is the same whatever machine compiles it: here, and on this machine made to look
like another (64 cores, AVX-512 with native bf16/fp16, 1 TiB free, a bf16 calibration that
says it is slow).  And the facts given are the ones used: another host, another plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from reference_hosts import AVX512_BF16, REFERENCE

from accelctl import hostinfo
from accelctl.api import load, plan, render_plan_text
from accelctl.contract.hostfacts import HostFacts
from accelctl.errors import AccelctlError
from accelctl.workload.options import TargetOptions
from accelctl.catalog import DEVICES
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
PAIRS = [(spec, t) for wl in sorted((ROOT / "workloads").glob("*.wl")) for spec in load(wl) for t in spec.targets]


def _all_plans(host: HostFacts) -> dict[str, str]:
    out = {}
    for spec, t in PAIRS:
        for rehearse in (False, True) if not DEVICES[t.device].host else (False,):
            try:
                text = render_plan_text(plan(spec, t, rehearse=rehearse, host=host))
            except AccelctlError as exc:
                text = exc.render()
            out[f"{spec.name}:{t.name}:{rehearse}"] = text
    return out


@pytest.fixture
def another_machine(monkeypatch, tmp_path):
    """This machine, looking like another one in every fact a plan could read of it."""
    flags = frozenset(AVX512_BF16.flags)
    monkeypatch.setattr(hostinfo, "cpu_count", lambda: 64)
    monkeypatch.setattr(hostinfo, "_cpuinfo", lambda: ("another CPU", flags))
    monkeypatch.setattr(hostinfo, "memory_available_bytes", lambda: 2**40)
    cal = tmp_path / "calibration.json"
    cal.write_text(json.dumps({"schema": 1, "entries": {"x": {
        "device": "another CPU", "threads": 1, "date": "2026-01-01T00:00:00Z",
        "flops": {"float32": 1e11, "bfloat16": 1e10}}}}))
    monkeypatch.setenv("ACCELCTL_CALIBRATION_FILE", str(cal))
    here = HostFacts.here()
    assert (here.cores, here.cpu_model, here.memory_bytes) == (64, "another CPU", 2**40)  # the disguise holds
    return here


def test_a_plan_for_a_given_host_is_the_same_on_any_machine(monkeypatch, another_machine):
    on_the_other = _all_plans(REFERENCE)
    monkeypatch.undo()
    assert HostFacts.here().cpu_model != "another CPU"
    assert _all_plans(REFERENCE) == on_the_other


def test_the_host_given_is_the_host_used(another_machine):
    """Each fact reaches the plan: cores (threads, a rehearsal's processes), flags (a rehearsal's
    bf16), memory (the fit), calibration (the 16-bit warning) -- from ``host``, not the machine."""
    (spec,) = [s for s in load(ROOT / "workloads" / "ddp_cpu.wl") if s.name == "ddp_cpu"]
    cpu = replace(spec.targets[0], options=TargetOptions())  # threads from the cores
    assert (plan(spec, cpu, host=REFERENCE).job.threads, plan(spec, cpu, host=AVX512_BF16).job.threads) == (1, 4)
    assert "of 17.18 GB: fits" in render_plan_text(plan(spec, cpu, host=REFERENCE))
    big = HostFacts(cores=64, cpu_model="big", flags=REFERENCE.flags, memory_bytes=2**40)
    assert "of 1.10 TB: fits" in render_plan_text(plan(spec, cpu, host=big))
    bf16 = next((s, t) for s, t in PAIRS if not DEVICES[t.device].host and t.precision.dtype == "bf16")
    avx2 = plan(*bf16, rehearse=True, host=REFERENCE)
    native = plan(*bf16, rehearse=True, host=AVX512_BF16)
    assert "bf16 -> fp32" in avx2.notes[0] and "bf16 -> fp32" not in native.notes[0]
    assert avx2.job.precision.dtype == "fp32" and native.job.precision.dtype == "bf16"
    # the 16-bit warning: the flags decide, and a stored calibration beats them
    bf16_cpu = replace(cpu, precision=replace(cpu.precision, dtype="bf16"))
    slow = [w for w in plan(spec, bf16_cpu, host=REFERENCE).warnings if "slower than fp32" in w]
    assert slow and "without native bf16" in slow[0]
    assert not [w for w in plan(spec, bf16_cpu, host=AVX512_BF16).warnings if "slower than fp32" in w]
    measured = replace(AVX512_BF16, calibrations=_calibrations(AVX512_BF16.cpu_model))
    slow = [w for w in plan(spec, bf16_cpu, host=measured).warnings if "slower than fp32" in w]
    assert slow and "measured at 0.1x" in slow[0]


def _calibrations(model: str):
    from accelctl.contract.calibration import Calibration

    return (Calibration(device=model, threads=4, date="2026-01-01T00:00:00Z",
                        flops={"float32": 1e11, "bfloat16": 1e10}),)
