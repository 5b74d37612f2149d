"""``optimize { }`` in plans: what each backend plug-in says about compile and channels-last
(E221, positioned at the setting), the target's keys over the workload's, and the notes and
job fields the worker reads."""

from __future__ import annotations

import pytest

from accelctl.api import plan
from accelctl.dsl.parser import parse
from accelctl.errors import PlanError
from accelctl.language.check import check

WL = """workload w {{
  task {task}
  model {model}
  optimize {{ {optimize} }}
  target t {{ {target} }}
}}
"""
VIT = "vit(layers = 2, hidden = 64, heads = 4)"


def one(task: str = "pretrain { }", model: str = VIT, optimize: str = "compile = on", target: str = "devices = 1"):
    (spec,) = check(parse(WL.format(task=task, model=model, optimize=optimize, target=target), "w.wl"))
    return spec


@pytest.mark.parametrize("target, backend", [
    ("device = gaudi2", "gaudi"),
    ("instance = trn1.2xlarge", "xla_neuron"),
    ("device = a100  devices = 2  parallel = zero(stage = 2)", "deepspeed"),
    ("device = h100  precision = fp8  micro_batch = 8", "te_fp8"),
])
def test_backends_that_compile_their_own_way_refuse_compile_at_the_setting(target, backend):
    spec = one(target=target)
    with pytest.raises(PlanError) as err:
        plan(spec, "t")
    (d,) = err.value.diagnostics
    assert d.code == "E221" and f"backend {backend} does not run compile = on" in d.message
    assert (d.span.line, d.span.column) == (4, 14)  # `compile = on` in the workload's optimize block
    assert d.hint.startswith(f"{backend}: ")


def test_deepspeed_inference_refuses_compile_for_generation():
    spec = one(task="generate { max_new_tokens = 4  kv_cache = static }", model="bloom()",
               target="device = a100  parallel = deepspeed_inference(tp = 1)")
    with pytest.raises(PlanError) as err:
        plan(spec, "t")
    assert [d.code for d in err.value.diagnostics] == ["E221"]


def test_xla_refuses_channels_last_and_a_target_may_turn_compile_off():
    spec = one(optimize="channels_last = on", target="instance = trn1.2xlarge  optimize { compile = off }")
    with pytest.raises(PlanError) as err:
        plan(spec, "t")
    (d,) = err.value.diagnostics
    assert d.code == "E221" and "channels_last" in d.message


def test_target_keys_override_the_workloads_and_reach_the_job():
    spec = one(optimize="compile = on  channels_last = on",
               target="device = a100  optimize { compile_mode = max-autotune }")
    p = plan(spec, "t")
    assert p.backend == "torchrun"
    opt = p.job.optimize
    assert (opt.compile, opt.compile_mode, opt.channels_last) == (True, "max-autotune", True)
    assert any("torch.compile(mode=max-autotune)" in n for n in p.notes)
    assert any("channels-last" in n for n in p.notes)
    off = plan(one(target="device = gaudi2  optimize { compile = off }"), "t")
    assert off.backend == "gaudi" and not off.job.optimize.compile
    assert not any("torch.compile" in n for n in off.notes)


def test_static_kv_cache_reaches_the_job_and_the_plan_says_so():
    spec = one(task="generate { max_new_tokens = 8  kv_cache = static }", model="gpt2()", target="device = cpu")
    p = plan(spec, "t")
    assert (p.job.task.kv_cache, p.job.task.kv_cache_layout) == (True, "static")
    assert any("static KV cache" in n for n in p.notes)
    dyn = one(task="generate { max_new_tokens = 8  kv_cache = on }", model="gpt2()", optimize="compile = off", target="device = cpu")
    assert (dyn.task.kv_cache, dyn.task.kv_cache_layout) == (True, "dynamic")
    off = one(task="generate { max_new_tokens = 8  kv_cache = off }", model="gpt2()", optimize="compile = off", target="device = cpu")
    assert off.task.kv_cache is False
