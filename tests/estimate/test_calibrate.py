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
from accelctl.contract.envnames import CALIBRATION_FILE
from accelctl.errors import PlanError
from accelctl.estimate import calibrate
from accelctl.estimate.factors import DEFAULT, Factor
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
    assert fx.mfu.value == pytest.approx(DEFAULT.mfu.value * gemm / (gemm + predicted.step_time_s), rel=1e-3)
    # one run fits one factor: the one that moved least (a bandwidth fraction could also make the
    # step twice as long, by making it memory-bound); the others keep the catalog's
    assert rid in fx.mfu.source and fx.bandwidth == DEFAULT.bandwidth
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
    """Two runs on a synchronous host (t = other + c / MFU + n x host time), of different c:
    both factors are recovered, and no third one moves."""
    def predictor(c: float, n: int):
        return lambda fx: 0.01 + c * DEFAULT.mfu.value / fx.mfu.value + n * fx.train_layer_overhead_s.value

    rows = [calibrate.Sample(f"r{i}", "cpu", "fp32", predictor(c, 6)(DEFAULT.with_(
                mfu=Factor(0.125, "truth"), train_layer_overhead_s=Factor(0.05, "truth"))), predictor(c, 6))
            for i, c in enumerate((0.01, 0.04))]
    fx = calibrate.fit(rows)
    assert fx.mfu.value == pytest.approx(0.125, rel=1e-3)
    assert fx.train_layer_overhead_s.value == pytest.approx(0.05, rel=1e-3)
    assert "r0, r1" in fx.mfu.source and fx.bandwidth == DEFAULT.bandwidth
    assert calibrate.rms_log_error(rows, fx) < 1e-3


def test_a_factor_no_run_depends_on_is_never_fitted():
    row = calibrate.Sample("r0", "cpu", "fp32", 0.3, lambda fx: 0.1 * DEFAULT.mfu.value / fx.mfu.value)
    fx = calibrate.fit([row])
    assert fx.mfu.value == pytest.approx(DEFAULT.mfu.value / 3, rel=1e-3)
    assert fx.with_(mfu=DEFAULT.mfu) == DEFAULT


H100_RUNS = ROOT / "tests" / "estimate" / "fixtures" / "h100_runs_20261126"


def test_the_fit_to_real_h100_runs_explains_them_better_than_the_catalog(tmp_path):
    """The first real runs on an H100 (docs/device-runs.md, call 3; each run folder's summary and
    workload as the runner wrote them).  The closed-form fit this replaced called BERT-Large
    DDP memory-bound (it is host-bound), set the bandwidth fraction to 0.065 from that run
    alone, and put ViT-H/14, which the catalog had within 3 %, at +448 %."""
    shutil.copytree(H100_RUNS, tmp_path / "runs")
    runs = tmp_path / "runs"
    ids = sorted(p.name for p in runs.iterdir())
    samples = calibrate.samples_from_runs(ids, runs)
    fitted = calibrate.fit_by_device(samples)
    assert set(fitted) == {"h100|bf16", "h100|fp16"}  # BLOOMZ-7B1's fp16 generation apart
    for k, fx in fitted.items():
        group = [s for s in samples if calibrate.key(s.device, s.dtype) == k]
        before, after = calibrate.rms_log_error(group, DEFAULT), calibrate.rms_log_error(group, fx)
        assert after < 0.5 * before, (k, before, after)
        for s in group:  # no run explained worse than 1.5x either way
            assert abs(math.log(s.predict(fx) / s.measured_s)) < math.log(1.5), (s.run_id, s.predict(fx), s.measured_s)
    vit = next(s for s in samples if "vit_h14_bf16" in s.run_id)
    assert abs(math.log(vit.predict(fitted["h100|bf16"]) / vit.measured_s)) < math.log(1.1)
    # BERT-Large at micro-batch 32 is host-bound on the H100: the fit says so with the host time
    assert fitted["h100|bf16"].train_layer_overhead_s.value > 5 * DEFAULT.train_layer_overhead_s.value
    # and the same through the CLI: stored, then used by a later estimate
    proc = _cli("estimate", str(ROOT / "workloads" / "device" / "vit_h14_bf16.wl"), "-t", "h100", "-f", "json",
                "--runs-dir", str(runs), "--calibrate", *ids)
    assert proc.returncode == 0, proc.stderr
    (record,) = json.loads(proc.stdout)["result"]["estimates"]
    assert "fitted" in record["sources"]["layer_overhead"] and ids[0] in record["sources"]["layer_overhead"]
    assert record["step_time_s"] == pytest.approx(vit.predict(fitted["h100|bf16"]), rel=1e-6)


@pytest.mark.slow
def test_calibrated_cpu_estimate_predicts_a_batch_it_was_not_fitted_on(tmp_path, monkeypatch):
    """Real runs: batch 2 and 8 calibrate, batch 4 is predicted and then measured.  Against the
    nominal datasheet: with a stored matmul ceiling (the suite's own, tests/conftest.py) the
    estimate may already be within ``GOOD_ENOUGH`` of the runs, and then nothing is fitted."""
    monkeypatch.setenv(CALIBRATION_FILE, str(tmp_path / "no-ceiling.json"))
    ids = {}
    for target in ("b2", "b4", "b8"):   # b4 between the two it is predicted from: load drifts alike
        proc = _cli("run", str(CPU_WL), "-t", target, "--headless", "--runs-dir", str(tmp_path), timeout=600)
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        (ids[target],) = [p.name for p in tmp_path.iterdir() if p.is_dir() and p.name not in ids.values()]
    measured = json.loads((tmp_path / ids["b4"] / "summary.json").read_text())["stats"]["step_time"]["median"]

    def predicted(*extra: str, target: str = "b4") -> dict:
        proc = _cli("estimate", str(CPU_WL), "-t", target, "-f", "json", "--runs-dir", str(tmp_path), *extra)
        assert proc.returncode == 0, proc.stderr
        (record,) = json.loads(proc.stdout)["result"]["estimates"]
        return record

    before = predicted("--no-calibration")
    after = predicted("--calibrate", ids["b2"], ids["b8"])
    fitted = [v for v in after["sources"].values() if "fitted" in v]
    if not fitted:  # nothing moved: right only where the nominal estimate was within GOOD_ENOUGH of both runs
        errs = [math.log(predicted("--no-calibration", target=t)["step_time_s"] / json.loads(
            (tmp_path / ids[t] / "summary.json").read_text())["stats"]["step_time"]["median"]) for t in ("b2", "b8")]
        assert math.sqrt(sum(e * e for e in errs) / len(errs)) <= calibrate.GOOD_ENOUGH, errs
    assert all(ids["b2"] in v and ids["b4"] not in v for v in fitted)
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


@pytest.mark.parametrize("kind", ["fifo", "link to a device", "folder"])
def test_a_special_file_in_place_of_the_store_is_no_calibration_and_never_a_wait(tmp_path, kind):
    """A FIFO there hung every ``estimate`` of the store (read_text waited on it)."""
    import os

    store = tmp_path / calibrate.STORE_FILE
    if kind == "fifo":
        os.mkfifo(store)
    elif kind == "folder":
        store.mkdir()
    else:
        store.symlink_to("/dev/zero")
    assert calibrate.load(tmp_path) == {}


def test_saving_never_writes_through_a_link_planted_beside_the_store(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    (tmp_path / "estimate-calibration.tmp").symlink_to(victim)
    calibrate.save({}, tmp_path)
    assert victim.read_text() == "keep me" and calibrate.load(tmp_path) == {}
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".estimate-calibration-")]


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf"), "inf", 1e400, 1e-320, 2.0, True, None])
def test_a_stored_factor_the_fit_never_stores_is_no_calibration(tmp_path, value):
    """A factor 0 was a ZeroDivisionError (exit 70), NaN or negative a "fits" with a NaN or
    negative step time: the store holds only values in the range the fit searches."""
    store = tmp_path / calibrate.STORE_FILE
    entry = {"mfu": {"value": value, "source": "planted"}}
    store.write_text(json.dumps({"schema": calibrate.SCHEMA, "entries": {"cpu|fp32": entry}}))
    assert calibrate.load(tmp_path) == {}
    entry["mfu"]["value"] = 0.5  # the same file, a value the fit could store: read
    store.write_text(json.dumps({"schema": calibrate.SCHEMA, "entries": {"cpu|fp32": entry}}))
    assert calibrate.load(tmp_path)["cpu|fp32"].mfu.value == 0.5


@pytest.mark.parametrize("how", ["file writable by others", "folder writable by others"])
def test_a_stored_fit_others_could_have_written_is_one_warning_and_no_calibration(tmp_path, how):
    import os

    from accelctl import private_files

    store = tmp_path / "runs" / calibrate.STORE_FILE
    store.parent.mkdir()
    store.write_text(json.dumps({"schema": calibrate.SCHEMA, "entries": {"cpu|fp32": {
        "mfu": {"value": 0.5, "source": "x"}}}}))
    os.chmod(store if how.startswith("file") else store.parent, 0o666 if how.startswith("file") else 0o777)
    private_files._warned.clear()
    private_files.take_warnings()
    assert calibrate.load(store.parent) == {}
    assert [d.code for d in private_files.take_warnings()] == ["W010"]


def test_estimate_calibrate_never_replaces_a_device_or_fifo_at_the_store(tmp_path):
    import os

    store = tmp_path / calibrate.STORE_FILE
    os.mkfifo(store)
    with pytest.raises(OSError, match="not a regular file"):
        calibrate.save({}, tmp_path)
    assert store.is_fifo()
