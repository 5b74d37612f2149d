"""``stack { }`` (docs/language.md 3.14): checked where written, inherited by the targets, a pin the
plan depends on deciding it (the same words in validate, plan and run), rendered by the plan;
and ``xla_use_bf16 = on`` (seed 004's XLA_USE_BF16) in the Neuron plans."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from accelctl.dsl.parser import parse
from accelctl.plan.compile import compile_plan
from accelctl.plan.stack import unchecked
from accelctl.language.check import check

ROOT = Path(__file__).resolve().parents[2]

WL = """workload w {
  task generate { max_new_tokens = 5 }
  model hf("bigscience/bloomz-7b1") { stand_in = bloom(layers = 2, hidden = 64, heads = 4) }
  precision fp16
  stack { image = "nvcr.io/nvidia/pytorch:24.05-py3"  packages { transformers = "4.43.4"  Huggingface_Hub = "0.36.2" } }
  target a100 {
    devices  = 1
    parallel = deepspeed_inference(tp = 1, kernel_inject = on)
    stack { sdk = cuda("12.1")  packages { transformers = "4.43.3"  deepspeed = "0.19.8" } }
  }
  target new {
    device   = a100
    parallel = deepspeed_inference(tp = 1, kernel_inject = on)
    stack { packages { transformers = "4.44.0" } }
  }
  target plain { device = a100  parallel = deepspeed_inference(tp = 1, kernel_inject = on) }
  TARGETS
}
"""


def specs(text: str, extra: str = ""):
    return check(parse(text.replace("TARGETS", extra), "w.wl"))


def test_a_target_inherits_the_workloads_stack_and_pins_over_it():
    (spec,) = specs(WL)
    own, inherited = spec.target("a100").stack, spec.target("plain").stack
    assert own.image == inherited.image == "nvcr.io/nvidia/pytorch:24.05-py3"
    assert (own.sdk, own.sdk_version) == ("cuda", "12.1") and inherited.sdk == ""
    assert own.packages == {"deepspeed": "0.19.8", "huggingface-hub": "0.36.2", "transformers": "4.43.3"}
    assert inherited.packages == {"huggingface-hub": "0.36.2", "transformers": "4.43.4"}
    # written only where a stack applies: a workload without one keeps its spec golden
    (bare,) = specs(WL.replace('stack { image = "nvcr.io/nvidia/pytorch:24.05-py3"  packages { transformers = '
                               '"4.43.4"  Huggingface_Hub = "0.36.2" } }', ""))
    assert "stack" not in bare.to_dict()["targets"][2] and "stack" in bare.to_dict()["targets"][0]


def _refusals(text: str, target: str):
    from accelctl.plan.verdict import plan_refusals

    (spec,) = check(parse(text, "w.wl"))
    return spec, [d for d in plan_refusals(spec) if f"target {target}" in d.message]


def test_a_pin_that_contradicts_kernel_injection_is_refused_at_its_line_in_validate_plan_and_run(tmp_path, capsys):
    text = WL.replace("TARGETS", "")
    spec, (warning,) = _refusals(text, "new")
    line = text.splitlines().index('    stack { packages { transformers = "4.44.0" } }') + 1
    assert (warning.code, warning.span.line, warning.span.column) == ("E520", line, 24)
    assert "transformers <= 4.43.4, and 4.44.0 is pinned by the target's stack" in warning.hint
    from accelctl.errors import PlanError

    with pytest.raises(PlanError) as exc:
        compile_plan(spec, "new")
    (err,) = exc.value.diagnostics
    assert (err.code, err.span, err.message, err.hint) == (warning.code, warning.span, warning.message, warning.hint)
    # the same words from the command line: validate (a warning), plan and run --rehearse (refused)
    from accelctl.cli import main

    path = tmp_path / "w.wl"
    path.write_text(text, encoding="utf-8")
    words = f"w.wl:{line}:24: warning[E520]: no backend can run target new"
    assert main(["validate", str(path)]) == 0
    said = capsys.readouterr()
    assert words in (said.out + said.err).replace(str(tmp_path) + "/", "")
    for argv in (["plan", str(path), "-t", "new"], ["run", str(path), "-t", "new", "--rehearse", "--headless"]):
        assert main(argv) == 1, argv
        said = capsys.readouterr()
        shown = (said.out + said.err).replace(str(tmp_path) + "/", "")
        assert words.replace("warning", "error") in shown and "4.44.0 is pinned by the target's stack" in shown


def test_pins_that_inject_plan_with_their_requirements_and_stack_notes():
    (spec,) = specs(WL)
    plan = compile_plan(spec, "a100")
    files = {f.path: f.content for f in plan.files}
    assert files["requirements.txt"].splitlines()[2:] == ["deepspeed==0.19.8", "huggingface-hub==0.36.2",
                                                          "transformers==4.43.3"]
    notes = "\n".join(plan.notes)
    assert "stack: SDK CUDA 12.1" in notes and "docker pull nvcr.io/nvidia/pytorch:24.05-py3" in notes
    assert json.loads(files["ds_inference.json"])["replace_with_kernel_inject"] is True
    # without the pin the plan is for transformers 5.23.0, which DeepSpeed's BLOOM kernels refuse
    from accelctl.errors import PlanError

    with pytest.raises(PlanError):
        compile_plan(*specs(WL.replace('packages { transformers = "4.43.4"  Huggingface_Hub = "0.36.2" }', "")),
                     "plain")
    # the engines that take an image run the stack's, unless their block names its own
    from accelctl.plan.stack import engine_settings
    from accelctl.workload.types import EngineSpec

    t = spec.target("a100")
    assert engine_settings(t, "kubernetes", EngineSpec("kubernetes")).settings == {"image": t.stack.image}
    assert engine_settings(t, "aws_batch", EngineSpec("aws_batch", {"image": "mine:1"})).settings == {"image": "mine:1"}
    assert engine_settings(t, "slurm", EngineSpec("slurm")).settings == {}


def test_habana_deepspeed_is_its_git_tag_and_a_host_pin_that_differs_is_a_warning():
    text = """workload w {
  task pretrain { }
  model bert()
  target cpu { stack { packages { habana-deepspeed = "1.8.0"  torch = "0.1" } } }
}
"""
    (spec,) = check(parse(text, "w.wl"))
    plan = compile_plan(spec, "cpu")
    req = {f.path: f.content for f in plan.files}["requirements.txt"]
    assert "deepspeed @ git+https://github.com/HabanaAI/DeepSpeed.git@1.8.0" in req and "torch==0.1" in req
    assert any(w.startswith("stack pins torch 0.1; this machine has ") for w in plan.warnings)


def test_pins_and_sdks_no_check_ran_against_are_not_run():
    (spec,) = specs(WL)
    target = spec.target("a100")
    (result,) = unchecked(target, [])
    assert result.ok is None and "NOT RUN" in result.render()
    assert result.messages[0].startswith("deepspeed==0.19.8: no side environment here holds it")
    assert result.messages[-1] == "SDK CUDA 12.1: not on this machine"
    from accelctl.backends.findings import CheckResult

    covered = CheckResult("x", True, pins=("deepspeed", "huggingface-hub", "transformers"))
    assert [m for r in unchecked(target, [covered]) for m in r.messages] == ["SDK CUDA 12.1: not on this machine"]


def test_bloomz_a100_kernel_injection_targets_plan_on_their_stack():
    specs_ = check(parse((ROOT / "workloads" / "bloomz.wl").read_text(encoding="utf-8"), "bloomz.wl"))
    for wl, target in (("bloomz_176b", "a100"), ("bloomz_7b", "a100_8x"), ("bloomz_7b", "a100_1x")):
        spec = next(s for s in specs_ if s.name == wl)
        plan = compile_plan(spec, target)
        assert plan.backend == "deepspeed_inference"
        assert "transformers==4.43.4" in {f.path: f.content for f in plan.files}["requirements.txt"]
        assert json.loads({f.path: f.content for f in plan.files}["ds_inference.json"]) == {
            "tensor_parallel": {"tp_size": spec.target(target).parallel.tp}, "dtype": "fp16",
            "replace_with_kernel_inject": True}


def test_xla_use_bf16_sets_the_variable_and_says_torch_xla_deprecates_it():
    (spec,) = check(parse((ROOT / "workloads" / "vit_neuron.wl").read_text(encoding="utf-8"), "vit_neuron.wl"))
    plan = compile_plan(spec, "trn1_2xlarge")
    assert all(launch.env["XLA_USE_BF16"] == "1" for launch in plan.launches)
    assert any("XLA_USE_BF16 will be deprecated after the 2.6 release" in n for n in plan.notes)
    bare = check(parse((ROOT / "workloads" / "vit_neuron.wl").read_text(encoding="utf-8").replace(
        "    xla_use_bf16       = on             # 004:29: os.environ['XLA_USE_BF16'] = '1'\n", ""), "v.wl"))[0]
    plan = compile_plan(bare, "trn1_2xlarge")
    assert not any("XLA_USE_BF16" in launch.env for launch in plan.launches)
    assert any("torch.autocast('xla'" in n for n in plan.notes)


def test_the_kubernetes_pods_run_the_stacks_image_and_slurm_says_it_does_not_pass_it():
    text = """workload w {
  task pretrain { }
  model bert()
  stack { image = "nvcr.io/nvidia/pytorch:24.05-py3"  sdk = cuda("12.4") }
  engine kubernetes { volume_claim = "runs"  volume_path = "/runs" }
  engine slurm { partition = "gpu" }
  target k { device = h100  devices = 2  parallel = ddp  engine = kubernetes }
  target s { device = h100  devices = 2  parallel = ddp  engine = slurm }
}
"""
    (spec,) = check(parse(text, "w.wl"))
    k = compile_plan(spec, "k")
    assert any('"image": "nvcr.io/nvidia/pytorch:24.05-py3"' in f.content for f in k.files)
    assert "stack: image nvcr.io/nvidia/pytorch:24.05-py3: the kubernetes job runs in it" in "\n".join(k.notes)
    s = compile_plan(spec, "s")
    assert any("engine slurm does not pass it" in n for n in s.notes)
    # without the stack, engine kubernetes has no image to run (refused, E549)
    from accelctl.errors import PlanError

    (bare,) = check(parse(text.replace('  stack { image = "nvcr.io/nvidia/pytorch:24.05-py3"  sdk = cuda("12.4") }\n',
                                       ""), "w.wl"))
    with pytest.raises(PlanError) as exc:
        compile_plan(bare, "k")
    assert exc.value.diagnostics[0].code == "E549"
