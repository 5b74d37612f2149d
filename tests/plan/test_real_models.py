"""A plan is what runs on the target's hardware: every accelerator target of the shipped
workloads builds the seed's real model, never the stand-in.

The parameter count comes from building the job's architecture with the worker's own
builder on PyTorch's ``meta`` device (shapes only, no memory), and is compared with the
published size of the seed's model.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelctl import api
from accelctl.errors import PlanError
from accelctl.catalog import DEVICES
from accelctl.workload.types import PrecisionSpec
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]

#: workload -> the published size of the seed's model (model cards / papers)
PUBLISHED = {
    "bloomz_176b": 176e9,        # BLOOM(Z) 176B
    "bloomz_7b": 7.1e9,          # BLOOMZ-7B1
    # BERT-base with its 32,000-token vocabulary (110.7 M): the run seed 000 repeats
    "bert_large_phase1_bs64": 110.7e6, "bert_large_phase1_bs32": 110.7e6,
    "bert_large_scaling": 340e6,  # BERT-Large
    "bert_1_5b_zero1_8n": 1.5e9, "bert_1_5b_zero1_16n": 1.5e9,    # the BERT 1.5B of seed 001
    "t5_3b_summarization": 2.85e9,  # T5-3B (2.85 B parameters; "3B" in the name)
    "vit_huge_fp8": 632e6,       # ViT-H (632 M)
    "vit_neuron": 86e6,          # ViT-B/16 (86 M), timm's default ViT of seed 004
    "vit_compiled": 86e6,        # ViT-B/16 (86 M), workloads/compiled.wl
    "stable_diffusion": 1.07e9,  # SD 1.x: UNet 860 M + VAE 84 M + CLIP text 123 M
    # shapes read from the models' config.json (workloads/configs/)
    "llama2_7b_zero3": 6.74e9, "llama2_7b_infer": 6.74e9,      # Llama-2-7B
    "mistral_7b_generate": 7.24e9,                             # Mistral-7B-v0.1
    "mixtral_8x7b_generate": 46.7e9, "mixtral_8x7b_zero3": 46.7e9,  # Mixtral-8x7B (all experts)
    "llama2_70b_finetune": 68.98e9, "llama2_70b_generate": 68.98e9,  # Llama-2-70B
}


def _accelerator_jobs():
    for path in sorted((ROOT / "workloads").glob("*.wl")):
        for spec in api.load(path):
            for target in spec.targets:
                if DEVICES[target.device].host:
                    continue
                try:
                    # the per-node plan: engines past one machine place the same job on every node
                    plan = api.plan(spec, target, engine="local")
                except PlanError:
                    continue  # refused (e.g. does not fit): there is no job to run
                yield pytest.param(spec.name, plan.job, id=f"{path.stem}:{spec.name}:{target.name}")


JOBS = list(_accelerator_jobs())
_COUNTS: dict[str, int] = {}


def _meta_params(job) -> int:
    import torch

    from accelctl.worker import models

    key = json.dumps([job.model.family, job.architecture], sort_keys=True)
    if key not in _COUNTS:
        # the architecture only: random weights, no Hub traffic; fp8 builds need the plan's
        # Transformer Engine recipe, and the count is the same in bf16
        job = replace(job, precision=PrecisionSpec(dtype="bf16"), hub="offline",
                      model=replace(job.model, weights="random"))
        with torch.device("meta"):
            built = models.build(job, lambda level, message: None)
        _COUNTS[key] = models.count_params(built.model)
    return _COUNTS[key]


def test_every_seed_workload_has_accelerator_jobs():
    names = {p.values[0] for p in JOBS}
    assert names == set(PUBLISHED), names ^ set(PUBLISHED)


@pytest.mark.parametrize("workload,job", JOBS)
def test_accelerator_job_builds_the_seeds_real_model(workload, job):
    assert job.scale == "real" and not job.rehearsal_of
    assert job.architecture, "an accelerator job names the architecture it builds"
    params = _meta_params(job)
    published = PUBLISHED[workload]
    assert abs(params - published) / published < 0.05, f"{params / 1e9:.3f} B built vs {published / 1e9:.3f} B"


def test_the_host_runs_the_stand_in_and_says_so():
    (spec,) = [s for s in api.load(ROOT / "workloads" / "bloomz.wl") if s.name == "bloomz_7b"]
    job = api.plan(spec, "cpu").job
    assert job.scale == "stand_in" and job.architecture == spec.model.stand_in
    assert _meta_params(job) < 1e7
