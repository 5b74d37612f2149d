"""The worker's MFU denominator: the ceiling ``accelctl doctor --calibrate`` stored, with its
date, when one exists for this CPU and thread count; a per-run probe otherwise (said so in
the env).  Real worker processes on a tiny GPT-2 (the no-probe case for generation is in
test_worker.py's bloom test)."""

from __future__ import annotations

import pytest
from test_worker import assert_ok, make_job, of, run_worker

from accelctl.contract import calibration
from accelctl.contract.envnames import CALIBRATION_FILE
from accelctl.contract.events import RunStarted, StepMetrics
from accelctl.hostinfo import cpu_model
from accelctl.workload.types import DatasetSpec, MeasureSpec, TaskSpec

GPT2 = {"layers": 1, "hidden": 32, "heads": 2, "vocab": 300, "max_positions": 64}


def train_job(tmp_path):
    return make_job(tmp_path, "gpt2", TaskSpec(kind="pretrain"), config=GPT2, micro_batch=2, data=DatasetSpec(seq_len=32),
                    measure=MeasureSpec(warmup=1, steps=3))


@pytest.mark.slow
def test_training_mfu_is_against_the_stored_calibration(tmp_path, monkeypatch):
    file = tmp_path / "calibration.json"
    monkeypatch.setenv(CALIBRATION_FILE, str(file))
    ceiling = 7.5e12  # no CPU here measures this: it can only have come from the file
    calibration.store(calibration.Calibration(device=cpu_model(), threads=1, date="2026-11-20T10:00:00+00:00",
                                              flops={"float32": ceiling}, method="test entry"), file)
    rc, events = run_worker(train_job(tmp_path))
    assert_ok(rc, events[0])
    env = of(events[0], RunStarted)[0].env
    assert env["peak_flops_measured"] == ceiling and env["peak_flops_dtype"] == "float32"
    assert env["peak_flops_date"] == "2026-11-20T10:00:00+00:00" and env["peak_flops_source"].startswith("calibration")
    measured = [s for s in of(events[0], StepMetrics) if s.phase == "measure"]
    assert measured and all(s.mfu is not None for s in measured)
    # mfu = FLOPs per step / step time / ceiling: the FLOPs it implies against the stored ceiling
    # are the model's (every step the same, ~1e7 for this GPT-2); against a probed ~1e10-1e11
    # FLOP/s ceiling they would come out 100x or more too high
    implied = [s.mfu * s.step_time_s * ceiling for s in measured]
    assert all(x == pytest.approx(implied[0], rel=1e-6) for x in implied)
    assert 1e6 < implied[0] < 1e8


@pytest.mark.slow
def test_without_calibration_the_worker_probes_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv(CALIBRATION_FILE, str(tmp_path / "absent.json"))
    rc, events = run_worker(train_job(tmp_path))
    assert_ok(rc, events[0])
    env = of(events[0], RunStarted)[0].env
    assert env["peak_flops_source"].startswith("per-run probe") and "peak_flops_date" not in env
    assert 1e8 < env["peak_flops_measured"] < 7.5e12
