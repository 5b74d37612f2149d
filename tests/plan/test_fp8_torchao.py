"""``precision fp8 { library = torchao }``: FP8 through torchao's float8 training, planned on the
torchrun backend (Transformer Engine's fp8 stays the te_fp8 backend's), refused where it cannot
run, and its delayed-scaling keys refused at the precision."""

from __future__ import annotations

import pytest

from accelctl.api import plan
from accelctl.dsl.parser import parse
from accelctl.errors import PlanError, WorkloadError
from accelctl.language.check import check, check_all

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


def test_the_plan_lists_the_linears_that_go_fp8_and_those_kept_with_the_reason():
    p = plan(spec_of("fp8 { library = torchao }", model="llama(layers = 2, hidden = 64, heads = 4, ffn = 172)"), "t")
    notes = "\n".join(p.notes)
    assert "recipe tensorwise" in notes
    assert "FP8 (Float8Linear): 8 linear layer(s): model.layers.*.self_attn.q_proj (64x64 x2)" in notes
    assert "model.layers.*.mlp.gate_proj (64x172 x2): 172 not a multiple of 16" in notes
    assert "lm_head (64x32000): output head" in notes


def test_rowwise_is_torchao_s_rowwise_recipe_in_e4m3():
    p = plan(spec_of("fp8 { library = torchao  recipe = rowwise }"), "t")
    assert p.job.precision.fp8.recipe == "rowwise" and p.job.precision.fp8.format == "e4m3"
    assert any("recipe rowwise: dynamic rowwise scaling" in n for n in p.notes)


@pytest.mark.parametrize("precision,words", [
    ("fp8 { recipe = rowwise }", "torchao float8 recipe"),
    ("fp8 { library = torchao  recipe = rowwise  format = hybrid }", "casts input, weight and gradient to E4M3"),
])
def test_recipe_is_refused_with_transformer_engine_and_rowwise_with_hybrid(precision, words):
    with pytest.raises(WorkloadError) as err:
        spec_of(precision)
    (d,) = err.value.diagnostics
    assert d.code == "E202" and words in d.message and d.span.line == 4


def test_uncompiled_torchao_fp8_on_a_gpu_is_a_warning_at_the_precision():
    def warnings(target):
        text = WL.format(task="pretrain { }", model="vit(layers = 2, hidden = 64, heads = 4)",
                         precision="fp8 { library = torchao }", target=target)
        return [d for d in check_all(parse(text, "w.wl"))[1] if d.code == "W602"]

    (w,) = warnings("device = h100  devices = 1")
    assert w.severity == "warning" and w.span.line == 4 and "0.32x" in w.message
    assert warnings("device = h100  devices = 1  optimize { compile = on }") == []


def test_fsdp2_all_gathers_tensorwise_weights_in_fp8_and_rowwise_in_bf16():
    tw = plan(spec_of("fp8 { library = torchao }", "device = h100  devices = 2  parallel = fsdp"), "t")
    assert any("all-gathered in FP8 (enable_fsdp_float8_all_gather)" in n for n in tw.notes)
    rw = plan(spec_of("fp8 { library = torchao  recipe = rowwise }", "device = h100  devices = 2  parallel = fsdp"),
              "t")
    assert any("all-gathered in bf16" in n for n in rw.notes)


def test_torchao_fp8_under_tensor_parallel_is_refused_at_the_parallel_line():
    with pytest.raises(PlanError) as err:
        plan(spec_of("fp8 { library = torchao }", "device = h100  devices = 2  parallel = tensor(tp = 2)"), "t")
    (d,) = [d for d in err.value.diagnostics if "Float8ColwiseParallel" in (d.hint or "")]
    assert d.code == "E520" and d.span.line == 5


def test_mixtral_s_experts_stay_bf16_with_the_reason_and_the_flops_they_leave():
    """transformers 5.23 holds Mixtral's experts as fused 3-D tensors (not nn.Linear); torchao
    0.18's FP8 grouped GEMM for them is CUDA sm90+ and Triton only (``fp8_layers``): the plan
    says so with their share of the weight GEMMs, and the estimate's FP8 share leaves them out."""
    from accelctl.models import flops as F
    from accelctl.estimate.roofline import fp8_coverage
    from accelctl.models import fp8_layers

    model = "mixtral(layers = 2, hidden = 64, heads = 4, kv_heads = 2, ffn = 128, experts = 4, experts_per_token = 2)"
    spec = spec_of("fp8 { library = torchao }", model=model, target="device = h100  devices = 2  parallel = fsdp")
    notes = "\n".join(plan(spec, "t").notes)
    # per token and layer: attention 64·(64 + 32 + 32 + 64); the 2 active experts 2 · 3 · 64·128
    share = 2 * 3 * 64 * 128 / (2 * 3 * 64 * 128 + 64 * (64 + 32 + 32 + 64) + 64 * 32000 / 2)
    assert (f"experts kept in bf16: model.layers.*.mlp.experts (gate_up_proj, down_proj; top-2 of 4) (64x128 x12), "
            f"{share:.1%} of the weight GEMM FLOPs: fused 3-D expert tensors, not nn.Linear; torchao 0.18's FP8 "
            "grouped GEMM") in notes
    s = fp8_layers.split("mixtral", spec.model.stand_in, spec.dataset.seq_len)
    covered, said = fp8_coverage(spec, spec.model.stand_in, F.Sizes(seq=spec.dataset.seq_len))
    total = F.forward("mixtral", spec.model.stand_in, F.Sizes(seq=spec.dataset.seq_len))
    assert covered == pytest.approx(s.fp8_flops() / total) and covered + s.experts.flops() / total < 1
    assert "the experts alone are" in said and "not planned" in said
