"""``precision fp8 { library = torchao }``: FP8 through torchao's float8 training, planned on the
torchrun backend (Transformer Engine's fp8 stays the te_fp8 backend's), refused where it cannot
run, and its delayed-scaling keys refused at the precision."""

from __future__ import annotations

import pytest

from accelctl.api import plan
from accelctl.dsl.parser import parse
from accelctl.errors import PlanError, WorkloadError
from accelctl.spec.check import check

WL = """workload w {{
  task {task}
  model {model}
  precision {precision}
  target t {{ {target} }}
}}
"""


def spec_of(precision: str, target: str = "device = h100  devices = 1", task: str = "pretrain { }",
            model: str = "vit(layers = 2, hidden = 64, heads = 4)"):
    (spec,) = check(parse(WL.format(task=task, model=model, precision=precision, target=target), "w.wl"))
    return spec


def test_torchao_fp8_plans_on_torchrun_with_the_recipe_in_the_job():
    p = plan(spec_of("fp8 { library = torchao  format = e4m3 }"), "t")
    assert p.backend == "torchrun"
    assert any("fp8 through torchao" in n for n in p.notes)
    assert p.job.precision.dtype == "fp8" and p.job.precision.fp8.library == "torchao"
    assert p.job.precision.fp8.format == "e4m3"


def test_transformer_engine_stays_the_default_fp8():
    p = plan(spec_of("fp8 { format = hybrid }", "device = h100  devices = 1  micro_batch = 8"), "t")
    assert p.backend == "te_fp8" and p.job.precision.fp8.library == "transformer_engine"


def test_delayed_scaling_keys_are_refused_with_torchao():
    with pytest.raises(WorkloadError) as err:
        spec_of("fp8 { library = torchao  amax_history = 16 }")
    (d,) = err.value.diagnostics
    assert d.code == "E202" and "amax_history" in d.message and "dynamically" in d.message


def test_torchao_fp8_is_refused_for_generation():
    with pytest.raises(PlanError) as err:
        plan(spec_of("fp8 { library = torchao }", task='generate { prompt = "hi"  max_new_tokens = 4 tokens }',
                     model="bloom(layers = 2, hidden = 64, heads = 4)"), "t")
    assert any(d.code == "E520" and "for training" in (d.hint or "") for d in err.value.diagnostics)


def test_torchao_fp8_still_needs_an_fp8_device():
    with pytest.raises(WorkloadError) as err:
        spec_of("fp8 { library = torchao }", "device = a100  devices = 1")
    assert [d.code for d in err.value.diagnostics] == ["E501"]


def test_the_rehearsal_of_a_torchao_fp8_target_keeps_fp8_emulated():
    p = plan(spec_of("fp8 { library = torchao }"), "t", rehearse=True)
    assert p.backend == "cpu" and p.job.precision.dtype == "fp8" and p.job.precision.fp8.library == "torchao"
    assert any("emulated on this CPU" in c for c in p.rehearsal.changes)


def test_torchao_fp8_on_gaudi_is_refused_at_the_precision():
    with pytest.raises(PlanError) as err:
        plan(spec_of("fp8 { library = torchao }", "device = gaudi2  devices = 1"), "t")
    assert any(d.code == "E520" and "not torchao" in (d.hint or "") for d in err.value.diagnostics)
