"""workloads/llama2_70b.wl (issue 24): Llama-2-70B sharded on every stack -- FSDP x TP on
4 x 8 H100, ZeRO-3 on a Gaudi2 server, generation over an inf2.48xlarge's NeuronCores -- plans
with per-device memory that fits, from the real shape, each split stated, and each plan passes
the real tool's check where it is installed here (a check that cannot run is NOT RUN, never ok)."""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl.api import load, plan
from accelctl.plan.memory import estimate
from accelctl.plan.registry import BACKENDS

WORKLOAD = Path(__file__).resolve().parents[2] / "workloads" / "llama2_70b.wl"
ACCELERATOR_TARGETS = [("llama2_70b_finetune", "h100"), ("llama2_70b_finetune", "gaudi2"),
                       ("llama2_70b_generate", "inf2"), ("llama2_70b_generate", "h100"),
                       ("llama2_70b_generate", "gaudi2")]


def _specs():
    return {s.name: s for s in load(WORKLOAD)}


def test_the_real_shape_is_llama_2_70b():
    spec = _specs()["llama2_70b_finetune"]
    shape = spec.model.real_shape
    assert (shape["layers"], shape["hidden"], shape["heads"], shape["kv_heads"], shape["ffn"]) == \
        (80, 8192, 64, 8, 28672)
    fit = estimate(spec, spec.target("h100"))
    assert fit.basis == "real"


@pytest.mark.parametrize("workload,target", ACCELERATOR_TARGETS)
def test_every_accelerator_target_plans_fits_and_passes_its_tools_check(workload, target):
    spec = _specs()[workload]
    p = plan(spec, target)
    fit = estimate(spec.for_target(spec.target(target)), spec.target(target))
    assert fit.fits and fit.basis == "real", fit.describe()
    results = BACKENDS[p.backend].check(p, spec.for_target(spec.target(target)))
    assert results, f"{p.backend} has no check"
    assert not [r for r in results if r.ok is False], [(r.tool, r.messages) for r in results]


def test_each_plan_states_its_split():
    specs = _specs()
    h100 = "\n".join(plan(specs["llama2_70b_finetune"], "h100").notes)
    assert "mesh pp 1 × dp 4 × tp 8 = 32 ranks" in h100 and "fsdp(tp = 8) 45.53 GB" in h100
    gaudi = "\n".join(plan(specs["llama2_70b_finetune"], "gaudi2").notes)
    assert "ZeRO stage 3" in gaudi
    inf2 = plan(specs["llama2_70b_generate"], "inf2")
    notes = "\n".join(inf2.notes)
    assert "query heads 64 padded to 72, key/value heads 8 replicated to 24" in notes
    assert "weights 5.75 GB" in notes  # 137.96 GB / tp 24
    export = inf2.launches[0].argv
    assert export[export.index("--tensor_parallel_size") + 1] == "24"
