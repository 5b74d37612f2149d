"""`--rehearse --fp8`: the plan of an FP8 rehearsal (recipe kept beside a baseline precision,
one process), and its refusals positioned at the workload."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from accelctl import api
from accelctl.errors import PlanError
from accelctl.hostinfo import cpu_has_native
from accelctl.plan.rehearse import first_fp8_target, fp8_baseline
from accelctl.catalog import DEVICES
from accelctl.workload.types import Fp8Recipe

ROOT = Path(__file__).resolve().parents[2]
VIT = ROOT / "workloads" / "vit_fp8.wl"


def _vit():
    (spec,) = api.load(VIT)
    return spec


def test_fp8_rehearsal_keeps_the_recipe_beside_the_detected_baseline_in_one_process():
    spec = _vit()
    p = api.plan(spec, "p5_fp8", rehearse=True, fp8=True)
    assert fp8_baseline() == ("bf16" if cpu_has_native("bf16") else "fp32")
    assert p.job.precision.dtype == fp8_baseline() and p.job.precision.fp8 == Fp8Recipe(
        format="hybrid", amax_history=1024, amax_algo="max", margin=0)
    assert p.job.rehearsal_of == "p5_fp8" and DEVICES[p.device].host and p.backend == "cpu"
    assert sum(launch.processes for launch in p.launches) == 1 and p.job.parallel.strategy == "none"
    assert (p.job.batch.micro, p.job.architecture) == (128, spec.model.stand_in)
    changes = " ".join(p.rehearsal.changes)
    assert f"emulated on this CPU, side by side with the same model in {fp8_baseline()}" in changes
    assert "8 processes" in changes and "te_layers" in changes
    plain = api.plan(spec, "p5_fp8", rehearse=True)  # without --fp8: the plain rehearsal, fp8 -> fp32
    assert plain.job.precision.fp8 is None and plain.job.precision.dtype == "fp32"  # not an FP8 rehearsal
    assert "fp8 -> fp32" in " ".join(plain.rehearsal.changes)
    from accelctl.worker.fp8_rehearsal import wanted  # the worker's reading of the two jobs

    assert wanted(p.job) and not wanted(plain.job) and not wanted(api.plan(spec, "cpu").job)


def test_fp8_rehearsal_of_a_non_fp8_target_is_e585_at_its_precision():
    spec = _vit()
    with pytest.raises(PlanError) as err:
        api.plan(spec, "p5_bf16", rehearse=True, fp8=True)
    (diag,) = err.value.diagnostics
    assert diag.code == "E585" and "target p5_bf16 has precision bf16" in diag.message
    line = VIT.read_text().splitlines()[diag.span.line - 1]
    assert line.strip() == "precision bf16"  # the workload's precision, which p5_bf16 inherits


def test_the_first_fp8_target_is_picked_and_a_workload_without_one_is_e586():
    assert first_fp8_target(_vit()).name == "p5_fp8"
    (spec,) = api.check(api.parse("workload w { task pretrain {}  model gpt2(layers = 1, hidden = 32, heads = 2)\n"
                                  "  target h { instance = p5.48xlarge } }", "w.wl"))
    with pytest.raises(PlanError) as err:
        first_fp8_target(spec)
    assert err.value.diagnostics[0].code == "E586"


def test_cli_fp8_without_rehearse_is_refused_and_plan_prints_the_rehearsal():
    run = subprocess.run([sys.executable, "-m", "accelctl.cli", "run", str(VIT), "-t", "p5_fp8", "--fp8"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 2 and "--fp8 is a kind of rehearsal: use it with --rehearse" in run.stderr
    plan = subprocess.run([sys.executable, "-m", "accelctl.cli", "plan", str(VIT), "--rehearse", "--fp8"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert plan.returncode == 0, plan.stderr
    # only the fp8 targets: p5_fp8 and p5_fp8_b64 (seed 002's batch 64 per GPU)
    assert plan.stdout.count("# plan: workload") == 2 and "target p5_fp8\n" in plan.stdout
    assert "target p5_fp8_b64\n" in plan.stdout
    assert "emulated on this CPU" in plan.stdout
