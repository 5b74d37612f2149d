"""te_fp8 plans (seed 002) and their check against Transformer Engine's real source.

The TE checks read the pure-python meta wheel (``pip install --no-deps
transformer-engine==2.20.2``) and skip when it is absent.
"""

from __future__ import annotations

import contextlib
import json
import sys
import types
from pathlib import Path

import pytest
from backend_plans import load_spec, plan_with

from accelctl.backends.te_fp8 import backend as te_fp8
from accelctl.backends.te_fp8.backend import TeFp8Backend, autocast_api, te_config
from accelctl.contract.plan import Plan
from accelctl.frozen import replace

ROOT = Path(__file__).resolve().parents[2]
TE_LAYERS = ROOT / "accelctl" / "worker" / "te_layers.py"

# seed 002: timm ViT-Huge shape, random images, SGD lr 0.001 momentum 0.9, DDP over 8 GPUs,
# batch 64 per GPU (doubled on H100), steps 11..50 averaged
SEED_002 = """
workload vit_huge_fp8 {
  task pretrain
  model vit(layers = 32, hidden = 1280, heads = 16, mlp_ratio = 4, image_size = 224, patch = 16, classes = 1000)
  optimizer sgd(lr = 0.001, momentum = 0.9)
  measure { warmup = 10 steps  steps = 40 steps }
  target p5 {
    instance  = p5.48xlarge
    batch { micro = 128 }
    precision fp8 { format = hybrid  amax_history = 16  amax_algo = max  margin = 0 }
    te_layers = on
  }
  target p4d {
    instance  = p4d.24xlarge
    batch { micro = 64 }
    precision = bf16
  }
  target p4d_te {
    instance  = p4d.24xlarge
    batch { micro = 64 }
    precision = bf16
    te_layers = on
  }
}
"""


@pytest.fixture(scope="module")
def spec():
    return load_spec(SEED_002)


@pytest.fixture(scope="module")
def te_source():
    from accelctl.backends.te_fp8.check import TeSource

    te = TeSource.locate()
    if te is None:
        pytest.skip("transformer-engine (pure-python meta wheel) is not installed")
    return te


def recipe_of(plan: Plan) -> dict:
    (f,) = [f for f in plan.files if f.path == "te_recipe.json"]
    return json.loads(f.content)


# -- plans ---------------------------------------------------------------------------------


def test_p5_fp8_plan_is_torchrun_nccl_with_te_recipe(spec):
    p = plan_with(TeFp8Backend(), spec, "p5")
    (launch,) = p.launches
    assert launch.argv == ("torchrun", "--standalone", "--nnodes=1", "--nproc_per_node=8",
                           "-m", "accelctl.worker", "{run_dir}/job.json")
    assert launch.processes == 8
    assert p.job.device.comm == "nccl" and p.job.device.adapter == "cuda"
    assert launch.env["ACCELCTL_TE_CONFIG"] == "{run_dir}/te_recipe.json"
    assert p.job.batch.micro == 128 and p.job.precision.dtype == "fp8" and p.job.backend == "te_fp8"
    cfg = recipe_of(p)
    assert cfg["transformer_engine"] == "2.20" and cfg["fp8"] and cfg["outer_autocast"] == "bf16"
    assert cfg["autocast"] == {"function": "autocast", "recipe_keyword": "recipe", "kwargs": {"enabled": True}}
    assert cfg["recipe"] == {"class": "DelayedScaling", "kwargs": {
        "fp8_format": "HYBRID", "amax_history_len": 16, "amax_compute_algo": "max", "margin": 0}}
    assert cfg["layer"]["kwargs"] == {"self_attn_mask_type": "no_mask", "attn_input_format": "bshd",
                                      "layernorm_epsilon": 1e-6}
    text = " ".join(p.notes)
    assert "te.autocast(enabled=True, recipe=DelayedScaling(" in text and "torch.autocast(bf16)" in text
    assert not p.warnings


def test_te_plan_round_trips_through_json(spec):
    p = plan_with(TeFp8Backend(), spec, "p5")
    assert Plan.from_dict(json.loads(p.to_json())) == p


def test_torchrun_command_parses_with_torchs_own_parser(spec):
    from torch.distributed.run import get_args_parser

    args = get_args_parser().parse_args(list(plan_with(TeFp8Backend(), spec, "p5").launches[0].argv[1:]))
    assert args.nproc_per_node == "8" and args.standalone and args.module and args.nnodes == "1"
    assert args.training_script == "accelctl.worker" and args.training_script_args == ["{run_dir}/job.json"]


def test_p4d_bf16_is_not_a_te_target_but_te_layers_on_is(spec):
    backend = TeFp8Backend()
    assert not backend.selects(spec, spec.target("p4d"))
    assert backend.selects(spec, spec.target("p4d_te")) and not backend.unsupported(spec, spec.target("p4d_te"))
    p = plan_with(backend, spec, "p4d_te")
    assert "--nproc_per_node=8" in p.launches[0].argv and p.job.batch.micro == 64
    cfg = recipe_of(p)
    assert cfg["fp8"] is False and cfg["autocast"] is None and cfg["recipe"] is None
    assert cfg["outer_autocast"] == "bf16"


def test_fp8_on_a100_is_refused_with_a_reason(spec):
    t = replace(spec.target("p5"), device="a100", instance="")
    assert any("fp8 needs a Hopper/Ada GPU" in r.hint for r in TeFp8Backend().unsupported(spec, t))


def test_fp8_shapes_te_would_reject_are_refused(spec):
    # stand-in ViT: 32 px / 8 px patches = 16 patches + class token = 17 tokens
    small = replace(spec, model=replace(
        spec.model, stand_in={"layers": 2, "hidden": 64, "heads": 4, "mlp_ratio": 4.0, "image_size": 32,
                  "patch": 8, "classes": 10}, real_shape={}))
    t = spec.target("p5")
    odd = replace(t, batch=replace(t.batch, micro=4))
    why = TeFp8Backend().unsupported(small, odd)
    assert any("4 x 17 = 68 is not a multiple of 8" in r.hint for r in why)
    even = replace(t, batch=replace(t.batch, micro=8))
    assert not TeFp8Backend().unsupported(small, even)


def test_non_vit_families_are_refused(spec):
    bert = replace(spec, model=replace(spec.model, family="bert"))
    assert any("has no TE block swap" in r.hint for r in TeFp8Backend().unsupported(bert, spec.target("p5")))


@pytest.mark.parametrize("version,api", [
    ("2.20", ("autocast", "recipe")), ("2.20.2", ("autocast", "recipe")), ("2.9", ("autocast", "recipe")),
    ("2.8", ("fp8_autocast", "fp8_recipe")), ("1.13", ("fp8_autocast", "fp8_recipe")),
    ("0.12", ("fp8_autocast", "fp8_recipe")),  # seed 002's TE
])
def test_autocast_api_follows_the_targeted_version(version, api):
    assert autocast_api(version) == api


def test_te_version_option_changes_the_api(spec):
    t = replace(spec.target("p5"), options=replace(spec.target("p5").options, te_version="2.8"))
    cfg = te_config(spec, t)
    assert cfg["transformer_engine"] == "2.8" and cfg["autocast"]["function"] == "fp8_autocast"
    assert cfg["autocast"]["recipe_keyword"] == "fp8_recipe"


def test_te_fp8_is_registered_and_selected(spec):
    from accelctl.api import plan
    from accelctl.plan.registry import BACKENDS

    assert "te_fp8" in BACKENDS, "te_fp8 is missing from the plug-in table (accelctl.plan.registry.BACKENDS)"
    assert plan(spec, "p5").backend == "te_fp8" and plan(spec, "p4d_te").backend == "te_fp8"
    assert plan(spec, "p4d").backend == "torchrun"


def test_planning_imports_neither_torch_nor_te():
    import subprocess

    code = ("import sys; import accelctl.backends.te_fp8.backend, accelctl.backends.te_fp8.check; "
            "print(sorted(m for m in ('torch', 'transformer_engine', 'timm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"


# -- against Transformer Engine's source ---------------------------------------------------


def test_plans_pass_the_real_te_checks(spec, te_source):
    from accelctl.backends.te_fp8.check import check_config

    for name in ("p5", "p4d_te"):
        assert [str(f) for f in check_config(recipe_of(plan_with(TeFp8Backend(), spec, name)), te_source)] == []
    assert "transformer_engine" not in sys.modules  # read, never imported


def test_fp8_shape_rule_is_tes(te_source):
    assert te_source.fp8_dims() == te_fp8.FP8_DIMS


def test_transformer_layer_signature_read_from_source(te_source):
    sig = te_source.export_signature("TransformerLayer")
    assert sig.required == ("hidden_size", "ffn_hidden_size", "num_attention_heads")
    assert {"hidden_dropout", "attention_dropout", "self_attn_mask_type", "attn_input_format", "drop_path_rate",
            "params_dtype", "device", "bias", "layernorm_epsilon"} <= set(sig.params)
    old = te_source.export_signature("fp8_autocast")
    new = te_source.export_signature("autocast")
    assert old.deprecated and not new.deprecated
    assert "recipe" in new.params and "fp8_recipe" in old.params


@pytest.mark.parametrize("change,expect", [
    (lambda c: c["recipe"]["kwargs"].update(amax_history=16), "has no field 'amax_history' (TE would silently"),
    (lambda c: c["recipe"]["kwargs"].update(amax_compute_algo="median"), "Input should be 'max' or 'most_recent'"),
    (lambda c: c["recipe"]["kwargs"].update(fp8_format="E5M2"), "Pure E5M2 training is not supported"),
    (lambda c: c["recipe"]["kwargs"].update(fp8_format="E3M4"), "Format has no member 'E3M4'"),
    (lambda c: c["recipe"]["kwargs"].update(amax_history_len="long"), "amax_history_len"),
    (lambda c: c["layer"]["kwargs"].update(attn_mask_type="no_mask"), "has no parameter 'attn_mask_type'"),
    (lambda c: c["autocast"].update(function="fp8_autocast", recipe_keyword="fp8_recipe"), "is deprecated in TE 2.20"),
    (lambda c: c["autocast"].update(recipe_keyword="fp8_recipe"), "has no parameter 'fp8_recipe'"),
    # TE 2.20's own deprecation message says "autocast(..., group=...)": the parameter is amax_reduction_group
    (lambda c: c["autocast"]["kwargs"].update(group=None), "has no parameter 'group'"),
    (lambda c: c.update(transformer_engine="2.8"), "the plan targets TE 2.8 but the source read is TE 2.20"),
])
def test_the_real_te_rejects_broken_configs(spec, te_source, change, expect):
    from accelctl.backends.te_fp8.check import check_config

    cfg = recipe_of(plan_with(TeFp8Backend(), spec, "p5"))
    change(cfg)
    found = [str(f) for f in check_config(cfg, te_source)]
    assert any(expect in f for f in found), found


def test_worker_te_code_uses_only_real_te_names(te_source):
    from accelctl.backends.te_fp8.check import check_worker_source

    assert [str(f) for f in check_worker_source(TE_LAYERS, te_source)] == []


@pytest.mark.parametrize("old,new,expect", [
    ("ffn_hidden_size=int(dim * mlp_ratio)", "ffn_size=int(dim * mlp_ratio)", "has no parameter 'ffn_size'"),
    ("ffn_hidden_size=int(dim * mlp_ratio),", "", "needs ffn_hidden_size"),
    ("te.TransformerLayer)", "te.TransformerLayers)", "has no TransformerLayers"),
    ("from transformer_engine.common import recipe as te_recipe",
     "from transformer_engine.common.recipe import DelayedScalling", "has no DelayedScalling"),
])
def test_worker_check_catches_mistakes(tmp_path, te_source, old, new, expect):
    from accelctl.backends.te_fp8.check import check_worker_source

    src = TE_LAYERS.read_text()
    assert old in src
    bad = tmp_path / "te_layers.py"
    bad.write_text(src.replace(old, new))
    found = [str(f) for f in check_worker_source(bad, te_source)]
    assert any(expect in f for f in found), found


def test_worker_block_takes_what_timm_passes():
    import importlib.util

    if importlib.util.find_spec("timm") is None:  # only its source is read, never imported
        pytest.skip("timm is not installed")
    from accelctl.backends.te_fp8.check import check_timm_block_fn

    assert [str(f) for f in check_timm_block_fn(TE_LAYERS)] == []


# -- the worker side, on CPU, with TE stood in by a layer that enforces TE's real signature --


@pytest.fixture
def fake_te(monkeypatch, te_source):
    """``transformer_engine.pytorch`` whose TransformerLayer/autocast accept exactly TE 2.20.2's
    parameters (read from the source), and the real recipe module."""
    import torch

    layer_sig = te_source.export_signature("TransformerLayer")
    autocast_sig = te_source.export_signature("autocast")
    calls: dict[str, list] = {"layer": [], "autocast": []}

    def enforce(sig, kwargs):
        unknown = set(kwargs) - set(sig.params)
        missing = set(sig.required) - set(kwargs)
        assert not unknown and not missing, (sig.qualname, unknown, missing)

    class TransformerLayer(torch.nn.Module):
        def __init__(self, **kwargs):
            enforce(layer_sig, kwargs)
            super().__init__()
            calls["layer"].append(kwargs)
            self.proj = torch.nn.Linear(kwargs["hidden_size"], kwargs["hidden_size"])

        def forward(self, hidden_states, attention_mask=None):
            return hidden_states + self.proj(hidden_states)

    def autocast(**kwargs):
        enforce(autocast_sig, kwargs)
        calls["autocast"].append(kwargs)
        return contextlib.nullcontext()

    linear_sig = te_source.export_signature("Linear")

    class Linear(torch.nn.Linear):
        def __init__(self, in_features, out_features, **kwargs):
            enforce(linear_sig, {"in_features": in_features, "out_features": out_features, **kwargs})
            calls.setdefault("linear", []).append(kwargs)
            super().__init__(in_features, out_features, bias=kwargs.get("bias", True))  # (on the CPU here)

    pkg = types.ModuleType("transformer_engine")
    pytorch = types.ModuleType("transformer_engine.pytorch")
    pytorch.TransformerLayer, pytorch.autocast, pytorch.Linear = TransformerLayer, autocast, Linear
    common = types.ModuleType("transformer_engine.common")
    common.recipe = te_source.recipe_module
    pkg.pytorch, pkg.common = pytorch, common
    for name, mod in (("transformer_engine", pkg), ("transformer_engine.pytorch", pytorch),
                      ("transformer_engine.common", common), ("transformer_engine.common.recipe", common.recipe)):
        monkeypatch.setitem(sys.modules, name, mod)
    return calls


def test_te_layers_builds_a_timm_vit_and_the_fp8_context(spec, fake_te, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from timm.models.vision_transformer import VisionTransformer

    from accelctl.worker import te_layers

    path = tmp_path / "te_recipe.json"
    path.write_text(json.dumps(recipe_of(plan_with(TeFp8Backend(), spec, "p5"))))
    monkeypatch.setenv(te_layers.CONFIG_ENV, str(path))
    cfg = te_layers.load()
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, num_classes=10,
                              block_fn=te_layers.block_fn(cfg))
    assert [type(b).__name__ for b in model.blocks] == ["TEBlock", "TEBlock"]
    first = fake_te["layer"][0]
    assert first["hidden_size"] == 64 and first["ffn_hidden_size"] == 256 and first["num_attention_heads"] == 4
    assert first["self_attn_mask_type"] == "no_mask" and first["attn_input_format"] == "bshd"
    assert first["device"] == "cuda" and first["hidden_dropout"] == 0.0
    fp8 = te_layers.forward_context(cfg)
    with torch.autocast("cpu", dtype=torch.bfloat16), fp8():
        out = model(torch.randn(2, 3, 32, 32))
    assert out.shape == (2, 10)
    (kw,) = fake_te["autocast"]
    assert kw["enabled"] is True and type(kw["recipe"]).__name__ == "DelayedScaling"
    assert kw["recipe"].amax_history_len == 16 and kw["recipe"].fp8_format.name == "HYBRID"


def test_te_layers_without_fp8_or_plan_is_a_no_op(spec, tmp_path, monkeypatch):
    from accelctl.worker import te_layers

    monkeypatch.delenv(te_layers.CONFIG_ENV, raising=False)
    assert te_layers.load() is None
    assert te_layers.forward_context(None) is contextlib.nullcontext
    cfg = recipe_of(plan_with(TeFp8Backend(), spec, "p4d_te"))
    assert te_layers.forward_context(cfg) is contextlib.nullcontext  # TE not imported for bf16 + TE blocks


LLAMA_WL = """workload w {{
  task pretrain {{ objective = causal_lm }}
  model llama(layers = 2, hidden = 64, heads = 4, ffn = {ffn}, vocab = 256)
  dataset synthetic(seq_len = 16 tokens)
  precision fp8 {{ format = hybrid }}
  batch {{ micro = 8 }}
  target h100 {{ device = h100  devices = 1 }}
}}
"""


def llama_plan(ffn: int):
    from accelctl.api import plan
    from accelctl.dsl.parser import parse
    from accelctl.language.check import check

    (s,) = check(parse(LLAMA_WL.format(ffn=ffn), "w.wl"))
    return plan(s, "h100")


def test_llama_plans_te_linear_for_its_projections_and_passes_the_real_te_checks(te_source):
    from accelctl.backends.te_fp8.check import check_config

    p = llama_plan(172)
    cfg = recipe_of(p)
    assert p.backend == "te_fp8" and cfg["layer"]["class"] == "Linear" and cfg["fp8"]
    # ffn 172 is not a multiple of 16: the MLP stays transformers' nn.Linear, and the plan says why
    assert cfg["layer"]["modules"] == [f"model.layers.*.self_attn.{x}_proj" for x in "qkvo"]
    assert any("172 not a multiple of 16" in n and "lm_head" in n for n in p.notes)
    assert [str(f) for f in check_config(cfg, te_source)] == []


def test_te_layers_swaps_the_llama_projections_for_te_linear(fake_te, tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    import transformers

    from accelctl.worker import te_layers

    cfg = recipe_of(llama_plan(128))
    assert len(cfg["layer"]["modules"]) == 7  # q, k, v, o, gate, up, down
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4))
    ids = torch.randint(0, 256, (2, 16))
    before = model(input_ids=ids).logits
    te_layers.swap_linears(model, cfg, lambda *_: None)
    swapped = sorted(n for n, m in model.named_modules() if type(m).__name__ == "Linear" and m.__module__ != "torch.nn.modules.linear")
    assert len(swapped) == 14 and "lm_head" not in swapped
    assert all(kw["params_dtype"] == torch.float32 and "bias" in kw for kw in fake_te["linear"])
    # the same weights: the same logits
    assert torch.allclose(model(input_ids=ids).logits, before, atol=1e-5)
