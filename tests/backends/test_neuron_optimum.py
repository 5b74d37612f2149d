"""Neuron targets that split a model: optimum-neuron's tensor-parallel training (ZeRO-1) and its
causal-LM export + generation, checked against optimum-neuron 0.4.5's interfaces read from
its wheel (the stored table; rebuilt from the wheel itself when it is at hand)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from accelctl.api import check, parse, plan
from accelctl.backends.xla_neuron import optimum_table
from accelctl.backends.xla_neuron.optimum_check import check_optimum_plan
from accelctl.errors import PlanError, WorkloadError
from accelctl.plan.memory import estimate
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
LLAMA = ROOT / "workloads" / "configs" / "Llama-2-7b-hf.json"
MISTRAL = ROOT / "workloads" / "configs" / "Mistral-7B-v0.1.json"
WHEEL = os.environ.get("ACCELCTL_OPTIMUM_NEURON_WHEEL", "")

TRAIN = f"""
workload train {{
  task finetune {{ objective = causal_lm }}
  model hf("meta-llama/Llama-2-7b-hf") {{ family = llama  config = "{LLAMA}" }}
  dataset synthetic(seq_len = 2048 tokens)
  optimizer adamw(lr = 0.00002)
  precision bf16
  gradient_checkpointing = on
  batch {{ micro = 1  accumulation = 8 }}
  target zero1  {{ instance = trn1.32xlarge  parallel = zero(stage = 1, tp = 8) }}
  target pre    {{ instance = trn1.32xlarge  parallel = zero(stage = 1, tp = 8)  neuron_parallel_compile = on }}
  target tp     {{ instance = trn1.32xlarge  parallel = tensor(tp = 8) }}
  target pp     {{ instance = trn1.32xlarge  parallel = zero(stage = 1, tp = 8, pp = 4) }}
  target zero3  {{ instance = trn1.32xlarge  parallel = zero(stage = 3, tp = 8) }}
  target uneven {{ instance = trn1.32xlarge  devices = 24  parallel = zero(stage = 1, tp = 24) }}
  target ddp    {{ instance = trn1.32xlarge }}
}}
"""
GENERATE = f"""
workload gen {{
  task generate {{ prompt = "DeepSpeed is a machine learning framework"  max_new_tokens = 100  batch_size = 1 }}
  model hf("meta-llama/Llama-2-7b-hf") {{ family = llama  config = "{LLAMA}" }}
  precision bf16
  target tp8   {{ instance = inf2.48xlarge  devices = 8  parallel = tensor(tp = 8) }}
  target one   {{ instance = inf2.xlarge  devices = 1 }}
  target split {{ instance = inf2.48xlarge  devices = 24  parallel = tensor(tp = 8) }}
}}
"""
MISTRAL_GEN = f"""
workload mistral {{
  task generate {{ prompt = "Hello"  max_new_tokens = 100  batch_size = 1 }}
  model hf("mistralai/Mistral-7B-v0.1") {{ config = "{MISTRAL}" }}
  precision bf16
  target inf2 {{ instance = inf2.48xlarge  devices = 8  parallel = tensor(tp = 8) }}
}}
"""


def _spec(text: str):
    (spec,) = check(parse(text, "neuron.wl"))
    return spec


def _refused(text: str, target: str):
    spec = _spec(text)
    with pytest.raises(PlanError) as err:
        plan(spec, target)
    return spec, err.value.diagnostics


def test_zero1_tensor_parallel_training_runs_finetune_llama_with_neuron_training_arguments():
    p = plan(_spec(TRAIN), "zero1")
    (launch,) = p.launches
    argv = launch.argv
    assert p.backend == "xla_neuron" and argv[:4] == ("torchrun", "--standalone", "--nnodes=1", "--nproc_per_node=32")
    assert argv[4] == "{optimum_neuron}/examples/training/llama/finetune_llama.py"
    for flag, value in (("--tensor_parallel_size", "8"), ("--pipeline_parallel_size", "1"), ("--zero_1", "true"),
                        ("--model_id", "meta-llama/Llama-2-7b-hf"), ("--gradient_accumulation_steps", "8")):
        assert argv[argv.index(flag) + 1] == value, flag
    assert "--bf16" in argv and "--gradient_checkpointing" in argv
    assert launch.env["NEURON_CC_FLAGS"] == "--model-type transformer --retry_failed_compilation"
    notes = "\n".join(p.notes)
    assert "tp 8 x pp 1 x dp 4 over 32 NeuronCores" in notes and "sharded over the 4 data-parallel ranks" in notes
    result = check_optimum_plan(p)
    assert result.ok, result.messages
    assert "tensor_parallel_size 8, pipeline_parallel_size 1, zero_1 True, bf16 True over 32 processes" in \
        result.messages[0]


def test_memory_divides_weights_by_the_tp_degree_and_the_optimizer_by_zero1s_data_parallel_group():
    spec = _spec(TRAIN)
    zero1, tp, ddp = (estimate(spec, spec.target(name)) for name in ("zero1", "tp", "ddp"))
    # neuronx-distributed splits embeddings and head too: the whole model / 8
    assert zero1.weights == pytest.approx(ddp.weights / 8) and tp.weights == pytest.approx(ddp.weights / 8)
    assert zero1.optimizer == pytest.approx(ddp.optimizer / 8 / 4)  # and ZeRO-1 over dp 4
    assert zero1.fits and not tp.fits and not ddp.fits  # 6.74 B with Adam needs both on 16 GB NeuronCores
    with pytest.raises(PlanError) as err:
        plan(spec, "tp")
    assert err.value.diagnostics[0].code == "E530"


def test_neuron_parallel_compile_runs_the_same_script_for_a_few_steps_first():
    pre, run = plan(_spec(TRAIN), "pre").launches
    assert pre.argv[0] == "neuron_parallel_compile" and pre.wait and pre.argv[1:5] == run.argv[:4]
    assert pre.argv[pre.argv.index("--max_steps") + 1] == "2" and run.argv[run.argv.index("--max_steps") + 1] == "12"


def test_pipeline_parallel_plans_and_zero3_is_refused_at_the_parallel_line():
    p = plan(_spec(TRAIN), "pp")
    argv = p.launches[0].argv
    assert argv[argv.index("--pipeline_parallel_size") + 1] == "4" and check_optimum_plan(p).ok
    spec, (d,) = _refused(TRAIN, "zero3")
    assert d.code == "E520" and "ZeRO is stage 1" in d.hint and d.span == spec.origin_of("zero3", "parallel")
    spec, (d,) = _refused(TRAIN, "uneven")  # zero(tp) is not a mesh strategy: the Neuron backend says it
    assert "tp = 24 does not divide the model's 32 heads" in d.hint


def test_generate_exports_the_causal_lm_and_runs_generation_py_on_it():
    p = plan(_spec(GENERATE), "tp8")
    export, run = p.launches
    assert export.wait and export.argv[:3] == ("optimum-cli", "export", "neuron")
    argv = export.argv
    for flag, value in (("--model", "meta-llama/Llama-2-7b-hf"), ("--task", "text-generation"),
                        ("--instance_type", "inf2"), ("--batch_size", "1"), ("--sequence_length", "128"),
                        ("--tensor_parallel_size", "8")):
        assert argv[argv.index(flag) + 1] == value, flag
    assert argv[-1] == "{run_dir}/neuron_model" and "--auto_cast_type" not in argv
    assert run.argv[1] == "{optimum_neuron}/examples/inference/text-generation/generation.py"
    assert run.argv[2] == "{run_dir}/neuron_model" and run.argv[run.argv.index("--length") + 1] == "100"
    assert any("greedy decoding is not what it runs" in w for w in p.warnings)
    result = check_optimum_plan(p)
    assert result.ok, result.messages
    fit = next(n for n in p.notes if n.startswith("memory per device"))
    assert "weights 1.68 GB" in fit  # 13.48 GB / tp 8


def test_the_check_rejects_what_optimum_neurons_interfaces_do_not_take():

    p = plan(_spec(GENERATE), "tp8")
    export, run = p.launches
    bad_type = replace(export, argv=tuple("inf1" if a == "inf2" else a for a in export.argv))
    dropped = replace(export, argv=(*export.argv[:-1], "--auto_cast_type", "bf16", export.argv[-1]))
    for launch, words in ((bad_type, "invalid choice: 'inf1'"), (dropped, "auto_cast_type passed")):
        result = check_optimum_plan(replace(p, launches=(launch, run)))
        assert result.ok is False and words in " ".join(result.messages), result.messages
    t = plan(_spec(TRAIN), "zero1")
    (launch,) = t.launches
    typo = replace(launch, argv=tuple("--tensor_paralel_size" if a == "--tensor_parallel_size" else a
                                      for a in launch.argv))
    result = check_optimum_plan(replace(t, launches=(typo,)))
    assert result.ok is False and "unrecognized arguments: --tensor_paralel_size" in " ".join(result.messages)


def test_generate_refusals_are_at_their_lines():
    spec, diags = _refused(GENERATE, "split")  # 24 cores, tp 8: the export runs tp cores in one process
    assert "devices = tp (8)" in diags[0].hint
    spec, (d,) = _refused(MISTRAL_GEN, "inf2")  # 0.4.5 registers no NxD mistral decoder
    assert "has no Neuron text-generation model for mistral" in d.hint and d.span == spec.origin_of("inf2", "model")


def test_query_heads_need_not_divide_tp_for_generation_but_do_for_training():
    gen = GENERATE.replace("target tp8   { instance = inf2.48xlarge  devices = 8  parallel = tensor(tp = 8) }",
                           "target tp8   { instance = inf2.48xlarge  devices = 24  parallel = tensor(tp = 24) }")
    notes = "\n".join(plan(_spec(gen), "tp8").notes)
    assert "query heads 32 padded to 48" in notes  # get_shardable_head_counts pads them
    train = TRAIN.replace("target zero1  { instance = trn1.32xlarge  parallel = zero(stage = 1, tp = 8) }",
                          "target zero1  { instance = trn1.32xlarge  devices = 24  parallel = tensor(tp = 24) }")
    with pytest.raises(WorkloadError) as err:
        _spec(train)
    (d,) = err.value.diagnostics
    assert d.code == "E416" and "tp = 24 does not divide the model's 32 heads (neuronx-distributed's" in d.message


def test_the_stored_table_is_optimum_neurons():
    table = optimum_table.stored()
    assert table["optimum_neuron"] == "0.4.5"
    assert table["export"]["--num_cores"]["dest"] == "tensor_parallel_size"  # the old name of tp_degree
    assert {"tensor_parallel_size", "pipeline_parallel_size", "zero_1"} <= set(table["training_args"])
    assert "llama" in table["inference"]["text-generation"] and "mistral" not in table["inference"]["text-generation"]
    assert "auto_cast_type" in table["dropped_export_kwargs"]


@pytest.mark.skipif(not WHEEL, reason="set ACCELCTL_OPTIMUM_NEURON_WHEEL to an optimum_neuron-0.4.5 wheel "
                    "(pip download --no-deps optimum-neuron==0.4.5) to rebuild the table from it: NOT RUN")
def test_the_stored_table_is_rebuilt_from_the_wheel():
    from accelctl.backends.xla_neuron.check import WheelSource

    built = optimum_table.build_table(WheelSource(WHEEL))
    stored = optimum_table.stored()
    stored.pop("examples")
    assert built == stored


@pytest.mark.parametrize("path,workload,target", [("llama2_7b.wl", "llama2_7b_zero3", "trn1"),
                                                  ("mixtral_8x7b.wl", "mixtral_8x7b_generate", "inf2")])
def test_the_shipped_neuron_targets_plan_fit_and_pass_the_check(path, workload, target):
    from accelctl.api import load

    spec = next(s for s in load(ROOT / "workloads" / path) if s.name == workload)
    p = plan(spec, target)
    assert p.backend == "xla_neuron"
    fit = estimate(spec.for_target(spec.target(target)), spec.target(target))
    assert fit.fits and fit.basis == "real", fit.describe()
    result = check_optimum_plan(p)
    assert result.ok, result.messages
