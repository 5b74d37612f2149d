"""``accelctl estimate --calibrate RUN...``: factors fitted to recorded runs, stored, used.

The CPU test is real end to end: a tiny GPT-2 trained on this CPU at batch 2 and 8 through
``accelctl run`` (real worker processes), the estimate fitted to those two runs, and then
compared, with and without the calibration, with a third real run at batch 4 that the fit
never saw.  An accelerator run cannot be made on this machine, so the accelerator test writes
a run folder as the runner does, with a given step time."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl.api import load
from accelctl.errors import PlanError
from accelctl.estimate import calibrate
from accelctl.estimate.factors import DEFAULT
from accelctl.estimate.roofline import estimate

ROOT = Path(__file__).resolve().parents[2]
CPU_WL = ROOT / "tests" / "estimate" / "fixtures" / "calibrate_cpu.wl"


def _fake_run(store: Path, workload: str, target: str, step_s: float, idx: str = "0001") -> str:
    rid = f"20260101-000000-{workload}-{target}-{idx}"
    d = store / rid
    d.mkdir(parents=True)
    shutil.copy(ROOT / "workloads" / "bert_large_pretrain.wl", d / "workload.wl")
    (d / "summary.json").write_text(json.dumps({"status": "ok", "workload": workload, "target": target,
                                                "stats": {"step_time": {"median": step_s}}}))
    return rid


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=kw.pop("timeout", 120), **kw)


def test_a_compute_bound_run_twice_as_slow_is_reproduced_by_a_lower_mfu(tmp_path):
    spec = next(s for s in load(ROOT / "workloads" / "bert_large_pretrain.wl") if s.name == "bert_large_phase1_bs32")
    predicted = estimate(spec, spec.target("gaudi2"))
    assert predicted.bound_by == "compute"
    rid = _fake_run(tmp_path, "bert_large_phase1_bs32", "gaudi2", 2 * predicted.step_time_s)
    fx = calibrate.fit_from_runs([rid], tmp_path)
    # the GEMMs take the whole extra time (the optimizer step and the rest do not scale with MFU)
    gemm = predicted.compute_s
    assert fx.mfu.value == pytest.approx(DEFAULT.mfu.value * gemm / (gemm + predicted.step_time_s))
    assert rid in fx.mfu.source and fx.bandwidth == DEFAULT.bandwidth
    # an accelerator's host time overlaps with the device's: not fitted from one run
    assert fx.train_layer_overhead_s == DEFAULT.train_layer_overhead_s
    again = estimate(spec, spec.target("gaudi2"), fx)
    assert again.step_time_s == pytest.approx(2 * predicted.step_time_s, rel=0.02)


def test_cli_refuses_a_run_without_step_time_and_an_unknown_id(tmp_path):
    rid = _fake_run(tmp_path, "bert_large_phase1_bs32", "gaudi2", 1.0)
    summary = tmp_path / rid / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "status": "failed", "stats": {}}))
    base = ["estimate", "workloads/bert_large_pretrain.wl", "--runs-dir", str(tmp_path), "--calibrate"]
    proc = _cli(*base, rid)
    assert proc.returncode == 1 and "E581" in proc.stderr and "no step time" in proc.stderr, proc.stderr
    proc = _cli(*base, "nosuchrun")
    assert proc.returncode == 2 and "E582" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert not (tmp_path / calibrate.STORE_FILE).exists()


def test_the_calibration_is_stored_per_device_and_precision_and_used_later(tmp_path):
    spec = next(s for s in load(ROOT / "workloads" / "bert_large_pretrain.wl") if s.name == "bert_large_phase1_bs32")
    rid = _fake_run(tmp_path, "bert_large_phase1_bs32", "gaudi2", 3 * estimate(spec, spec.target("gaudi2")).step_time_s)
    proc = _cli("estimate", "workloads/bert_large_pretrain.wl", "-w", "bert_large_phase1_bs32", "--runs-dir",
                str(tmp_path), "--calibrate", rid)
    assert proc.returncode == 0, proc.stderr
    assert "gaudi2|bf16" in proc.stderr and str(tmp_path / calibrate.STORE_FILE) in proc.stderr
    assert "calibrated (gaudi2): MFU 0." in proc.stdout and "fitted" in proc.stdout and rid in proc.stdout
    # later, without --calibrate: the stored fit is used for gaudi2 bf16, and only for it
    later = _cli("estimate", "workloads/bert_large_pretrain.wl", "-w", "bert_large_phase1_bs32", "-f", "json",
                 "--runs-dir", str(tmp_path))
    recs = {r["target"]: r for r in json.loads(later.stdout)["result"]["estimates"]}
    assert rid in recs["gaudi2"]["sources"]["mfu"] and rid not in recs["a100"]["sources"]["mfu"]
    plain = estimate(spec, spec.target("gaudi2"))
    assert recs["gaudi2"]["step_time_s"] == pytest.approx(3 * plain.step_time_s, rel=0.02)
    ignored = _cli("estimate", "workloads/bert_large_pretrain.wl", "-w", "bert_large_phase1_bs32", "-t", "gaudi2",
                   "-f", "json", "--runs-dir", str(tmp_path), "--no-calibration")
    assert json.loads(ignored.stdout)["result"]["estimates"][0]["step_time_s"] == pytest.approx(plain.step_time_s)
    with pytest.raises(PlanError):
        calibrate.fit_from_runs(["nosuchrun"], tmp_path)


def test_fit_recovers_a_fraction_and_a_host_time_from_two_runs():
    rows = [calibrate.Sample(f"r{i}", "cpu", "fp32", "compute", 0.05 * 6 + 4 * c + 0.01, c, 0.0, 6, 0.01, True)
            for i, c in enumerate((0.01, 0.04))]
    fx = calibrate.fit(rows)
    assert fx.mfu.value == pytest.approx(0.25) and fx.train_layer_overhead_s.value == pytest.approx(0.05)


@pytest.mark.slow
def test_calibrated_cpu_estimate_predicts_a_batch_it_was_not_fitted_on(tmp_path):
    """Real runs: batch 2 and 8 calibrate, batch 4 is predicted and then measured."""
    ids = {}
    for target in ("b2", "b4", "b8"):   # b4 between the two it is predicted from: load drifts alike
        proc = _cli("run", str(CPU_WL), "-t", target, "--headless", "--runs-dir", str(tmp_path), timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        (ids[target],) = [p.name for p in tmp_path.iterdir() if p.is_dir() and p.name not in ids.values()]
    measured = json.loads((tmp_path / ids["b4"] / "summary.json").read_text())["stats"]["step_time"]["median"]

    def predicted(*extra: str) -> dict:
        proc = _cli("estimate", str(CPU_WL), "-t", "b4", "-f", "json", "--runs-dir", str(tmp_path), *extra)
        assert proc.returncode == 0, proc.stderr
        (record,) = json.loads(proc.stdout)["result"]["estimates"]
        return record

    before = predicted("--no-calibration")
    after = predicted("--calibrate", ids["b2"], ids["b8"])
    assert ids["b4"] not in after["sources"]["mfu"] and ids["b2"] in after["sources"]["mfu"]
    # (the per-layer host time is fitted too when the two runs' timings allow a positive one; on
    # a loaded machine they may not, and the fraction alone is fitted: not asserted here)
    # closeness as a ratio (timings err by factors): |log(estimated / measured)|
    err_before, err_after = (abs(math.log(e["step_time_s"] / measured)) for e in (before, after))
    print(f"b4 measured {measured:.4f} s; estimated {before['step_time_s']:.4f} s uncalibrated, "
          f"{after['step_time_s']:.4f} s calibrated")
    # closer than the catalog's nominal figures -- or, where those happen to land near this
    # machine's speed, within 1.5x: on the shared 2-core machine the same run's step time varies
    # up to ~2x between runs, and b2 and b8 ran under their own load (seen: b2 0.034 s, then
    # 0.070 s, at load ~3), which a fit cannot tell from the batch's cost
    assert err_after < max(err_before, math.log(1.5))
    assert 1 / 3 < after["step_time_s"] / measured < 3


def test_an_unreadable_or_foreign_store_is_no_calibration(tmp_path):
    store = tmp_path / calibrate.STORE_FILE
    for text in ("{not json", json.dumps({"schema": 99, "entries": {}}),
                 json.dumps({"schema": calibrate.SCHEMA, "entries": {"cpu|fp32": {"mfu": {"value": "x"}}}})):
        store.write_text(text)
        assert calibrate.load(tmp_path) == {}
