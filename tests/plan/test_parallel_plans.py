"""FSDP / tensor / pipeline targets planned: the mesh and each rank's shard in the plan notes,
the worker's ``sharded`` strategy, memory per device per strategy, and the refusals at the
line in the way (devices it is not built for, checkpoints, generate tasks)."""

from __future__ import annotations

import pytest

from accelctl.api import check, parse
from accelctl.errors import PlanError, WorkloadError
from accelctl.plan.compile import compile_plan
from accelctl.plan.memory import estimate

BASE = """workload w {{
  task {task}
  model llama(layers = {layers}, hidden = {hidden}, heads = {heads}, ffn = {ffn}, vocab = 32000, max_positions = 4096)
  dataset synthetic() {{ seq_len = {seq} }}
  {extra}
  batch {{ micro = 1  accumulation = 8 }}
{targets}
}}
"""
TINY = dict(layers=4, hidden=64, heads=4, ffn=96, seq=32)
LLAMA_70B = dict(layers=80, hidden=8192, heads=64, ffn=28672, seq=4096)  # MHA: an upper bound of the GQA model


def _spec(targets: str, task: str = "pretrain { }", extra: str = "", shape: dict = TINY):
    text = BASE.format(task=task, extra=extra, targets=targets, **shape)
    (spec,) = check(parse(text, "p.wl"))
    return spec


def test_fsdp_x_tensor_plan_prints_the_mesh_and_each_ranks_shard():
    spec = _spec("  target t { device = cpu  devices = 4  engine = torchrun  parallel = fsdp(tp = 2) }")
    plan = compile_plan(spec, "t")
    assert plan.job.strategy == "sharded" and plan.job.parallel.tp == 2
    notes = "\n".join(plan.notes)
    assert "mesh pp 1 × dp 2 × tp 2 = 4 ranks" in notes
    assert "rank 1: dp 0: data shard 0 of 2, 1/2 of its parameters, gradients and optimizer state; tp 1: heads 2-3 of 4" \
        in notes
    assert "rank 2: dp 1: data shard 1 of 2" in notes
    assert "q_proj, k_proj, v_proj, gate_proj, up_proj colwise; o_proj, down_proj rowwise" in notes
    assert "memory per device by strategy on 4 × cpu (stand-in): ddp " in notes


def test_pipeline_plan_names_each_stages_layers_and_the_bubble():
    spec = _spec("  target t { device = cpu  devices = 2  engine = torchrun  parallel = pipeline(pp = 2) }")
    notes = "\n".join(compile_plan(spec, "t").notes)
    assert "rank 0: pp 0: layers 0-1 + embeddings" in notes and "rank 1: pp 1: layers 2-3 + head" in notes
    assert "bubble (pp-1)/(m+pp-1) = 11% of the step idle" in notes  # m = 8 micro-batches, pp = 2


def test_llama_70b_fsdp_x_tp_on_4_x_8_h100_fits_and_each_strategy_is_compared():
    spec = _spec("  target h { instance = p5.48xlarge  nodes = 4  parallel = fsdp(tp = 8) }\n"
                 "  target d { instance = p5.48xlarge  nodes = 4  parallel = ddp }",
                 extra="precision bf16\n  gradient_checkpointing = on", shape=LLAMA_70B)
    plan = compile_plan(spec, "h")
    memory = next(n for n in plan.notes if n.startswith("memory per device by strategy"))
    # "ddp 963.68 GB, fsdp 45.69 GB, ..." -> {"ddp": 963.68, ...}
    unit = {"MB": 1e-3, "GB": 1.0, "TB": 1e3}
    gb = {name: float(value) * unit[u] for name, value, u in
          (part.rsplit(" ", 2) for part in memory.split(": ", 1)[1].split(", "))}
    assert gb["fsdp(tp = 8)"] < gb["fsdp"] < gb["tensor(tp = 8)"] < gb["ddp"], memory
    fit = estimate(spec, next(t for t in spec.targets if t.name == "h"))
    assert fit.fits and fit.total < 80e9
    with pytest.raises(PlanError) as err:  # plain DDP holds the whole model on every GPU
        compile_plan(spec, "d")
    assert err.value.diagnostics[0].code == "E530"


def test_fsdp_memory_shards_states_and_keeps_one_block_gathered():
    spec = _spec("  target f { device = h100  devices = 8  parallel = fsdp }\n"
                 "  target k { device = h100  devices = 8  parallel = fsdp(reshard_after_forward = off) }\n"
                 "  target o { device = h100  devices = 8  parallel = fsdp(offload = cpu) }\n"
                 "  target d { device = h100  devices = 8  parallel = ddp }", extra="precision bf16",
                 shape=dict(layers=32, hidden=4096, heads=32, ffn=11008, seq=2048))
    f, k, o, d = (estimate(spec, t) for t in spec.targets)
    assert f.optimizer == pytest.approx(d.optimizer / 8) and f.gradients == pytest.approx(d.gradients / 8)
    # resharded: 1/8 of the weights + 7/8 of one of the 32 blocks gathered
    assert f.weights == pytest.approx(d.weights / 8 + d.weights / 32 * 7 / 8)
    assert k.weights == pytest.approx(d.weights)  # every block gathered from forward to backward
    assert o.gradients == o.optimizer == 0 and o.weights == pytest.approx(d.weights / 32)


def test_gpipe_holds_every_micro_batch_and_one_f_one_b_pp_of_them():
    spec = _spec("  target g { device = h100  devices = 4  parallel = pipeline(pp = 4) }\n"
                 "  target o { device = h100  devices = 4  parallel = pipeline(pp = 4, schedule = one_f_one_b) }",
                 extra="precision bf16", shape=dict(layers=32, hidden=4096, heads=32, ffn=11008, seq=2048))
    g, o = (estimate(spec, t) for t in spec.targets)
    assert g.activations == pytest.approx(o.activations * 8 / 4)  # accumulation 8 vs pp 4 in flight


@pytest.mark.parametrize("target,setting,words", [
    # Gaudi's FSDP is GaudiTrainer's, in an example script; accelctl's worker does not run it there
    ("target g { device = gaudi2  devices = 8  parallel = fsdp }", "parallel",
     "in an example training script: set script = example"),
    # optimum-habana's training takes no tensor/pipeline degree (GaudiTrainingArguments has none)
    ("target g { device = gaudi2  devices = 8  parallel = tensor(tp = 2) }", "parallel",
     "optimum-habana's training (GaudiTrainingArguments, its example scripts) takes no tensor- or pipeline-"),
    ("target g { device = gaudi2  devices = 8  parallel = pipeline(pp = 2) }", "parallel",
     "takes no tensor- or pipeline-parallel degree"),
    # Neuron shards through neuronx-distributed, not torch FSDP
    ("target x { device = trn1  devices = 2  parallel = fsdp }", "parallel",
     "parallel = zero(stage = 1, tp = N)"),
])
def test_devices_it_is_not_built_for_are_refused_at_the_parallel_line(target, setting, words):
    spec = _spec("  " + target)
    with pytest.raises(PlanError) as err:
        compile_plan(spec, spec.targets[0].name)
    (d,) = err.value.diagnostics
    assert d.code == "E520" and words in d.hint
    assert d.span == spec.origin_of(spec.targets[0].name, setting)


def test_checkpoints_with_a_mesh_strategy_plan_and_generate_is_refused_where_written():
    spec = _spec("  target t { device = cpu  devices = 2  engine = torchrun  parallel = tensor(tp = 2) }",
                 extra="checkpoint { every = 2 steps }")
    assert any("torch.distributed.checkpoint (DCP), sharded" in n for n in compile_plan(spec, "t").notes)
    gen = _spec("  target t { device = cpu  devices = 2  engine = torchrun  parallel = tensor(tp = 2) }",
                task="generate { max_new_tokens = 4 }")
    with pytest.raises(PlanError) as err:
        compile_plan(gen, "t")
    assert "deepspeed_inference(tp = N)" in err.value.diagnostics[0].hint


def test_the_layout_checks_use_the_shape_the_target_runs():
    """A cpu target runs the stand-in; an accelerator target the real shape (E416 on each)."""
    text = BASE.format(task="pretrain { }", extra="", targets="  target c { device = cpu  devices = 8  "
                       "parallel = tensor(tp = 8) }", **TINY)
    with pytest.raises(WorkloadError) as err:
        check(parse(text, "p.wl"))
    assert [d.code for d in err.value.diagnostics] == ["E416"]
    assert "tp = 8 does not divide the model's 4 heads" in err.value.diagnostics[0].message
    # the 64-head real shape takes tp = 8 on h100
    spec = _spec("  target h { device = h100  devices = 8  parallel = tensor(tp = 8) }", shape=LLAMA_70B)
    assert spec.targets[0].parallel.tp == 8


def test_sequence_parallel_plan_states_each_ranks_positions_and_divides_what_tp_left_whole():
    """Korthikanti et al. (2022), section 4.2.2: tensor parallel keeps 10·s·b·h per layer whole
    (at 2 bytes an element, with its two dropout masks; 8·s·b·h for a llama, which has no
    dropout); sequence parallel divides that by tp too, and the layer inputs gradient
    checkpointing keeps."""
    targets = ("  target t { device = h100  devices = 8  parallel = tensor(tp = 8) }\n"
               "  target s { device = h100  devices = 8  parallel = tensor(tp = 8, sequence_parallel = on) }\n"
               "  target c { device = h100  devices = 8  parallel = tensor(tp = 8, sequence_parallel = on)"
               "  gradient_checkpointing = on }\n"
               "  target n { device = h100  devices = 8  parallel = tensor(tp = 8)  gradient_checkpointing = on }")
    shape = dict(layers=32, hidden=4096, heads=32, ffn=11008, seq=2048)
    spec = _spec(targets, extra="precision bf16", shape=shape)
    t, s, c, n = (estimate(spec, x) for x in spec.targets)
    s_b_h = 2048 * 1 * 4096
    assert t.activations - s.activations == pytest.approx(32 * 8 * s_b_h * 7 / 8)
    assert n.activations - c.activations == pytest.approx(32 * 2 * s_b_h * 7 / 8 + 8 * s_b_h * 7 / 8)
    assert s.weights == t.weights and s.optimizer == t.optimizer
    notes = "\n".join(compile_plan(spec, "s").notes)
    assert "tp 1: heads 4-7 of 32, MLP columns 1376-2751 of 11008, sequence positions 256-511 of 2048" in notes
    assert "sequence parallel over tp 8: input_layernorm, post_attention_layernorm run on 256 of 2048 positions" in notes
    assert "tensor(tp = 8, sequence_parallel = on) " in notes
    assert "sequence" not in "\n".join(compile_plan(spec, "t").notes)


def test_compile_plans_under_fsdp_per_block_and_is_refused_at_its_line_with_tp_or_pp():
    spec = _spec("  target f { device = h100  devices = 8  parallel = fsdp }\n"
                 "  target ft { device = h100  devices = 8  parallel = fsdp(tp = 2) }\n"
                 "  target t { device = h100  devices = 8  parallel = tensor(tp = 2) }\n"
                 "  target p { device = h100  devices = 8  parallel = pipeline(pp = 2) }",
                 extra="precision bf16\n  optimize { compile = on }\n  measure { warmup = 2 steps  steps = 4 steps }")
    plan = compile_plan(spec, "f")
    assert plan.job.optimize.compile and plan.job.strategy == "sharded"
    assert any(n.startswith("torch.compile(mode=default) of each transformer block, before FSDP2's fully_shard")
               for n in plan.notes)
    for name, strategy in (("ft", "fsdp split (tp > 1)"), ("t", "tensor split"), ("p", "pipeline split")):
        with pytest.raises(PlanError) as err:
            compile_plan(spec, name)
        d = err.value.diagnostics[0]
        assert d.code == "E520" and f"torch.compile with the {strategy} is not built" in d.hint
        assert d.span.line == 6  # optimize { compile = on }
