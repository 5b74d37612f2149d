"""Models accelctl has no formulas for, planned from transformers' own class (the ``transformers``
family, ``accelctl.models.module_family``): gemma-2-9b, Phi-3-mini and DeepSeek-V2-Lite validate,
plan and estimate with their exact parameter counts, their stand-in is the same class small, the
facts are read once (a second load starts no subprocess), FSDP wraps the model's decoder layer,
tensor parallel and Gaudi's unoptimized model types are refused at their lines, and a model_type
transformers lacks, or a machine without torch, is a diagnostic at the model's config line.

The tests that read facts start the subprocess (~7 s a model, once a session: the session's
facts cache keeps them) and are slow; the stand-in's config and the refusals of written
architectures are the fast ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from accelctl import api
from accelctl.errors import PlanError, WorkloadError
from accelctl.models import meta_facts, module_family
from accelctl.plan.memory import fmt_params

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests/data/hf_configs"
#: workload name -> (Hub id, config file, exact parameters, active parameters, model class)
MODELS = {
    "gemma2": ("google/gemma-2-9b", "gemma-2-9b", 9_241_705_984, 9_241_705_984, "Gemma2ForCausalLM"),
    "phi3": ("microsoft/Phi-3-mini-4k-instruct", "Phi-3-mini-4k-instruct", 3_821_079_552, 3_821_079_552,
             "Phi3ForCausalLM"),
    "deepseek_v2": ("deepseek-ai/DeepSeek-V2-Lite", "DeepSeek-V2-Lite", 15_706_484_224, 2_661_150_208,
                    "DeepseekV2ForCausalLM"),
}


def workload(name: str, ref: str, config: Path, extra: str = "") -> str:
    return (f"workload {name} {{\n  task finetune {{ }}\n  model hf(\"{ref}\") {{ config = \"{config}\" }}\n"
            "  dataset synthetic(seq_len = 1024 tokens)\n  precision bf16\n"
            "  target h100x8 { device = h100  devices = 8  parallel = fsdp }\n"
            "  target g2 { device = gaudi2  devices = 8  parallel = zero(stage = 3) }\n"
            "  target cpu { device = cpu  precision = fp32 }\n"
            "  target trn { instance = trn1.32xlarge  parallel = zero(stage = 1, tp = 8)  gradient_checkpointing = on }\n"
            + extra + "}\n")


@pytest.fixture(scope="module")
def wl(tmp_path_factory) -> Path:
    """One file, a workload per model (their facts: one subprocess each, once a session)."""
    pytest.importorskip("transformers")
    path = tmp_path_factory.mktemp("module-family") / "models.wl"
    path.write_text("\n".join(workload(n, ref, CONFIGS / f"{c}.json") for n, (ref, c, *_) in MODELS.items()))
    return path


@pytest.fixture(scope="module")
def specs(wl):
    return {s.name: s for s in api.load(wl)}


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "accelctl.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


# ------------------------------------------------------------------------------- slow: the facts


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_spec_holds_the_module_counts_and_a_small_same_class_stand_in(specs, name):
    _, _, total, active, class_name = MODELS[name]
    m = specs[name].model
    assert (m.family, m.params, m.real_shape["params"], m.real_shape["active_params"]) == (
        "transformers", float(total), total, active)
    assert m.real_shape["class_name"] == m.stand_in["class_name"] == class_name
    assert m.stand_in["layers"] == 2 and m.stand_in["params"] < 500_000
    assert "stand_in" not in m.real_shape and "auto_map" not in m.real_shape["config"]


@pytest.mark.slow
def test_the_stand_ins_keep_what_makes_each_architecture(specs):
    gemma, phi, deepseek = (specs[n].model for n in ("gemma2", "phi3", "deepseek_v2"))
    assert (gemma.stand_in["kv_heads"], gemma.stand_in["heads"], gemma.stand_in["tied"]) == (2, 4, True)
    assert gemma.stand_in["window"] == gemma.real_shape["window"] == 4096
    assert phi.stand_in["kv_heads"] == phi.stand_in["heads"] == 4 and phi.stand_in["tied"] is False
    assert deepseek.stand_in["attention"] == deepseek.real_shape["attention"] == "mla"
    assert (deepseek.stand_in["experts"], deepseek.stand_in["experts_per_token"]) == (4, 2)
    assert deepseek.stand_in["active_params"] < deepseek.stand_in["params"]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_plan_json_and_the_text_plan_carry_the_exact_count(wl, name, specs):
    total = MODELS[name][2]
    cp = cli("plan", str(wl), "-w", name, "-t", "h100x8", "--json")
    assert cp.returncode == 0, cp.stderr[-2000:]
    planned = json.loads(cp.stdout)["result"]["plans"][0]
    facts = planned["plan"]["facts"]
    assert facts["params"] == total and facts["basis"] == "real" and facts["fits"] is True
    memory = facts["memory_per_device"]
    assert memory["weights"] > total * 2 / 8  # bf16 shards, plus the one layer gathered
    cp = cli("plan", str(wl), "-w", name, "-t", "h100x8")
    assert cp.returncode == 0, cp.stderr[-2000:]
    assert f"#   model: {fmt_params(total)} parameters (real model)" in cp.stdout.splitlines()[:3]
    block = specs[name].model.real_shape["block"]
    assert f"fully_shard per block ({block}, the model's _no_split_modules)" in cp.stdout
    est = cli("estimate", str(wl), "-w", name, "-t", "h100x8", "--json")
    assert est.returncode == 0, est.stderr[-2000:]
    estimated = json.loads(est.stdout)["result"]["estimates"][0]
    assert estimated["params"] == total and estimated["memory_per_device"] == memory
    # training: 3 x the forward pass, at least the module's matmul FLOPs of the sequence's tokens
    assert estimated["flops_per_step"] > 3 * specs[name].model.real_shape["flops_per_token"] * 1024


@pytest.mark.slow
def test_gaudi_plans_the_model_types_optimum_habana_optimizes_and_refuses_phi3(specs):
    for name in ("gemma2", "deepseek_v2"):
        p = api.plan(specs[name], "g2")
        assert p.backend == "deepspeed" and p.facts.params == MODELS[name][2]
    with pytest.raises(PlanError) as refused:
        api.plan(specs["phi3"], "g2")
    d = refused.value.diagnostics[0]
    assert d.code == "E520" and d.span == specs["phi3"].origins["model"]  # at the model line
    assert "optimum-habana 1.21.2" in d.hint and "'phi3'" in d.hint


@pytest.mark.slow
def test_trainium_refuses_them_naming_the_model_type_optimum_neuron_lacks(specs):
    for name, spec in specs.items():
        with pytest.raises(PlanError) as refused:
            api.plan(spec, "trn")
        d = refused.value.diagnostics[0]
        assert d.code == "E520" and f"not {name} (read from its transformers class)" in d.hint, d


@pytest.mark.slow
def test_the_cpu_target_plans_the_stand_in_at_its_own_count(specs):
    for name, spec in specs.items():
        p = api.plan(spec, "cpu")
        assert p.facts.params == spec.model.stand_in["params"] and p.facts.basis == "stand-in", name


@pytest.mark.slow
def test_a_second_load_reads_the_facts_from_the_cache(wl, specs):
    before = meta_facts.runs
    again = {s.name: s for s in api.load(wl)}
    assert meta_facts.runs == before
    assert again["gemma2"].model.real_shape == specs["gemma2"].model.real_shape


@pytest.mark.slow
def test_tensor_parallel_is_refused_at_the_parallel_line(tmp_path):
    ref, config = MODELS["gemma2"][:2]
    path = tmp_path / "tp.wl"
    path.write_text(workload("g", ref, CONFIGS / f"{config}.json").replace("parallel = fsdp }",
                                                                           "parallel = fsdp(tp = 2) }"))
    with pytest.raises(WorkloadError) as refused:
        api.load(path)
    d = refused.value.diagnostics[0]
    assert (d.code, d.span.line) == ("E416", 6)  # the parallel line
    assert "gemma2 (read from its transformers class) has no tensor-parallel plan" in d.message


@pytest.mark.slow
def test_a_model_type_transformers_lacks_is_refused_at_the_config_line(tmp_path):
    pytest.importorskip("transformers")
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "nonesuch_lm", "hidden_size": 64,
                                  "auto_map": {"AutoConfig": "configuration_x.XConfig"}}))
    path = tmp_path / "w.wl"
    path.write_text(workload("w", "someone/nonesuch", config))
    _, diags = api.validate(path)
    errors = [d for d in diags if d.severity == "error"]
    assert [(d.code, d.span.line) for d in errors] == [("E426", 3)]
    assert "'nonesuch_lm' is not one transformers" in errors[0].message and "remote code" in errors[0].message
    before = meta_facts.runs
    api.validate(path)  # the refusal is kept as well
    assert meta_facts.runs == before


# ------------------------------------------------------------------------------- fast


def test_without_torch_the_model_line_names_the_extra(tmp_path):
    """``sys.modules['torch'] = None``: Python will not import it, as on a machine without it."""
    ref, config = MODELS["gemma2"][:2]
    path = tmp_path / "w.wl"
    path.write_text(workload("w", ref, CONFIGS / f"{config}.json"))
    code = ("import sys; sys.modules['torch'] = None\nfrom accelctl import api\n"
            f"_, diags = api.validate({str(path)!r})\n"
            "print([(d.code, d.span.line, d.message, d.hint) for d in diags if d.severity == 'error'])\n")
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                        env={**os.environ, "PYTHONPATH": str(ROOT), meta_facts.ENV: "off"})
    assert cp.returncode == 0, cp.stderr
    (code_, line, message, hint), = eval(cp.stdout)  # noqa: S307 -- the list this test printed
    assert (code_, line) == ("E426", 3)
    assert "'gemma2' has no formulas" in message and "pip install 'accelctl[run]'" in message
    assert "pip install 'accelctl[run]'" in hint


def test_the_stand_in_config_is_the_same_class_small():
    cfg = json.loads((CONFIGS / "DeepSeek-V2-Lite.json").read_text())
    small = module_family.stand_in_config(cfg)
    assert small["model_type"] == "deepseek_v2" and "auto_map" not in small and "architectures" not in small
    assert (small["num_hidden_layers"], small["hidden_size"], small["num_attention_heads"]) == (2, 64, 4)
    assert (small["n_routed_experts"], small["num_experts_per_tok"], small["first_k_dense_replace"]) == (4, 2, 1)
    assert small["q_lora_rank"] is None and small["kv_lora_rank"] == 32  # no query compression stays none
    assert (small["pad_token_id"], small["bos_token_id"], small["eos_token_id"]) == (0, 1, 2)
    gemma = module_family.stand_in_config(json.loads((CONFIGS / "gemma-2-9b.json").read_text()))
    assert (gemma["num_key_value_heads"], gemma["head_dim"], gemma["sliding_window"]) == (2, 16, 4096)
    typed = module_family.stand_in_config({"model_type": "x", "num_hidden_layers": 6,
                                           "layer_types": ["sliding_attention"] * 5 + ["full_attention"]})
    assert typed["layer_types"] == ["sliding_attention", "full_attention"]


@pytest.mark.parametrize("text,code", [
    ("model transformers(layers = 2)", "E211"),
    ('model hf("x/y") { stand_in = transformers() }', "E211"),
    ('model hf("x/y") { family = transformers }', "E203"),
])
def test_the_family_is_never_written(text, code, tmp_path):
    path = tmp_path / "w.wl"
    path.write_text(f"workload w {{\n  task finetune {{ }}\n  {text}\n  target cpu {{ device = cpu }}\n}}\n")
    _, diags = api.validate(path)
    assert code in [d.code for d in diags], [d.render() for d in diags]
