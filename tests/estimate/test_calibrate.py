"""``accelctl estimate --calibrate RUN...``: factors fitted to recorded runs.

The run folders are written as the runner writes them (``workload.wl`` copied in, a
``summary.json`` with the steady-state median step time); an accelerator run cannot be
made on this machine, so its recorded step time is given."""

from __future__ import annotations

import json
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


def _run(store: Path, workload: str, target: str, step_s: float, idx: str = "0001") -> str:
    rid = f"20260101-000000-{workload}-{target}-{idx}"
    d = store / rid
    d.mkdir(parents=True)
    shutil.copy(ROOT / "workloads" / "bert_large_pretrain.wl", d / "workload.wl")
    (d / "summary.json").write_text(json.dumps({"status": "ok", "workload": workload, "target": target,
                                                "stats": {"step_time": {"median": step_s}}}))
    return rid


def test_a_compute_bound_run_twice_as_slow_halves_the_mfu(tmp_path):
    spec = next(s for s in load(ROOT / "workloads" / "bert_large_pretrain.wl") if s.name == "bert_large_phase1_bs32")
    predicted = estimate(spec, spec.target("gaudi2"))
    assert predicted.bound_by == "compute"
    rid = _run(tmp_path, "bert_large_phase1_bs32", "gaudi2", 2 * predicted.step_time_s)
    fx = calibrate.fit_from_runs([rid], tmp_path)
    assert fx.mfu.value == pytest.approx(DEFAULT.mfu.value / 2)
    assert rid in fx.mfu.source and fx.bandwidth == DEFAULT.bandwidth
    again = estimate(spec, spec.target("gaudi2"), fx)
    assert again.step_time_s == pytest.approx(2 * predicted.step_time_s, rel=0.02)


def test_cli_calibrate_refuses_a_cpu_run_and_an_unknown_id(tmp_path):
    rid = _run(tmp_path, "bert_large_phase1_bs32", "cpu", 1.0)
    base = [sys.executable, "-m", "accelctl.cli", "estimate", "workloads/bert_large_pretrain.wl", "--runs-dir",
            str(tmp_path), "--calibrate"]
    proc = subprocess.run([*base, rid], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "E581" in proc.stderr and "no datasheet" in proc.stderr, proc.stderr
    proc = subprocess.run([*base, "nosuchrun"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "E582" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_calibrated_factors_reach_the_table(tmp_path):
    spec = next(s for s in load(ROOT / "workloads" / "bert_large_pretrain.wl") if s.name == "bert_large_phase1_bs32")
    rid = _run(tmp_path, "bert_large_phase1_bs32", "gaudi2", 3 * estimate(spec, spec.target("gaudi2")).step_time_s)
    proc = subprocess.run([sys.executable, "-m", "accelctl.cli", "estimate", "workloads/bert_large_pretrain.wl",
                           "-w", "bert_large_phase1_bs32", "--runs-dir", str(tmp_path), "--calibrate", rid],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert f"fitted to 1 compute-bound run(s): {rid}" in proc.stdout
    with pytest.raises(PlanError):
        calibrate.fit_from_runs(["nosuchrun"], tmp_path)
