"""A pre-training task starts from the model's configuration, never from trained weights.

Seed 000's BERT run pre-trained "from scratch" (huggingface/blog pretraining-bert.md:
``model_config_id bert-base-uncased``, AutoModelForMaskedLM.from_config); seed 001's BERT
1.5B too (run_pretraining.py --config_file).  Before issue 29 a ``task pretrain`` with
``model hf("...")`` loaded the Hub's pretrained checkpoint on every accelerator target
(``note: weights bert-large-uncased from the Hugging Face Hub``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from accelctl import api
from accelctl.errors import PlanError
from accelctl.catalog import DEVICES

ROOT = Path(__file__).resolve().parents[2]

WL = """workload w {
  task %s { objective = mlm }
  model hf("bert-base-uncased") { %s stand_in = bert() }
  target a100 { devices = 1 }
}
"""


def _plan(text: str, tmp_path: Path):
    path = tmp_path / "w.wl"
    path.write_text(text)
    spec = api.load(path)[0]
    return api.plan(spec, spec.target("a100"))


def test_pretrain_from_a_hub_id_starts_from_its_configuration(tmp_path):
    plan = _plan(WL % ("pretrain", ""), tmp_path)
    assert plan.job.model.weights == "random"
    assert any("pre-training from bert-base-uncased's configuration" in n for n in plan.notes)
    assert not any("from the Hugging Face Hub" in n for n in plan.notes)


def test_finetune_still_loads_the_trained_weights(tmp_path):
    plan = _plan(WL % ("finetune", ""), tmp_path)
    assert plan.job.model.weights == "auto"
    assert any("weights bert-base-uncased from the Hugging Face Hub" in n for n in plan.notes)


def test_weights_real_written_out_is_continued_pretraining(tmp_path):
    plan = _plan(WL % ("pretrain", "weights = real"), tmp_path)
    assert plan.job.model.weights == "real"


def _shipped():
    for path in sorted((ROOT / "workloads").glob("*.wl")):
        for spec in api.load(path):
            if spec.task.kind == "pretrain":
                for t in spec.targets:
                    if not DEVICES[t.device].host:
                        yield pytest.param(spec, t, id=f"{spec.name}.{t.name}")


@pytest.mark.parametrize("spec,target", list(_shipped()))
def test_every_shipped_pretraining_target_starts_from_the_configuration(spec, target):
    try:
        plan = api.plan(spec, target)
    except PlanError:
        pytest.skip("target refused by plan (its own tests say why)")
    assert plan.job.model.weights in ("random", "stand_in")
