"""Precision advice follows detection and measurement (issue 12): the CPU's flags decide
whether bf16/fp16 is emulated, and a stored calibration's bf16/fp32 ratio overrides them.

The detection inputs are injected (a /proc/cpuinfo ``flags`` value, a calibration file), so
both branches are tested on any machine; the plan test at the end goes through the real
planner with a calibration file naming this CPU."""

from __future__ import annotations

import pytest

from accelctl.contract import calibration
from accelctl.contract.envnames import CALIBRATION_FILE
from accelctl.hostinfo import cpu_has_native, cpu_model, cpu_precision_advice, cpu_precision_warning

AVX2_EPYC = "fpu vme de pse tsc msr sse sse2 ssse3 sse4_1 sse4_2 avx avx2 fma bmi2"
SAPPHIRE_RAPIDS = AVX2_EPYC + " avx512f avx512bw avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8"
COOPER_LAKE = AVX2_EPYC + " avx512f avx512bw avx512_bf16"  # bf16 without fp16


@pytest.mark.parametrize("flags, bf16, fp16", [(AVX2_EPYC, False, False), (SAPPHIRE_RAPIDS, True, True),
                                               (COOPER_LAKE, True, False)])
def test_the_flags_say_what_is_native(flags, bf16, fp16):
    assert cpu_has_native("bf16", flags) is bf16 and cpu_has_native("fp16", flags) is fp16
    assert cpu_has_native("fp32", flags)
    assert (cpu_precision_warning("bf16", flags=flags) is None) is bf16
    assert (cpu_precision_warning("fp16", flags=flags) is None) is fp16


def test_an_emulating_cpu_is_warned_by_its_flags_not_by_a_figure():
    slow = cpu_precision_warning("bf16", flags=AVX2_EPYC)
    assert "avx512_bf16 or amx_bf16 not in its flags" in slow and "slower than fp32" in slow
    assert "180" not in slow and "doctor --calibrate" in slow
    assert "avx512_fp16 or amx_fp16" in cpu_precision_warning("fp16", flags=COOPER_LAKE)


def test_a_measurement_overrides_the_flags_both_ways():
    fast = (6.4, "accelctl doctor --calibrate, 2026-11-20, threads=1")
    slow = (0.0055, "accelctl doctor --calibrate, 2026-11-20, threads=1")
    assert cpu_precision_warning("bf16", flags=AVX2_EPYC, measured=fast) is None
    warning = cpu_precision_warning("bf16", flags=SAPPHIRE_RAPIDS, measured=slow)
    assert "0.0055x fp32's FLOP/s" in warning and "2026-11-20" in warning and "slower than fp32" in warning
    assert cpu_precision_warning("fp32", flags=AVX2_EPYC, measured=slow) is None


def test_doctor_advice_says_why_in_each_branch():
    assert "6.4x fp32" in cpu_precision_advice("bf16", flags=AVX2_EPYC, measured=(6.4, "calibrated"))
    assert "amx_bf16" in cpu_precision_advice("bf16", flags=SAPPHIRE_RAPIDS) and "not measured" in \
        cpu_precision_advice("bf16", flags=SAPPHIRE_RAPIDS)
    assert cpu_precision_advice("bf16", flags=AVX2_EPYC) == cpu_precision_warning("bf16", flags=AVX2_EPYC)


def _entry(threads: int, fp32: float, bf16: float | None, device: str = "Test CPU") -> calibration.Calibration:
    flops = {"float32": fp32, **({"bfloat16": bf16} if bf16 else {})}
    return calibration.Calibration(device=device, threads=threads, date="2026-11-20T10:00:00+00:00", flops=flops,
                                   method="test entry")


def test_speed_vs_fp32_reads_the_nearest_thread_count_of_this_device(tmp_path):
    file = tmp_path / "calibration.json"
    assert calibration.speed_vs_fp32("bf16", "Test CPU", 1, file) is None  # nothing stored
    calibration.store(_entry(1, 100e9, 640e9), file)
    calibration.store(_entry(2, 200e9, 400e9), file)
    calibration.store(_entry(1, 100e9, 1e9, device="Other CPU"), file)
    calibration.store(_entry(4, 100e9, None, device="fp32 only CPU"), file)
    ratio, source = calibration.speed_vs_fp32("bf16", "Test CPU", 1, file)
    assert ratio == pytest.approx(6.4) and source == "accelctl doctor --calibrate, 2026-11-20, threads=1"
    assert calibration.speed_vs_fp32("bf16", "Test CPU", 3, file)[0] == pytest.approx(2.0)  # threads=2 nearest
    assert calibration.speed_vs_fp32("bf16", "fp32 only CPU", 4, file) is None
    assert calibration.speed_vs_fp32("fp16", "Test CPU", 1, file) is None


BF16_ON_CPU = """
workload tiny {
  task pretrain
  model bert(layers = 1, hidden = 32, heads = 2)
  target cpu { precision = bf16  threads = 1 }
}
"""


@pytest.mark.parametrize("bf16_over_fp32, warned", [(0.0055, True), (6.4, False)])
def test_the_plan_follows_this_cpus_stored_measurement(tmp_path, monkeypatch, bf16_over_fp32, warned):
    """Whatever this CPU's flags: the stored measurement of this CPU is what the plan says."""
    from accelctl.api import check, parse, plan

    file = tmp_path / "calibration.json"
    monkeypatch.setenv(CALIBRATION_FILE, str(file))
    calibration.store(_entry(1, 100e9, 100e9 * bf16_over_fp32, device=cpu_model()), file)
    (spec,) = check(parse(BF16_ON_CPU, "tiny.wl"))
    assert plan(spec, "cpu").job.threads == 1
    warnings = plan(spec, "cpu").warnings
    slow = [w for w in warnings if "slower than fp32" in w]
    assert bool(slow) is warned
    if warned:
        assert f"{bf16_over_fp32:.3g}x fp32's FLOP/s" in slow[0]


def test_the_worker_warns_from_the_same_measurement(tmp_path, monkeypatch):
    """The worker's precision step (real torch, the CPU adapter) logs the planner's warning,
    decided by this CPU's stored ratio at the worker's thread count."""
    import torch

    from accelctl.contract.job import DeviceJob, WorkerJob
    from accelctl.workload.types import DatasetSpec, MeasureSpec, ModelSpec, OptimizerSpec, PrecisionSpec, TaskSpec
    from accelctl.worker import precision
    from accelctl.worker.devices import adapter_for

    file = tmp_path / "calibration.json"
    monkeypatch.setenv(CALIBRATION_FILE, str(file))
    calibration.store(_entry(torch.get_num_threads(), 100e9, 0.55e9, device=cpu_model()), file)
    job = WorkerJob(run_id="t", workload="t", target="cpu", backend="cpu", device=DeviceJob(),
                    task=TaskSpec(kind="pretrain"), model=ModelSpec(family="gpt2", source="arch"), architecture={},
                    data=DatasetSpec(), optimizer=OptimizerSpec(), measure=MeasureSpec(),
                    precision=PrecisionSpec(dtype="bf16"))
    logged: list[tuple[str, str]] = []
    chosen = precision.resolve(job, adapter_for(job.device, 0), lambda level, text: logged.append((level, text)))
    assert chosen.name == "bf16"
    assert [text for level, text in logged if level == "warning" and "0.0055x fp32's FLOP/s" in text]
